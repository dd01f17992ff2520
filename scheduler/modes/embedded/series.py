"""Figures over time for the web view's plots: charts of named lines, each a bounded ring of ``(time, value)``.

Two sources fill them.  The web view samples what the scheduler knows itself
(each node's offline CPU quota and batch allocatable, CPU in use, evictions so
far); what only a workload knows — an online service's p99 latency, offline
work's throughput — is pushed by whoever measures it through the control API
(``POST /series``: ``./hack/up.sh`` pushes its probe's and burners' figures).
Bounded: :data:`MAX_CHARTS` charts of :data:`MAX_LINES` lines, names of
:data:`MAX_NAME` characters, :data:`POINTS` points a line (the oldest dropped);
a push that would go past a bound, or carries a value that is not a finite
number, is refused whole.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from proto.errors import InputError

MAX_CHARTS = 16
MAX_LINES = 12
MAX_NAME = 80
POINTS = 900  # 30 minutes at one point each 2 s


class Series:
    def __init__(self, clock: Callable[[], float] = time.time, points: int = POINTS):
        self.clock, self.points = clock, points
        self._lock = threading.Lock()
        self._charts: dict[str, dict[str, deque[tuple[float, float]]]] = {}

    def add(self, charts: object, at: float | None = None) -> int:
        """Add one point to each line of ``{chart: {line: value}}``; how many points.  InputError (nothing added)
        for a shape, name or value out of bounds."""
        checked = _checked(charts)
        now = self.clock() if at is None else at
        with self._lock:
            names = set(self._charts) | set(checked)
            if len(names) > MAX_CHARTS:
                raise InputError(f"at most {MAX_CHARTS} charts: this would make {len(names)}")
            for chart, lines in checked.items():
                have = set(self._charts.get(chart, {})) | set(lines)
                if len(have) > MAX_LINES:
                    raise InputError(f"chart {chart!r}: at most {MAX_LINES} lines: this would make {len(have)}")
            for chart, lines in checked.items():
                into = self._charts.setdefault(chart, {})
                for line, value in lines.items():
                    into.setdefault(line, deque(maxlen=self.points)).append((round(now, 3), value))
        return sum(len(lines) for lines in checked.values())

    def snapshot(self) -> dict[str, dict[str, list[tuple[float, float]]]]:
        with self._lock:
            return {chart: {line: list(points) for line, points in lines.items()}
                    for chart, lines in self._charts.items()}


def _checked(charts: object) -> dict[str, dict[str, float]]:
    if not isinstance(charts, dict):
        raise InputError('expected {"chart": {"line": number, ...}, ...}')
    out: dict[str, dict[str, float]] = {}
    if len(charts) > MAX_CHARTS:
        raise InputError(f"at most {MAX_CHARTS} charts, got {len(charts)}")
    for chart, lines in charts.items():
        _name("chart", chart)
        if not isinstance(lines, dict) or len(lines) > MAX_LINES:
            raise InputError(f"chart {str(chart)[:MAX_NAME]!r}: expected at most {MAX_LINES} lines as "
                             '{"line": number}')
        for line, value in lines.items():
            _name(f"chart {chart!r}: line", line)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InputError(f"chart {chart!r}: line {line!r}: {str(value)[:40]!r} is not a finite number")
        out[chart] = {line: float(value) for line, value in lines.items()}
    return out


def _name(what: str, name: object) -> None:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isprintable():
        raise InputError(f"{what} {str(name)[:MAX_NAME]!r}: must be printable text of 1-{MAX_NAME} characters")
