"""Kubernetes resource quantities (``500m``, ``4Gi``, ``1e3``) parsed exactly.

The grammar is the API machinery's: a signed decimal number followed by an
optional suffix that is a binary SI unit (Ki … Ei), a decimal SI unit
(n, u, m, "", k, M, G, T, P, E) or a decimal exponent (``e3``, ``E-2``).
Parsing uses :class:`decimal.Decimal` so ``0.1`` CPU is exactly 100 millicores.

Canonical units inside Scoria: ``cpu`` in millicores, everything else in its
base unit (bytes for memory and storage, a count for pods and devices).
Values are rounded up, as Kubernetes does when it converts to an integer.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from proto.errors import InputError
from proto.vocab.placement import GPU_SHARE_RESOURCES

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
# Far beyond any real machine; stops "1e999" from becoming an absurd float.
_MAX = Decimal(2) ** 63


class QuantityError(InputError):
    """A value that is not a valid Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """Return the exact value of a quantity given as a string or a number."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"invalid quantity {value!r}: expected a number or a string like '500m' or '4Gi'")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}: not a finite number")
        number = Decimal(repr(value))
    elif isinstance(value, str):
        number = _parse_text(value.strip())
    else:
        raise QuantityError(f"invalid quantity {value!r}: expected a number or a string like '500m' or '4Gi'")
    if abs(number) > _MAX:
        raise QuantityError(f"invalid quantity {value!r}: out of range")
    return number


def _parse_text(text: str) -> Decimal:
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {text!r}: expected a number with an optional unit "
                            "(m, k, M, G, Ki, Mi, Gi, …) or exponent (e3)")
    try:
        number = Decimal(match.group("num"))
        if match.group("exp"):
            exponent = int(match.group("exp")[1:])
            if abs(exponent) > 30:
                raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
            return number.scaleb(exponent)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"invalid quantity {text!r}") from exc
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def to_canonical(resource: str, value: object) -> int:
    """Parse ``value`` for ``resource`` into Scoria's integer unit, rounding up."""
    if value.__class__ is str:  # the usual form: the same few (``500m``, ``1Gi``) over and over, remembered
        return _text_to_canonical(resource, value)
    return _to_canonical(resource, value)


@lru_cache(maxsize=4096)
def _text_to_canonical(resource: str, value: str) -> int:
    return _to_canonical(resource, value)


def _to_canonical(resource: str, value: object) -> int:
    number = parse_quantity(value)
    if number < 0:
        raise QuantityError(f"invalid quantity {value!r} for {resource}: must not be negative")
    if resource in GPU_SHARE_RESOURCES and number != number.to_integral_value():
        raise QuantityError(f"invalid quantity {value!r} for {resource}: a whole number (Kubernetes refuses "
                            "fractions of an extended resource)")
    if resource == "cpu":
        number = number * 1000
    return int(number.to_integral_value(rounding="ROUND_CEILING"))


_BYTES = ("memory", "ephemeral-storage", "kubernetes.io/batch-memory")  # resources counted in bytes


@lru_cache(maxsize=4096)
def format_quantity(resource: str, amount: float) -> str:
    """Human form of a canonical amount: ``1500m``/``2`` CPUs, ``4Gi`` memory."""
    if resource == "cpu":
        cores = amount / 1000
        return f"{cores:g}" if float(amount) % 1000 == 0 else f"{round(amount)}m"
    if resource in _BYTES or resource.startswith("hugepages-"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size and amount % size == 0:
                return f"{int(amount // size)}{unit}"
        return str(int(amount))
    return f"{amount:g}"
