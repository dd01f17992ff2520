"""Online load learned by time of week: how long a node's room for offline work will last.

*Online load* is what online (non-BE) work uses on a node — the node's usage
less its offline pods' (``load.cpu_used_cores − Σ BE pods``, the same for
memory) — as a percentage of the node's capacity.  :class:`LoadHistory`
samples it at most once a minute per node (the report intake offers it every
report; all but one a minute are turned away by one dict lookup), keeps the
open hour's samples in a histogram of whole percents, and when the hour ends
stores that hour's high quantile (p90 by default) as a byte in an
hour-of-week ring of the last K weeks (4 by default).  A future hour is
predicted from the same hour of the week in the K weeks before it — their
maximum, or a chosen quantile; an hour no kept week saw is unknown (NaN).

Time is absolute UTC hours throughout: ``unix_hour = floor(t / 3600)``,
``week = (unix_hour + 72) // 168``, ``hour of week = (unix_hour + 72) % 168``
(Unix hour 0 was a Thursday; +72 makes hour 0 of a week Monday 00:00 UTC).

Memory per node, K weeks: the ring 2 × K × 168 bytes (1,344 at K=4), the week
each ring slot holds 4 × K, the open hour's histograms 2 × 101 and its hour 8
— 1,570 bytes of arrays at K=4 (they grow by a quarter at a time, so up to
1,960 just after a growth) plus about 160 bytes of index entries: 10,000
nodes measured 19 MB.

Learned weeks leave and come back as :class:`~scheduler.history.store.WeekRecord`
(:meth:`LoadHistory.take_dirty`, :meth:`LoadHistory.restore`); keeping them is
:mod:`scheduler.history.store`'s business.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from proto.errors import InputError
from scheduler.history.store import WeekRecord

HOURS_PER_WEEK = 168
WEEK_OFFSET_HOURS = 72  # Unix hour 0 was Thursday 00:00 UTC; hour of week 0 is Monday 00:00 UTC
UNKNOWN = 255           # a ring cell no finished hour filled
BINS = 101              # histogram of whole percents 0..100 (above 100 counts as 100)
CPU, MEMORY = 0, 1


def unix_hour(t: float) -> int:
    return int(t // 3600)


def week_of(hour: int) -> int:
    return (hour + WEEK_OFFSET_HOURS) // HOURS_PER_WEEK


def span_hours(start: float, duration: float) -> int:
    """How many clock hours ``[start, start + duration)`` overlaps (at least 1)."""
    return max(1, math.ceil((start + duration) / 3600) - unix_hour(start))


@dataclass(frozen=True)
class Forecast:
    """Predicted online load of some nodes over consecutive hours: percent of capacity, NaN where unknown."""

    hours: np.ndarray   # (H,) Unix hours (UTC): hour j begins at hours[j] * 3600
    cpu: np.ndarray     # (nodes, H)
    memory: np.ndarray  # (nodes, H)

    def peak(self) -> tuple[np.ndarray, np.ndarray]:
        """The highest predicted CPU and memory percent per node; NaN where no hour is known."""
        return np.fmax.reduce(self.cpu, axis=1), np.fmax.reduce(self.memory, axis=1)

    def first_over(self, cpu_limit: Any, memory_limit: Any) -> np.ndarray:
        """Per node, the index of the first hour predicted above the limits (percent; per node or one for all), -1: none."""
        over = ((self.cpu > np.asarray(cpu_limit, dtype=float)[..., None])
                | (self.memory > np.asarray(memory_limit, dtype=float)[..., None]))
        return np.where(over.any(axis=1), over.argmax(axis=1), -1)


class LoadHistory:
    """Per node: the open hour's samples, and each hour of the week's quantile over the last ``weeks`` weeks.

    Thread-safe: the report intake observes, the scheduling loop forecasts and
    a saver thread takes finished weeks, each under one lock (the once-a-minute
    gate is read without it).
    """

    def __init__(self, *, weeks: int = 4, hour_quantile: float = 0.9, initial_nodes: int = 64):
        if not 1 <= weeks <= 52:
            raise InputError(f"weeks: must be 1-52, got {weeks}")
        if not 0 < hour_quantile <= 1:
            raise InputError(f"hour_quantile: must be in (0, 1], got {hour_quantile}")
        self.weeks, self.hour_quantile = weeks, hour_quantile
        self._lock = threading.Lock()
        self.names: list[str] = []
        self._rows: dict[str, int] = {}
        self._minute: dict[str, int] = {}  # the last minute sampled, per node: the intake's cheap gate
        n = max(1, initial_nodes)
        self._open = np.full(n, -1, np.int64)                       # the Unix hour the histograms hold, -1 none
        self._hist = np.zeros((n, 2, BINS), np.uint8)                # at most 60 samples an hour
        self._ring = np.full((n, 2, weeks, HOURS_PER_WEEK), UNKNOWN, np.uint8)
        self._held = np.full((n, weeks), -1, np.int32)               # the week each ring slot holds
        self._dirty: set[tuple[int, int]] = set()                    # (row, slot) changed since taken for saving

    def __len__(self) -> int:
        return len(self.names)

    # -- learning ----------------------------------------------------------------------------
    def observe_report(self, t: Any) -> bool:
        """Sample an accepted report (a NodeTelemetry) at its receive time; the intake's path, cheap unless a new minute."""
        if self._minute.get(t.node, -1) >= t.received // 60:
            return False
        cpu, memory = t.online().percent()
        return self.observe(t.node, t.received, cpu, memory)

    def observe(self, node: str, at: float, cpu: float, memory: float) -> bool:
        """Online CPU and memory (percent of capacity; NaN: not measured) at Unix time ``at``.

        At most one sample per node and minute is kept, in time order: a sample
        in a minute already sampled, or earlier, is dropped (False).  A sample
        in a later hour than the open one first closes that hour.
        """
        minute = int(at // 60)
        if self._minute.get(node, -1) >= minute:
            return False
        with self._lock:
            row = self._row(node)
            hour = minute // 60
            if self._open[row] != hour:
                if self._open[row] >= 0:
                    self._close_one(row)
                self._open[row] = hour
            for res, value in ((CPU, cpu), (MEMORY, memory)):
                if math.isfinite(value):
                    self._hist[row, res, min(BINS - 1, max(0, math.ceil(value)))] += 1
            self._minute[node] = minute
        return True

    def close_finished(self, now: float) -> int:
        """Close every open hour that ended before ``now`` (also of nodes that stopped reporting); how many."""
        with self._lock:
            n = len(self.names)
            rows = np.flatnonzero((self._open[:n] >= 0) & (self._open[:n] < unix_hour(now)))
            if rows.size:
                self._close(rows)
        return int(rows.size)

    def _row(self, node: str) -> int:
        row = self._rows.get(node)
        if row is None:
            row = self._rows[node] = len(self.names)
            self.names.append(node)
            if row == len(self._open):
                self._grow(row + max(64, row // 4))
        return row

    def _grow(self, n: int) -> None:
        def grown(a: np.ndarray, fill: int) -> np.ndarray:
            out = np.full((n,) + a.shape[1:], fill, a.dtype)
            out[: len(a)] = a
            return out
        self._open, self._hist = grown(self._open, -1), grown(self._hist, 0)
        self._ring, self._held = grown(self._ring, UNKNOWN), grown(self._held, -1)

    def _close(self, rows: np.ndarray) -> None:
        """Store the open hour of ``rows`` — the nearest-rank quantile of its samples — and empty the histograms."""
        counts = self._hist[rows].astype(np.int32)                    # (m, 2, BINS)
        n = counts.sum(axis=2)
        rank = np.maximum(1, np.ceil(self.hour_quantile * n - 1e-9))
        value = (counts.cumsum(axis=2) < rank[..., None]).sum(axis=2)  # first bin whose count reaches the rank
        self._store(rows, self._open[rows], np.where(n > 0, value, UNKNOWN).astype(np.uint8))
        self._hist[rows] = 0
        self._open[rows] = -1

    def _close_one(self, row: int) -> None:
        """:meth:`_close` for one row with scalar steps (the observe path: a node's hour ends, once an hour)."""
        hist = self._hist[row]
        values = []
        for res, n in enumerate(hist.sum(axis=1).tolist()):
            rank = max(1, math.ceil(self.hour_quantile * n - 1e-9))
            values.append(int(np.searchsorted(hist[res].cumsum(), rank)) if n else UNKNOWN)
        hour = int(self._open[row])
        week, how = divmod(hour + WEEK_OFFSET_HOURS, HOURS_PER_WEEK)
        slot = week % self.weeks
        held = int(self._held[row, slot])
        if held <= week:
            if held < week:
                self._ring[row, :, slot, :] = UNKNOWN
                self._held[row, slot] = week
            for res, value in enumerate(values):
                if value != UNKNOWN:
                    self._ring[row, res, slot, how] = value
            self._dirty.add((row, slot))
        hist[:] = 0
        self._open[row] = -1

    def _store(self, rows: np.ndarray, hours: np.ndarray, values: np.ndarray) -> None:
        """Write each row's hour (``values``: (m, 2)) into its ring, starting the slot afresh for a newer week."""
        week = (hours + WEEK_OFFSET_HOURS) // HOURS_PER_WEEK
        how = (hours + WEEK_OFFSET_HOURS) % HOURS_PER_WEEK
        slot = week % self.weeks
        held = self._held[rows, slot]
        newer = held < week
        if newer.any():
            self._ring[rows[newer], :, slot[newer], :] = UNKNOWN
            self._held[rows[newer], slot[newer]] = week[newer]
        keep = held <= week  # an hour older than the week its slot now holds is dropped
        r, s, h = rows[keep], slot[keep], how[keep]
        for res in (CPU, MEMORY):
            v = values[keep, res]
            self._ring[r, res, s, h] = np.where(v == UNKNOWN, self._ring[r, res, s, h], v)
        self._dirty.update(zip(r.tolist(), s.tolist(), strict=True))  # both cut by the same mask

    # -- predicting ----------------------------------------------------------------------------
    def forecast(self, nodes: Sequence[str], start: float, duration: float, *, weeks: int | None = None,
                 quantile: float = 1.0) -> Forecast:
        """Predicted online load of ``nodes`` for every hour overlapping ``[start, start + duration)``.

        Each hour is predicted from the same hour of the week in the ``weeks``
        weeks before it (default: all kept): the nearest-rank ``quantile`` of
        the known ones (1: their maximum).  A span longer than a week is cut to
        one week, in which every hour of the week already appears.
        """
        first = unix_hour(start)
        hour = np.arange(first, first + min(span_hours(start, duration), HOURS_PER_WEEK), dtype=np.int64)
        week = (hour + WEEK_OFFSET_HOURS) // HOURS_PER_WEEK
        how = (hour + WEEK_OFFSET_HOURS) % HOURS_PER_WEEK
        use = min(weeks or self.weeks, self.weeks)
        rows = np.fromiter((self._rows.get(n, -1) for n in nodes), np.intp, len(nodes))
        out = np.full((len(nodes), 2, hour.size), np.nan)
        known = rows >= 0
        if known.any():
            with self._lock:
                cells = np.take(self._ring[rows[known]], how, axis=3)   # (m, 2, K, H)
                held = self._held[rows[known]][:, :, None]              # (m, K, 1)
            valid = (held >= week - use) & (held < week)                # (m, K, H)
            out[known] = _nearest_rank(np.where(valid[:, None], cells, UNKNOWN), quantile)
        return Forecast(hour, out[:, CPU], out[:, MEMORY])

    # -- saving and restoring ---------------------------------------------------------------------
    def take_dirty(self) -> list[WeekRecord]:
        """The weeks changed since last taken, for saving (:meth:`requeue` them if the save fails)."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            return [WeekRecord(self.names[r], int(self._held[r, s]), self._ring[r, CPU, s].tobytes(),
                               self._ring[r, MEMORY, s].tobytes()) for r, s in sorted(dirty)]

    def requeue(self, records: Iterable[WeekRecord]) -> None:
        with self._lock:
            for rec in records:
                row = self._rows[rec.node]
                if self._held[row, rec.week % self.weeks] == rec.week:
                    self._dirty.add((row, rec.week % self.weeks))

    def restore(self, records: Iterable[WeekRecord], now: float) -> int:
        """Put saved weeks back (those of the last ``weeks`` weeks before ``now``'s); how many were kept."""
        oldest = week_of(unix_hour(now)) - self.weeks
        kept = 0
        with self._lock:
            for rec in sorted(records, key=lambda r: r.week):
                if rec.week < oldest:
                    continue
                row, slot = self._row(rec.node), rec.week % self.weeks
                if self._held[row, slot] > rec.week:
                    continue
                self._held[row, slot] = rec.week
                self._ring[row, CPU, slot] = np.frombuffer(rec.cpu, np.uint8)
                self._ring[row, MEMORY, slot] = np.frombuffer(rec.memory, np.uint8)
                kept += 1
        return kept


def _nearest_rank(cells: np.ndarray, q: float) -> np.ndarray:
    """The nearest-rank ``q`` quantile along axis 2 of uint8 cells (UNKNOWN skipped), as floats; NaN: none known."""
    known = cells != UNKNOWN
    count = known.sum(axis=2)                                             # (m, 2, H)
    if q >= 1:  # the default, the maximum: no sort needed
        out = np.where(known, cells, 0).max(axis=2).astype(float)
    else:
        ordered = np.sort(cells, axis=2)                                  # UNKNOWN (255) sorts last
        idx = np.clip(np.ceil(q * count - 1e-9).astype(np.intp) - 1, 0, cells.shape[2] - 1)
        out = np.take_along_axis(ordered, idx[:, :, None, :], axis=2)[:, :, 0, :].astype(float)
    out[count == 0] = np.nan
    return out
