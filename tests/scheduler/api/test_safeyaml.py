"""YAML read as JSON within bounds (scheduler/api/safeyaml.py): what it yields, what it refuses and where,
and that a refused input costs little."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api import safeyaml
from scheduler.api.loader import iter_text
from scheduler.api.manifests import ManifestError
from scheduler.api.safeyaml import Limits, YamlError, load_all, load_one
from tests.support.timebox import timeboxed


@pytest.fixture(params=["libyaml", "pure Python"])
def parser(request, monkeypatch) -> str:
    """Run a test with libyaml's parser (where PyYAML has it) and with PyYAML's own."""
    if request.param == "pure Python":
        monkeypatch.setattr(safeyaml, "_Loader", safeyaml._PyLoader)
    elif safeyaml._Loader is safeyaml._PyLoader:
        pytest.skip("PyYAML without libyaml")
    return request.param


def bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs: each anchor a list of ``width`` aliases of the one before."""
    lines = ["l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


READS = [
    ("unquoted dates stay strings", "t: 2024-01-01T00:00:00Z\nd: 2024-01-01\n",
     {"t": "2024-01-01T00:00:00Z", "d": "2024-01-01"}),
    ("YAML 1.1 scalars", "a: yes\nb: ~\nc: 0x1f\nd: 1_000\ne: 1.5\nf: '=' \ng: =\n",
     {"a": True, "b": None, "c": 31, "d": 1000, "e": 1.5, "f": "=", "g": "="}),
    ("keys are the text written", "80: http\ntrue: x\n1.50: y\n~: z\n", {"80": "http", "true": "x", "1.50": "y", "~": "z"}),
    ("merge keys, written keys win", "base: &b {x: 1, y: 2}\nuse: {<<: *b, y: 3}\n",
     {"base": {"x": 1, "y": 2}, "use": {"x": 1, "y": 3}}),
    ("aliases are copies", "a: &a [1]\nb: *a\n", {"a": [1], "b": [1]}),
    ("explicit JSON tags", "a: !!str 12\nb: !!int '7'\nc: !!float 2\nd: !!null ''\n", {"a": "12", "b": 7, "c": 2.0, "d": None}),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in READS], ids=[c[0] for c in READS])
def test_reads_json_values(parser: str, text: str, expected: dict) -> None:
    doc = load_one(text)
    assert doc == expected
    json.dumps(doc, allow_nan=False)  # whatever it yields can be stored and sent
    if "aliases are copies" in text or "b: *a" in text:
        assert doc["a"] is not doc["b"]


REFUSED = [
    ("binary", "a: !!binary aGVsbG8=\n", 1, 4, "tag !!binary is not allowed"),
    ("set", "a: !!set {x, y}\n", 1, 4, "tag !!set is not allowed"),
    ("timestamp", "a: !!timestamp bogus\n", 1, 4, "tag !!timestamp is not allowed"),
    ("omap", "a: !!omap [{x: 1}]\n", 1, 4, "tag !!omap is not allowed"),
    ("python object", "a: !!python/object:os.system x\n", 1, 4, "is not allowed"),
    ("custom tag", "a: !thing x\n", 1, 4, "tag !thing is not allowed"),
    ("int 12x", "a: !!int 12x\n", 1, 4, "'12x' is not a valid !!int"),
    ("bool maybe", "a: !!bool maybe\n", 1, 4, "'maybe' is not a valid !!bool"),
    ("nan", "a: .nan\n", 1, 4, "not a finite number"),
    ("infinity", "a: [1.0e+999]\n", 1, 5, "not a finite number"),
    ("huge integer", "a: !!int " + "9" * 5000 + "\n", 1, 4, "is not a valid !!int"),
    ("list as key", "? [a]\n: b\n", 1, 3, "a mapping key must be a string"),
    ("duplicate key", "a: 1\nb: 2\na: 3\n", 3, 1, "key 'a' is given twice (first on line 1)"),
    ("self alias", "x: &x\n  y: [*x]\n", 2, 7, "alias *x refers to the node that contains it"),
    ("self alias at the root", "&r [*r]\n", 1, 5, "alias *r refers to the node that contains it"),
    ("control character", "a: b\nc: \"d\x01\"\n", 2, 6, "character U+0001 is not allowed"),
    ("deep nesting", "a: " + "[" * 600 + "]" * 600 + "\n", 1, 103, "nested deeper than 100 levels"),
    ("deep block nesting", "".join("  " * i + f"k{i}:\n" for i in range(150)), 100, 199, "nested deeper than 100"),
    ("deep through aliases", "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 120)),
     100, 6, "nested deeper than 100 levels (through aliases)"),
    ("billion laughs", bomb(), 1, 1, "aliases expand this document by 490,329,036 values (at most 10,000)"),
    ("merge of a scalar", "a: &a 1\nb: {<<: *a}\n", 2, 5, "a merge key (<<) takes a mapping"),
    ("lone surrogate", 'a: "\\ud800x"\n', 1, 4, "unpaired UTF-16 surrogate"),
    ("unclosed", "a: [b\n", 2, 1, "expected ',' or ']'"),
]


@pytest.mark.parametrize("text,line,column,fragment", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refuses_with_line_and_column(parser: str, text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(YamlError) as info:
        load_all(text)
    assert (info.value.line, info.value.column) == (line, column), info.value
    assert fragment in info.value.problem
    assert "\n" not in str(info.value)


def test_size_limits(parser: str) -> None:
    limits = Limits(max_document_chars=1000, max_text_chars=5000)
    load_all("a: " + "x" * 900 + "\n---\nb: " + "y" * 900 + "\n", limits)  # two documents, each under the limit
    with pytest.raises(YamlError, match="the document is longer than 1,000 characters"):
        load_all("a: ok\nb: " + "x" * 990 + "\nc: 1\n", limits)
    with pytest.raises(YamlError, match="the text is longer than 5,000 characters"):
        load_all("a: 1\n" * 1001, limits)
    with pytest.raises(YamlError, match="at most 5"):
        load_all("a: &a [1, 2]\nb: [*a, *a, *a]\n", Limits(max_alias_values=5))
    load_all("a: &a [1, 2]\nb: [*a, *a]\n", Limits(max_alias_values=6))


def test_values_are_counted_over_the_whole_text(parser: str) -> None:
    limits = Limits(max_values=5)
    assert load_all("a: [1, 2]\n", limits) == [{"a": [1, 2]}]  # the mapping, its key, the list and two numbers
    with pytest.raises(YamlError) as info:
        load_all("a: [1, 2, 3]\n", limits)
    assert (info.value.line, info.value.column) == (1, 11) and "more than 5 values" in info.value.problem
    with pytest.raises(YamlError) as info:  # documents count together: a request of many small ones too
        load_all("a: 1\n---\nb: 2\n", limits)
    assert (info.value.line, info.value.column) == (3, 4)
    # an alias is counted by max_alias_values, not here: six written values, whatever *a brings in
    assert load_all("a: &a [1, 2]\nb: *a\n", Limits(max_values=6)) == [{"a": [1, 2], "b": [1, 2]}]


def test_a_request_of_tiny_values_is_refused_where_the_bound_is_reached(parser: str) -> None:
    """Issue 13 item 5: 3.6 MiB of "1," (under every size limit) took 16 s to read, and over 30 s on a loaded
    machine, before the object limit could refuse it; reading stops at the bound instead (its place shows where),
    while the simulator's own files, read with loader.FILE_LIMITS, have no such bound."""
    from scheduler.api.loader import FILE_LIMITS

    text = "a: [" + ",".join(["1"] * 1_900_000) + "]\n"
    assert len(text) < safeyaml.MAX_DOCUMENT_CHARS
    with pytest.raises(ManifestError) as info:
        list(iter_text(text, "big.yaml"))
    column = 4 + 2 * (safeyaml.MAX_VALUES - 3) + 1  # the mapping, its key and the list come first
    assert str(info.value).startswith(f"big.yaml:1:{column}: invalid YAML: more than 200,000 values"), info.value
    assert FILE_LIMITS.max_values is None


@pytest.mark.parametrize("text", [bomb(), bomb(levels=40, width=2), "a: " + "[" * 100_000, "[" * 3_000_000],
                         ids=["billion laughs", "long binary chain", "100k open brackets", "3M open brackets"])
def test_a_refused_input_costs_little(parser: str, text: str) -> None:
    start = time.process_time()  # this process's CPU, which other work on a busy machine does not inflate
    with pytest.raises(YamlError):
        load_all(text)
    assert time.process_time() - start < 1.0  # measured: milliseconds of CPU; expanding the input would take minutes


def test_loader_names_the_file_line_and_column() -> None:
    with pytest.raises(ManifestError) as info:
        list(iter_text("kind: Pod\nmetadata: {name: !!binary eA==}\n", "pods.yaml"))
    assert str(info.value) == ("pods.yaml:2:18: invalid YAML: tag !!binary is not allowed: only strings, numbers, "
                               "true/false, null, lists and mappings")


# YAML 1.1, as PyYAML reads it, takes 1e-06 (no dot) for a string; and a flow key may not pass 1024 characters
_floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: "e" not in repr(f) or "." in repr(f))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _floats, st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=100), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
@timeboxed()
def test_json_round_trips(value) -> None:
    """JSON is YAML: any JSON value reads back as itself (the loader takes .json files too), escaped
    non-BMP characters (UTF-16 surrogate pairs) included, which libyaml alone would refuse."""
    text = json.dumps(value)
    try:
        assert load_one(text) == value
    except YamlError as exc:  # only characters YAML itself forbids, or depth
        assert "is not allowed in YAML" in exc.problem or "nested deeper" in exc.problem


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(list("ab: -[]{},&*!<>|'\"\n\t#?~%@`=\\") + ["!!int ", "!!binary ", "&a ", "*a", "<<: ",
                                                                         "\x00", "é", "\\ud800", "1e999", ".nan"]),
                max_size=40).map("".join))
@timeboxed()
def test_any_text_is_values_or_one_error(text: str) -> None:
    """No text makes the loader raise anything but YamlError, or yield what JSON cannot hold."""
    try:
        docs = load_all(text)
    except YamlError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(docs, allow_nan=False)
