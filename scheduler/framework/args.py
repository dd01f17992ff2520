"""Typed, validated arguments for plugins and actions.

A plugin declares its arguments as :class:`Arg` entries under the names
Volcano uses (``binpack.weight``, ``sla-waiting-time``); :func:`parse_args`
turns the config's ``arguments`` mapping into a read-only object with every
default filled in.  A wrong type or a value out of range is an :class:`ArgError`
that names the key and what is accepted.

Every key is one of three things:

* implemented — an :class:`Arg` of the plugin or action: converted and checked;
* known but not implemented — a key Volcano reads that Scoria does not act on
  (given to :func:`parse_args` as ``volcano``, or an ``Arg`` with ``ignored``
  set to something other than its default): accepted, and listed in
  :attr:`Args.unimplemented` so that the configuration warns about it and
  counts it (``scheduler.framework.config``);
* unknown — refused, with the closest known key as a suggestion
  (``unknown argument 'binpack.wieght'; did you mean 'binpack.weight'?``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher
from types import MappingProxyType
from typing import Any

from proto.errors import InputError
from proto.vocab.duration import parse_duration
from proto.vocab.quantity import QuantityError, parse_quantity


class ArgError(InputError):
    pass


@dataclass(frozen=True)
class Arg:
    """One argument: its config key, type, default and bounds.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``duration``
    (seconds, from ``90s``/``1h30m``) or ``list`` (comma-separated strings).
    With ``prefix=True`` the key is a prefix (``binpack.resources.``) and the
    value is a mapping from the rest of the key to typed values.  With
    ``fields`` the value is a nested mapping (``thresholds: {cpu: 80, mem: 80}``)
    whose keys must be among ``fields``; ``default`` is then a dict giving
    every field's default, and each given value is converted and bounded as ``kind``.
    """

    key: str
    kind: str
    default: Any
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    prefix: bool = False
    # A value other than the default that Scoria does not act on (Volcano reads it), and why: accepted and listed
    # in Args.unimplemented, so the configuration warns about it and counts it.  ``unsupported``: only the
    # default is implemented; ``ignored``: the argument has no effect at all.
    unsupported: str = ""
    ignored: str = ""
    fields: tuple[str, ...] | None = None  # a nested mapping with these keys


class Args:
    """Parsed arguments, read by attribute (``args.weight``).

    ``unimplemented`` lists the given keys Scoria accepts without acting on
    them, each with the reason, in the order given; ``notes`` are other things
    worth a warning (a value read differently from how it was written);
    ``warnings`` says both in words.
    """

    def __init__(self, values: dict[str, Any], unimplemented: tuple[tuple[str, str], ...] = (),
                 notes: tuple[str, ...] = ()):
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "unimplemented", unimplemented)
        object.__setattr__(self, "notes", notes)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(f"argument {key!r} has no effect: {reason}" for key, reason in self.unimplemented) + self.notes

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("arguments are read-only")

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"Args({self._values})"


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise InputError(f"expected true or false, got {value!r}")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise InputError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    raise InputError(f"expected an integer, got {value!r}")


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise InputError(f"expected a number, got {value!r}")
    try:
        return float(parse_quantity(value))
    except QuantityError:
        raise InputError(f"expected a number, got {value!r}") from None


def _to_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    else:
        items = [v.strip() for v in str(value).split(",")]
    return tuple(v for v in items if v)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "int": _to_int, "float": _to_float, "bool": _to_bool, "str": lambda v: str(v),
    "duration": parse_duration, "list": _to_list,
}


def _convert(arg: Arg, key: str, value: Any) -> Any:
    if arg.fields is not None:
        if not isinstance(value, Mapping):
            raise ArgError(f"argument {key!r}: expected a mapping with keys {', '.join(arg.fields)}, got {value!r}")
        out = dict(arg.default)
        for field, item in value.items():
            if field not in arg.fields:
                raise ArgError(f"argument {key!r}: unknown key {field!r}; known: {', '.join(arg.fields)}")
            out[field] = _convert_one(arg, f"{key}.{field}", item)
        return MappingProxyType(out)
    return _convert_one(arg, key, value)


def _convert_one(arg: Arg, key: str, value: Any) -> Any:
    try:
        out = _CONVERT[arg.kind](value)
    except ValueError as exc:
        raise ArgError(f"argument {key!r}: {exc}") from None
    if arg.minimum is not None and out < arg.minimum:
        raise ArgError(f"argument {key!r}: must be at least {arg.minimum:g}, got {out!r}")
    if arg.maximum is not None and out > arg.maximum:
        raise ArgError(f"argument {key!r}: must be at most {arg.maximum:g}, got {out!r}")
    if arg.choices is not None and out not in arg.choices:
        raise ArgError(f"argument {key!r}: must be one of {', '.join(arg.choices)}, got {out!r}")
    return out


NOT_IMPLEMENTED = "Scoria does not implement it"


_CLOSE = 0.75  # SequenceMatcher ratio from which a known name is offered as the one meant


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name most like ``word`` (case aside), or None when none is close.

    A known name ending in ``.`` is a prefix (``binpack.resources.``): it is
    compared with as much of ``word`` as it is long, so a misspelt prefix is
    found whatever name follows it.
    """
    best, best_ratio = None, _CLOSE
    folded = word.lower()
    for name in known:
        target = name.lower()
        said = folded[:len(target)] if target.endswith(".") else folded
        ratio = SequenceMatcher(None, said, target).ratio()
        if ratio > best_ratio or (ratio == best_ratio and best is None):
            best, best_ratio = name, ratio
    return best


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the known name closest to ``word``, or ``""``."""
    name = closest(word, known)
    return f"; did you mean {name!r}?" if name is not None else ""


def _prefix_of(keys: Iterable[str], key: str) -> str | None:
    """The prefix among ``keys`` (those ending in ``.``) that ``key`` extends with a name, if any."""
    for prefix in keys:
        if prefix.endswith(".") and key.startswith(prefix) and len(key) > len(prefix):
            return prefix
    return None


def parse_args(spec: Mapping[str, Arg], raw: Mapping[str, Any] | None,
               volcano: Mapping[str, str] | None = None) -> Args:
    """Validate ``raw`` against ``spec``.

    ``volcano`` maps the keys Volcano reads for the same plugin or action to why
    Scoria does not act on them (``""``: not implemented); a key ending in ``.``
    there is a prefix (``tdm.revocable-zone.``).  Such a key that ``spec`` does
    not implement is accepted and listed in ``Args.unimplemented``; a key known
    to neither is an :class:`ArgError` naming the closest known key.
    """
    if raw is not None and not isinstance(raw, Mapping):
        raise ArgError(f"arguments must be a mapping, got {type(raw).__name__}")
    volcano = volcano or {}
    values: dict[str, Any] = {}
    for attr, arg in spec.items():
        values[attr] = {} if arg.prefix else arg.default
    unimplemented: list[tuple[str, str]] = []
    by_key = {arg.key: attr for attr, arg in spec.items() if not arg.prefix}
    prefixes = [(arg.key, attr) for attr, arg in spec.items() if arg.prefix]
    for key, value in (raw or {}).items():
        key = str(key)
        if key in by_key:
            attr = by_key[key]
            values[attr] = _convert(spec[attr], key, value)
            _note(spec[attr], key, values[attr], unimplemented)
            continue
        for prefix, attr in prefixes:
            if key.startswith(prefix) and len(key) > len(prefix):
                values[attr][key[len(prefix):]] = _convert(spec[attr], key, value)
                _note(spec[attr], key, values[attr][key[len(prefix):]], unimplemented)
                break
        else:
            known_as = key if key in volcano and not key.endswith(".") else _prefix_of(volcano, key)
            if known_as is None:
                raise ArgError(_unknown(key, spec, volcano))
            unimplemented.append((key, volcano[known_as] or NOT_IMPLEMENTED))
    for attr, arg in spec.items():
        if arg.prefix:
            values[attr] = MappingProxyType(values[attr])
    return Args(values, tuple(unimplemented))


def _note(arg: Arg, key: str, value: Any, unimplemented: list[tuple[str, str]]) -> None:
    """List ``key`` as unimplemented when its value is one Scoria does not act on."""
    reason = arg.unsupported or arg.ignored
    if reason and value != arg.default:
        if arg.unsupported:
            reason = f"only {arg.default!r} is implemented ({reason})"
        unimplemented.append((key, reason))


def _unknown(key: str, spec: Mapping[str, Arg], volcano: Mapping[str, str]) -> str:
    """``unknown argument 'x'`` with the closest known key, else every known key."""
    keys = {arg.key for arg in spec.values()} | set(volcano)
    if not keys:
        return f"unknown argument {key!r}; it takes no arguments"
    written = {k: k + "<name>" if k.endswith(".") else k for k in keys}  # a prefix as it is written
    match = closest(key, keys)
    if match is not None:
        return f"unknown argument {key!r}; did you mean {written[match]!r}?"
    return f"unknown argument {key!r}; known: {', '.join(sorted(written.values()))}"


def acts_on(spec: Mapping[str, Arg], key: str) -> bool:
    """Whether ``key`` is an argument of ``spec`` that takes effect (not merely accepted for compatibility)."""
    return any((arg.key == key or (arg.prefix and key.startswith(arg.key))) and not (arg.ignored or arg.unsupported)
               for arg in spec.values())
