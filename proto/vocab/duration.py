"""Go-style durations (``90s``, ``1h30m``, ``500ms``) as seconds, and daily windows (``"22:00-06:00"``).

Shared by config arguments, annotations, the agent's QoS profile and the tdm plugin.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from proto.errors import InputError

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


MAX_DURATION = 100 * 365 * 86400.0  # a century: longer waits are typos, and overflow datetimes


def parse_duration(value: Any) -> float:
    """Seconds from a Go-style duration (``1h30m``, ``500ms``) or a bare number of seconds."""
    seconds = _parse_duration(value)
    if seconds > MAX_DURATION:
        raise InputError(f"duration {value!r} is longer than 100 years")
    return seconds


def _parse_duration(value: Any) -> float:
    if isinstance(value, bool):
        raise InputError(f"expected a duration like '30s' or '1h', got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise InputError(f"expected a duration like '30s' or '1h', got {value!r}")
        return float(value)
    text = str(value).strip()
    if not text:
        raise InputError("expected a duration like '30s' or '1h', got ''")
    if _SECONDS.fullmatch(text):  # a bare number of seconds
        return float(text)
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise InputError(f"expected a duration like '30s' or '1h', got {text!r}")
    return total


_WINDOW = re.compile(r"(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})")


@dataclass(frozen=True)
class DailyWindow:
    """A daily window ``[start, end)`` in minutes after midnight; ``start > end`` crosses midnight."""

    start: int
    end: int

    @property
    def text(self) -> str:
        return f"{_hhmm(self.start)}-{_hhmm(self.end)}"

    @property
    def closes(self) -> str:
        return _hhmm(self.end)

    def contains(self, now: datetime | time) -> bool:
        """Is the window open at ``now``, read as wall-clock time (in the timezone a datetime carries)?"""
        t = now.hour * 3600 + now.minute * 60 + now.second + now.microsecond / 1e6
        start, end = self.start * 60, self.end * 60
        if start < end:
            return start <= t < end
        return t >= start or t < end


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def parse_daily_window(text: Any) -> DailyWindow:
    """``"HH:MM-HH:MM"`` -> :class:`DailyWindow`; ValueError saying what is wrong."""
    raw = str(text).strip()
    match = _WINDOW.fullmatch(raw)
    if not match:
        raise InputError(f'expected a daily window "HH:MM-HH:MM" (e.g. "22:00-06:00"), got {text!r}')
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    for hour in (h1, h2):
        if hour > 23:
            raise InputError(f"hour {hour} is out of range 0-23 in {raw!r}")
    for minute in (m1, m2):
        if minute > 59:
            raise InputError(f"minute {minute} is out of range 0-59 in {raw!r}")
    window = DailyWindow(h1 * 60 + m1, h2 * 60 + m2)
    if window.start == window.end:
        raise InputError(f"start and end are both {_hhmm(window.start)} in {raw!r}: a window needs two different "
                         "times (it may cross midnight, as in 22:00-06:00)")
    return window
