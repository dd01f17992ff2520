"""Table-driven tests of Kubernetes quantities: parse_quantity, to_canonical, format_quantity."""

from __future__ import annotations

from decimal import Decimal

import pytest

from proto.vocab.quantity import QuantityError, format_quantity, parse_quantity, to_canonical

# --------------------------------------------------------------------------------------------
# parse_quantity: exact values
# --------------------------------------------------------------------------------------------

PARSE_CASES = [
    # (value, expected exact Decimal)
    ("int", 3, Decimal(3)),
    ("int-zero", 0, Decimal(0)),
    ("int-negative", -2, Decimal(-2)),
    ("float", 0.5, Decimal("0.5")),
    ("float-exact-tenth", 0.1, Decimal("0.1")),
    ("string-int", "42", Decimal(42)),
    ("string-plus-sign", "+7", Decimal(7)),
    ("string-negative", "-3", Decimal(-3)),
    ("string-decimal", "1.25", Decimal("1.25")),
    ("string-leading-dot", ".5", Decimal("0.5")),
    ("string-trailing-dot", "1.", Decimal(1)),
    ("surrounding-whitespace", "  4Gi ", Decimal(4 * 2**30)),
    # binary suffixes
    ("Ki", "1Ki", Decimal(2**10)),
    ("Mi", "3Mi", Decimal(3 * 2**20)),
    ("Gi", "4Gi", Decimal(4 * 2**30)),
    ("Ti", "2Ti", Decimal(2 * 2**40)),
    ("Pi", "1Pi", Decimal(2**50)),
    ("Ei", "1Ei", Decimal(2**60)),
    ("Gi-fraction", "1.5Gi", Decimal(3 * 2**29)),
    # decimal suffixes
    ("n", "5n", Decimal("5e-9")),
    ("u", "5u", Decimal("5e-6")),
    ("m", "500m", Decimal("0.5")),
    ("k", "2k", Decimal(2000)),
    ("M", "2M", Decimal(2_000_000)),
    ("G", "2G", Decimal(2 * 10**9)),
    ("T", "2T", Decimal(2 * 10**12)),
    ("P", "2P", Decimal(2 * 10**15)),
    ("E-suffix-is-exa", "1E", Decimal(10**18)),
    ("E-suffix-fraction", "1.5E", Decimal(15 * 10**17)),
    # exponent form
    ("exp-lower", "1e3", Decimal(1000)),
    ("exp-upper", "1E3", Decimal(1000)),
    ("exp-plus", "1e+2", Decimal(100)),
    ("exp-negative-fraction", "2.5e-3", Decimal("0.0025")),
    ("exp-zero", "7e0", Decimal(7)),
    ("largest-allowed", "8Ei", Decimal(2**63)),
]


@pytest.mark.parametrize("value, expected", [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES])
def test_parse_quantity_exact_value(value, expected):
    result = parse_quantity(value)
    assert isinstance(result, Decimal)
    assert result == expected


def test_milli_is_exact_not_binary_float():
    # 0.1 CPU is exactly 100 millicores, not 100.00000000000001.
    assert parse_quantity("100m") * 1000 == 100
    assert parse_quantity(0.1) * 1000 == 100


# --------------------------------------------------------------------------------------------
# parse_quantity / to_canonical: refusals
# --------------------------------------------------------------------------------------------

INVALID_CASES = [
    # (value, text that must appear in the message)
    ("unknown-suffix", "5x", "'5x'"),
    ("empty", "", "''"),
    ("whitespace-only", "   ", "''"),
    ("two-dots", "1.2.3", "'1.2.3'"),
    ("suffix-only", "Gi", "'Gi'"),
    ("space-before-suffix", "1 Gi", "'1 Gi'"),
    ("lowercase-binary", "1gi", "'1gi'"),
    ("K-uppercase-decimal", "1K", "'1K'"),
    ("exponent-without-digits", "1e", "'1e'"),
    ("exponent-and-suffix", "1e3Ki", "'1e3Ki'"),
    ("lone-dot", ".", "'.'"),
    ("lone-sign", "-", "'-'"),
    ("nan-string", "nan", "'nan'"),
    ("inf-string", "inf", "'inf'"),
    ("None", None, "None"),
    ("True", True, "True"),
    ("False", False, "False"),
    ("nan-float", float("nan"), "nan"),
    ("inf-float", float("inf"), "inf"),
    ("minus-inf-float", float("-inf"), "-inf"),
    ("list", [1], "[1]"),
    ("dict", {"cpu": 1}, "{'cpu': 1}"),
    ("exponent-too-large", "1e31", "'1e31'"),
    ("out-of-range-binary", "9Ei", "'9Ei'"),
    ("out-of-range-int", 2**64, str(2**64)),
]


@pytest.mark.parametrize("value, fragment", [c[1:] for c in INVALID_CASES], ids=[c[0] for c in INVALID_CASES])
def test_parse_quantity_refuses(value, fragment):
    with pytest.raises(QuantityError) as info:
        parse_quantity(value)
    message = str(info.value)
    assert message.startswith("invalid quantity")
    assert fragment in message


@pytest.mark.parametrize("value", ["5x", "", None, True, float("nan")], ids=["5x", "empty", "None", "True", "nan"])
def test_to_canonical_refuses_what_parse_refuses(value):
    with pytest.raises(QuantityError, match="invalid quantity"):
        to_canonical("cpu", value)


def test_quantity_error_is_a_value_error():
    # Callers that only know ValueError (argument parsing) still catch it.
    with pytest.raises(ValueError):
        parse_quantity("5x")


NEGATIVE_CASES = [
    ("cpu-string", "cpu", "-1", "'-1'"),
    ("cpu-milli", "cpu", "-500m", "'-500m'"),
    ("memory-int", "memory", -1, "-1"),
    ("memory-Gi", "memory", "-1Gi", "'-1Gi'"),
    ("gpu-float", "nvidia.com/gpu", -0.5, "-0.5"),
]


@pytest.mark.parametrize("resource, value, fragment", [c[1:] for c in NEGATIVE_CASES],
                         ids=[c[0] for c in NEGATIVE_CASES])
def test_to_canonical_refuses_negative(resource, value, fragment):
    # parse_quantity itself accepts a sign; only the canonical form is non-negative.
    assert parse_quantity(value) < 0
    with pytest.raises(QuantityError) as info:
        to_canonical(resource, value)
    assert fragment in str(info.value)
    assert resource in str(info.value)
    assert "negative" in str(info.value)


# --------------------------------------------------------------------------------------------
# to_canonical: units and rounding up
# --------------------------------------------------------------------------------------------

CANONICAL_CASES = [
    # (resource, value, expected integer)
    ("cpu-millicores", "cpu", "500m", 500),
    ("cpu-cores-int", "cpu", 2, 2000),
    ("cpu-cores-string", "cpu", "4", 4000),
    ("cpu-fraction", "cpu", "1.5", 1500),
    ("cpu-float", "cpu", 0.25, 250),
    ("cpu-tiny-rounds-up", "cpu", "0.0001", 1),
    ("cpu-fractional-milli-rounds-up", "cpu", "1.5m", 2),
    ("cpu-exponent-rounds-up", "cpu", "2.5e-3", 3),
    ("cpu-nano-rounds-up", "cpu", "1n", 1),
    ("cpu-exact-milli-no-rounding", "cpu", "100m", 100),
    ("cpu-zero", "cpu", "0", 0),
    ("cpu-negative-zero", "cpu", "-0", 0),
    ("cpu-kilo", "cpu", "1k", 1_000_000),
    ("memory-bytes", "memory", "1024", 1024),
    ("memory-fraction-rounds-up", "memory", "1.5", 2),
    ("memory-milli-rounds-up", "memory", "1m", 1),
    ("memory-Gi", "memory", "4Gi", 4 * 2**30),
    ("memory-G", "memory", "4G", 4 * 10**9),
    ("memory-exponent", "memory", "1e3", 1000),
    ("memory-E-is-exa", "memory", "1E", 10**18),
    ("memory-int", "memory", 2048, 2048),
    ("pods-count", "pods", "110", 110),
    ("gpu-count", "nvidia.com/gpu", 2, 2),
    ("gpu-fraction-rounds-up", "nvidia.com/gpu", "0.5", 1),
    ("ephemeral-storage-Ti", "ephemeral-storage", "1Ti", 2**40),
]


@pytest.mark.parametrize("resource, value, expected", [c[1:] for c in CANONICAL_CASES],
                         ids=[c[0] for c in CANONICAL_CASES])
def test_to_canonical(resource, value, expected):
    result = to_canonical(resource, value)
    assert type(result) is int
    assert result == expected


# --------------------------------------------------------------------------------------------
# format_quantity
# --------------------------------------------------------------------------------------------

FORMAT_CASES = [
    # (resource, canonical amount, text)
    ("cpu-whole-cores", "cpu", 2000, "2"),
    ("cpu-one-core", "cpu", 1000, "1"),
    ("cpu-zero", "cpu", 0, "0"),
    ("cpu-millicores", "cpu", 1500, "1500m"),
    ("cpu-below-one-core", "cpu", 500, "500m"),
    ("cpu-float-whole", "cpu", 3000.0, "3"),
    ("memory-Gi", "memory", 4 * 2**30, "4Gi"),
    ("memory-Ti", "memory", 2**40, "1Ti"),
    ("memory-largest-unit-wins", "memory", 2048 * 2**40, "2048Ti"),
    ("memory-Mi-when-not-whole-Gi", "memory", 1536 * 2**20, "1536Mi"),
    ("memory-Ki", "memory", 3 * 2**10, "3Ki"),
    ("memory-bytes-not-whole-Ki", "memory", 1536, "1536"),
    ("memory-small-bytes", "memory", 100, "100"),
    ("memory-zero", "memory", 0, "0"),
    ("memory-float", "memory", float(2**30), "1Gi"),
    ("ephemeral-storage", "ephemeral-storage", 10 * 2**30, "10Gi"),
    ("hugepages", "hugepages-2Mi", 2 * 2**20, "2Mi"),
    ("pods-count", "pods", 110, "110"),
    ("device-count", "nvidia.com/gpu", 2, "2"),
    ("device-float", "nvidia.com/gpu", 2.5, "2.5"),
]


@pytest.mark.parametrize("resource, amount, text", [c[1:] for c in FORMAT_CASES], ids=[c[0] for c in FORMAT_CASES])
def test_format_quantity(resource, amount, text):
    assert format_quantity(resource, amount) == text


ROUND_TRIP_CASES = [
    ("cpu-cores", "cpu", "2"),
    ("cpu-millicores", "cpu", "1500m"),
    ("memory-Gi", "memory", "4Gi"),
    ("memory-Mi", "memory", "1536Mi"),
    ("memory-Ki", "memory", "7Ki"),
    ("memory-bytes", "memory", "1000"),
    ("pods", "pods", "110"),
]


@pytest.mark.parametrize("resource, text", [c[1:] for c in ROUND_TRIP_CASES], ids=[c[0] for c in ROUND_TRIP_CASES])
def test_format_round_trips_through_to_canonical(resource, text):
    amount = to_canonical(resource, text)
    assert format_quantity(resource, amount) == text
    assert to_canonical(resource, format_quantity(resource, amount)) == amount
