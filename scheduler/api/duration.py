"""Go-style durations (``90s``, ``1h30m``, ``500ms``) as seconds: config arguments, annotations, profiles."""

from __future__ import annotations

import math
import re
from typing import Any

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


MAX_DURATION = 100 * 365 * 86400.0  # a century: longer waits are typos, and overflow datetimes


def parse_duration(value: Any) -> float:
    """Seconds from a Go-style duration (``1h30m``, ``500ms``) or a bare number of seconds."""
    seconds = _parse_duration(value)
    if seconds > MAX_DURATION:
        raise ValueError(f"duration {value!r} is longer than 100 years")
    return seconds


def _parse_duration(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like '30s' or '1h', got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"expected a duration like '30s' or '1h', got {value!r}")
        return float(value)
    text = str(value).strip()
    if not text:
        raise ValueError("expected a duration like '30s' or '1h', got ''")
    if _SECONDS.fullmatch(text):  # a bare number of seconds
        return float(text)
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"expected a duration like '30s' or '1h', got {text!r}")
    return total
