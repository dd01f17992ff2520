"""YAML read as JSON: only strings, numbers, booleans, null, lists and mappings, within bounds.

Manifests and configurations are YAML, but everything Scoria keeps of them is
JSON (the embedded store, the agents' START directives, the control API), so
this loader yields only what JSON can hold and refuses the rest where it is
written, with its line and column:

* tags outside JSON's types (``!!binary``, ``!!set``, ``!!timestamp``,
  ``!!omap``, ``!!python/...``, any ``!custom``) and explicit scalars that do
  not read as their tag says (``!!int 12x``, ``!!bool maybe``); unquoted dates
  stay strings, as Kubernetes reads them; numbers must be finite;
* a mapping key that is not a scalar, or a key given twice (keys are read as
  the text written: ``80: http`` has the key ``"80"``);
* nesting deeper than :data:`MAX_DEPTH` (counting what aliases bring in);
* aliases that refer to themselves, or that add more than
  :data:`MAX_ALIAS_VALUES` values to a document: a "billion laughs" of a
  kilobyte is refused once composed, before anything is expanded;
* a text over :data:`MAX_TEXT_CHARS` (refused before parsing) or a document
  over :data:`MAX_DOCUMENT_CHARS` (refused as soon as parsing reaches that far);
* a text of more than :data:`MAX_VALUES` values (lists, mappings, scalars as
  written), refused as soon as parsing reaches that many: reading costs about
  as much per value as a value's few characters allow, so a request of the
  largest size but made of tiny values (``[1,1,1,…]``) would otherwise take tens
  of seconds to read before it could be refused;
* characters YAML does not allow (control characters), with their place.

Every problem is a :class:`YamlError` (an :class:`~proto.errors.InputError`)
carrying the 1-based line and column; nothing else escapes but bugs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from proto.errors import InputError

MAX_DEPTH = 100  # lists and mappings inside each other; Kubernetes objects need a dozen or two
MAX_ALIAS_VALUES = 10_000  # values aliases may add to one document (merge keys, shared snippets)
MAX_DOCUMENT_CHARS = 4 * 2**20  # one document (an object is at most 1 MiB as JSON: see scheduler.api.manifests)
MAX_TEXT_CHARS = 8 * 2**20  # one request or configuration; files the simulator reads: scheduler.api.loader
MAX_VALUES = 200_000  # values written in one text: a List of a few thousand pods; 4 MiB of "1," would be 2 million

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
_SEQ, _MAP, _MERGE = _TAG + "seq", _TAG + "map", _TAG + "merge"
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False,
          "y": True, "n": False}  # YAML 1.1, as PyYAML's resolver and go-yaml read them
_PYYAML = yaml.constructor.SafeConstructor()  # its scalar readers, for the tags we allow
_JSON_TYPES = "strings, numbers, true/false, null, lists and mappings"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class Limits:
    max_depth: int = MAX_DEPTH
    max_alias_values: int = MAX_ALIAS_VALUES
    max_document_chars: int = MAX_DOCUMENT_CHARS
    max_text_chars: int = MAX_TEXT_CHARS
    max_values: int | None = MAX_VALUES  # None: no bound (the user's own files)


DEFAULT_LIMITS = Limits()


class YamlError(InputError):
    """YAML that cannot be read as JSON: ``problem`` at ``line``:``column`` (1-based; 0 when unknown)."""

    def __init__(self, problem: str, line: int = 0, column: int = 0):
        self.problem, self.line, self.column = problem, line, column
        super().__init__(f"{line}:{column}: {problem}" if line else problem)


def _fail(problem: str, mark: Any) -> YamlError:
    return YamlError(problem, mark.line + 1, mark.column + 1) if mark is not None else YamlError(problem)


class _JsonResolver(Resolver):
    """PyYAML's implicit types less those JSON lacks: a date or ``=`` stays a string."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag not in (_TAG + "timestamp", _TAG + "value")]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()}


class _Composer(Composer):
    """PyYAML's composer, refusing depth and document size as it goes (before recursion or memory run out)."""

    limits: Limits
    _values: int  # values composed in this text so far (each loader reads one text)
    peek_event: Any
    check_event: Any

    def compose_document(self) -> Node | None:
        self._depth = 0
        self._open: set[str] = set()  # anchors of the nodes being composed: an alias to one is a cycle
        self._start = self.peek_event().start_mark.index
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if event.start_mark.index - self._start > self.limits.max_document_chars:
            raise _fail(f"the document is longer than {self.limits.max_document_chars:,} characters", event.start_mark)
        if self.check_event(AliasEvent):
            if event.anchor in self._open:
                raise _fail(f"alias *{event.anchor} refers to the node that contains it", event.start_mark)
            return super().compose_node(parent, index)
        self._values += 1
        if self.limits.max_values is not None and self._values > self.limits.max_values:
            raise _fail(f"more than {self.limits.max_values:,} values (lists, mappings, scalars) in one file or "
                        "request", event.start_mark)
        self._depth += 1
        anchor = event.anchor
        if anchor is not None:
            self._open.add(anchor)
        try:
            if self._depth > self.limits.max_depth:
                raise _fail(f"nested deeper than {self.limits.max_depth} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open.discard(anchor)


class _PyLoader(Reader, Scanner, Parser, _Composer, _JsonResolver):
    """PyYAML's own reader, scanner and parser (pure Python)."""

    def __init__(self, text: str, limits: Limits):
        self.limits, self._values = limits, 0
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _JsonResolver.__init__(self)


def _libyaml_parser() -> Any:
    """libyaml's parser, where PyYAML was built with it (None otherwise)."""
    try:
        return import_module("yaml._yaml").CParser
    except (ImportError, AttributeError):  # pragma: no cover - PyYAML without libyaml
        return None


_CParser: Any = _libyaml_parser()
_Loader: Any = _PyLoader
if _CParser is not None:
    class _CLoader(_Composer, _CParser, _JsonResolver):
        """libyaml's scanner and parser (C, about three times faster), this module's composer: its events
        come from a state machine, and nesting is bounded here before the composer recurses."""

        def __init__(self, text: str, limits: Limits):
            self.limits, self._values = limits, 0
            _CParser.__init__(self, text)
            Composer.__init__(self)
            _JsonResolver.__init__(self)

    _Loader = _CLoader


def iter_nodes(text: str, limits: Limits = DEFAULT_LIMITS) -> Iterator[Node]:
    """Each document's root node (empty documents skipped), checked: its values are then :func:`construct`-able.

    Read with libyaml's parser where PyYAML has it; a text libyaml refuses as
    YAML is read again with PyYAML's own parser, whose verdict (and reading)
    is the one Scoria has always given — libyaml refuses some valid escapes
    (UTF-16 surrogate pairs as JSON writes them) — so a refusal costs at most
    a second reading.
    """
    if len(text) > limits.max_text_chars:
        raise YamlError(f"the text is longer than {limits.max_text_chars:,} characters")
    if _Loader is not _PyLoader:
        try:
            nodes = list(_read(text, limits, _Loader))
        except _SyntaxError:
            pass
        else:
            yield from nodes
            return
    yield from _read(text, limits, _PyLoader)


class _SyntaxError(YamlError):
    """The parser (not this module's bounds or types) refused the text."""


def _read(text: str, limits: Limits, loader_class: Any) -> Iterator[Node]:
    try:
        loader = loader_class(text, limits)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text) from None
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            check_node(node, limits)
            yield node
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise (_SyntaxError(problem, mark.line + 1, mark.column + 1) if mark else _SyntaxError(problem)) from None
    finally:
        loader.dispose()


def load_all(text: str, limits: Limits = DEFAULT_LIMITS) -> list[Any]:
    """Every non-empty document as JSON values."""
    return [construct(node) for node in iter_nodes(text, limits)]


def load_one(text: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The only document (None for an empty text); more than one is refused."""
    docs = list(iter_nodes(text, limits))
    if len(docs) > 1:
        raise _fail("expected one YAML document, found more", docs[1].start_mark)
    return construct(docs[0]) if docs else None


def _reader_error(exc: yaml.reader.ReaderError, text: str) -> YamlError:
    before = text[:exc.position]
    line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
    char = exc.character if isinstance(exc.character, int) else 0
    return _SyntaxError(f"character U+{char:04X} is not allowed in YAML ({exc.reason})", line, column)


def check_node(root: Node, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a self-referencing alias, nesting past the limit through aliases, and alias expansion past the limit.

    Walks the node graph once (aliases share nodes), without recursion, keeping
    each node's expanded size and depth: a kilobyte bomb that would expand to a
    billion values costs a walk of its few dozen nodes.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if depth[key] > limits.max_depth:
                raise _fail(f"nested deeper than {limits.max_depth} levels (through aliases)", node.start_mark)
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _fail("an alias refers to the node that contains it", child.start_mark)
            if id(child) not in size:
                stack.append((child, False))
    written = len(size)
    if size[id(root)] - written > limits.max_alias_values:
        raise _fail(f"aliases expand this document by {size[id(root)] - written:,} values "
                    f"(at most {limits.max_alias_values:,})", root.start_mark)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def construct(node: Node) -> Any:
    """The JSON value of a node :func:`check_node` accepted (each alias occurrence a fresh copy)."""
    if isinstance(node, ScalarNode):
        return _scalar(node)
    if isinstance(node, SequenceNode):
        if node.tag != _SEQ:
            raise _fail(f"tag {_short(node.tag)} is not allowed here: only {_JSON_TYPES}", node.start_mark)
        return [construct(child) for child in node.value]
    if isinstance(node, MappingNode):
        if node.tag != _MAP:
            raise _fail(f"tag {_short(node.tag)} is not allowed here: only {_JSON_TYPES}", node.start_mark)
        return _mapping(node)
    raise _fail(f"unexpected YAML node {type(node).__name__}", getattr(node, "start_mark", None))


def _mapping(node: MappingNode) -> dict[str, Any]:
    out: dict[str, Any] = {}
    merged: dict[str, Any] = {}
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:  # ``<<: *defaults``: keys written here win, then earlier sources
            for source in _merge_sources(value_node, key_node):
                for k, v in construct(source).items():
                    merged.setdefault(k, v)
            continue
        if not isinstance(key_node, ScalarNode):
            raise _fail("a mapping key must be a string (a scalar), not a list or a mapping", key_node.start_mark)
        _scalar(key_node)  # a key too must be a value JSON has; it is kept as the text written
        key = _text(key_node)
        if key in seen:
            raise _fail(f"key {key!r} is given twice (first on line {seen[key]})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
        out[key] = construct(value_node)
    for k, v in merged.items():
        out.setdefault(k, v)
    return out


def _merge_sources(node: Node, key: Node) -> list[MappingNode]:
    if isinstance(node, MappingNode):
        return [node]
    if isinstance(node, SequenceNode) and all(isinstance(n, MappingNode) for n in node.value):
        return list(node.value)
    raise _fail("a merge key (<<) takes a mapping or a list of mappings", key.start_mark)


def _scalar(node: ScalarNode) -> Any:
    tag, text = node.tag, node.value
    if tag in (_STR, _MERGE):
        return _text(node)
    if tag not in (_NULL, _BOOL, _INT, _FLOAT):
        raise _fail(f"tag {_short(tag)} is not allowed: only {_JSON_TYPES}", node.start_mark)
    try:
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return _BOOLS[text.lower()]
        if tag == _INT:
            return _int(text)
        value = _PYYAML.construct_yaml_float(node)  # YAML 1.1 floats exactly as PyYAML reads them
    except (KeyError, ValueError, IndexError):
        raise _fail(f"{_shown(text)} is not a valid {_short(tag)}", node.start_mark) from None
    if not math.isfinite(value):
        raise _fail(f"{_shown(text)} is not a finite number (JSON has no infinity or NaN)", node.start_mark)
    return value


def _text(node: ScalarNode) -> str:
    """A string as written; escaped UTF-16 surrogate pairs (``"\\ud83d\\ude00"``, as JSON writes them) joined."""
    text = node.value
    if _SURROGATE.search(text):
        try:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise _fail("a string holds an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not text",
                        node.start_mark) from None
    return text


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:30] + "…")


def _int(text: str) -> int:
    """YAML 1.1 integers as PyYAML reads them (``0x1F``, ``0o17``/``017``, ``0b101``, ``1_000``, ``1:30``)."""
    value = text.replace("_", "")
    sign = -1 if value[:1] == "-" else 1
    value = value.lstrip("+-")
    if value.startswith("0b"):
        return sign * int(value[2:], 2)
    if value.startswith("0x"):
        return sign * int(value[2:], 16)
    if value.startswith("0o"):
        return sign * int(value[2:], 8)
    if len(value) > 1 and value[0] == "0" and ":" not in value:
        return sign * int(value, 8)
    if ":" in value:
        total = 0
        for part in value.split(":"):
            total = total * 60 + int(part)
        return sign * total
    return sign * int(value)


def _short(tag: str | None) -> str:
    return "!!" + tag[len(_TAG):] if tag and tag.startswith(_TAG) else str(tag)
