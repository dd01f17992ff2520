"""Typed, validated arguments for plugins and actions.

A plugin declares its arguments as :class:`Arg` entries under the names
Volcano uses (``binpack.weight``, ``sla-waiting-time``); :func:`parse_args`
turns the config's ``arguments`` mapping into a read-only object with every
default filled in.  An unknown key, a wrong type or a value out of range is
an :class:`ArgError` that names the key and what is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from proto.errors import InputError
from proto.vocab.duration import parse_duration  # noqa: F401  (re-exported: plugins and the agent's profile use it)
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
    unsupported: str = ""  # accepted only at its default; any other value is refused with this reason
    ignored: str = ""  # accepted for compatibility but without effect; a non-default value is warned about
    fields: tuple[str, ...] | None = None  # a nested mapping with these keys


class Args:
    """Parsed arguments, read by attribute (``args.weight``); ``warnings`` lists ignored settings."""

    def __init__(self, values: dict[str, Any], warnings: tuple[str, ...] = ()):
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "warnings", warnings)

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
    if arg.unsupported and out != arg.default:
        raise ArgError(f"argument {key!r}: only {arg.default!r} is supported ({arg.unsupported})")
    if arg.choices is not None and out not in arg.choices:
        raise ArgError(f"argument {key!r}: must be one of {', '.join(arg.choices)}, got {out!r}")
    return out


def parse_args(spec: Mapping[str, Arg], raw: Mapping[str, Any] | None) -> Args:
    """Validate ``raw`` against ``spec``; unknown keys are an error."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ArgError(f"arguments must be a mapping, got {type(raw).__name__}")
    values: dict[str, Any] = {}
    for attr, arg in spec.items():
        values[attr] = {} if arg.prefix else arg.default
    warnings: list[str] = []
    by_key = {arg.key: attr for attr, arg in spec.items() if not arg.prefix}
    prefixes = [(arg.key, attr) for attr, arg in spec.items() if arg.prefix]
    for key, value in (raw or {}).items():
        key = str(key)
        if key in by_key:
            attr = by_key[key]
            values[attr] = _convert(spec[attr], key, value)
            if spec[attr].ignored and values[attr] != spec[attr].default:
                warnings.append(f"argument {key!r} has no effect: {spec[attr].ignored}")
            continue
        for prefix, attr in prefixes:
            if key.startswith(prefix) and len(key) > len(prefix):
                values[attr][key[len(prefix):]] = _convert(spec[attr], key, value)
                break
        else:
            known = sorted(by_key) + [f"{p}<name>" for p, _ in prefixes]
            hint = f"; known: {', '.join(known)}" if known else "; it takes no arguments"
            raise ArgError(f"unknown argument {key!r}{hint}")
    for attr, arg in spec.items():
        if arg.prefix:
            values[attr] = MappingProxyType(values[attr])
    return Args(values, tuple(warnings))
