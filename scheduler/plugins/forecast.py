"""forecast: keep offline pods that say how long they run off nodes whose room will not last that long.

It applies to offline (BE) pods annotated ``scoria.io/expected-duration``
(``2h``) that request ``kubernetes.io/batch-cpu`` or
``kubernetes.io/batch-memory``; other pods pass untouched.  Such a pod fits a
node only if, for every clock hour overlapping ``[now, now + duration)``,
the node's predicted headroom for offline work, less the batch requests
already placed there, still covers the pod's request::

    headroom(h) = batch_now + online_now − predicted_online(h)

``batch_now`` is the batch allocatable the node's agent reports now,
``online_now`` what its online pods use now (the report's usage less its BE
pods'), ``predicted_online(h)`` the scheduler's load history
(:mod:`scheduler.history`) for that hour of the week, as a share of the
node's capacity.  An hour without history is assumed to stay as now
(``predicted = online_now``: the headroom is ``batch_now``), and the current
hour never counts on more than the node offers now.  A node without a fresh
report is refused: there is nothing to predict from.  Times in reasons are UTC.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY
from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import EPS
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_RESOURCES = (BATCH_CPU, BATCH_MEMORY)  # row 0 and 1 of the per-node arrays below: cpu, memory
STALE = "node(s) had no fresh report to predict offline headroom from"


class Forecast(Plugin):
    name = "forecast"
    hooks = ("predicate", "predicate_reasons")
    arguments = {
        "weeks": Arg("forecast.weeks", "int", 4, "predict an hour from the same hour of the week in at most this "
                     "many past weeks (no more than the scheduler keeps)", minimum=1, maximum=52),
        "quantile": Arg("forecast.quantile", "float", 1.0, "which of those weeks predicts the hour: 1 the "
                        "highest, 0.5 the median", minimum=0.0, maximum=1.0),
    }

    def open(self, ssn: Session) -> None:
        snap = ssn.snapshot
        self.nodes = ssn.nodes
        self.history = snap.history
        self.telemetry = snap.telemetry
        self.now = snap.now if snap.now is not None else ssn.now.timestamp()
        self.cols = [(res, ssn.index.column[name]) for res, name in enumerate(_RESOURCES) if name in ssn.index.column]
        self._current: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._rooms: dict[float, np.ndarray] = {}

    def _needs(self, task: TaskInfo) -> list[tuple[int, int]]:
        """(resource row, column) of each batch resource the pod requests, when the plugin applies to it."""
        facts = task.facts
        if not facts.offline or not facts.duration:
            return []
        return [(res, col) for res, col in self.cols if task.req[col] > 0]

    # -- the filter ---------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        mask = np.ones(self.nodes.count, dtype=bool)
        needs = self._needs(task)
        if needs:
            duration = task.facts.duration
            assert duration is not None  # _needs is empty for a pod that says none
            room = self._room(duration)
            for res, col in needs:
                mask &= room[res] - self._placed(col, avail) + EPS >= task.req[col]  # NaN (stale): False
        return mask

    def _placed(self, col: int, avail: np.ndarray | None) -> np.ndarray:
        """Batch requests already on each node, as the asking action counts them (what ``avail`` leaves)."""
        if avail is None:
            return self.nodes.used[col] + self.nodes.pipelined[col]
        return self.nodes.alloc[col] - avail[col]

    def _room(self, duration: float) -> np.ndarray:
        """(2, nodes): the least headroom over the pod's hours, before placed requests; NaN where stale."""
        room = self._rooms.get(duration)
        if room is None:
            online, capacity, batch = self.current()
            peak = self.predicted(duration, capacity)
            room = self._rooms[duration] = batch - np.fmax(np.fmax.reduce(peak, axis=2) - online, 0.0)
        return room

    def current(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(2, nodes) each: online use now, capacity and batch allocatable (millicores, bytes); NaN where stale."""
        if self._current is None:
            nodes = self.nodes
            online = np.full((2, nodes.count), np.nan)
            capacity = online.copy()
            for i in np.flatnonzero(~nodes.stale):
                load = self.telemetry[nodes.names[i]].online()
                online[:, i] = load.cpu_millis, load.memory_bytes
                capacity[:, i] = load.capacity_cpu_millis, load.capacity_memory_bytes
            self._current = online, capacity, np.vstack([nodes.batch_cpu, nodes.batch_memory])
        return self._current

    def predicted(self, duration: float, capacity: np.ndarray, nodes: np.ndarray | None = None) -> np.ndarray:
        """(2, nodes, hours) predicted online use over ``[now, now + duration)``; NaN for hours without history."""
        names = self.nodes.names if nodes is None else [self.nodes.names[i] for i in nodes]
        cap = capacity if nodes is None else capacity[:, nodes]
        if self.history is None:
            return np.full((2, len(names), 1), np.nan)
        f = self.history.forecast(names, self.now, duration, weeks=self.args.weeks, quantile=self.args.quantile)
        return np.stack([f.cpu, f.memory]) * (cap[:, :, None] / 100.0)

    # -- the explanation --------------------------------------------------------------------------------
    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        needs = self._needs(task)
        if not needs:
            return reasons
        refused = among & ~self.predicate(task, avail)
        count_reason(reasons, STALE, refused & self.nodes.stale)
        nodes = np.flatnonzero(refused & ~self.nodes.stale)
        if nodes.size:
            reasons.update(self._explain(task, avail, nodes, needs))
        return reasons

    def _explain(self, task: TaskInfo, avail: np.ndarray | None, nodes: np.ndarray,
                 needs: list[tuple[int, int]]) -> Counter:
        """Group refused nodes by the first hour and resource that runs short; say what that hour leaves."""
        duration = task.facts.duration
        assert duration is not None  # asked only with needs, which a pod that says no duration has none of
        current = self.current()
        online, batch = current[0][:, nodes], current[2][:, nodes]
        predicted = self.predicted(duration, current[1], nodes)                   # (2, m, H)
        use = np.where(np.isnan(predicted), online[:, :, None], predicted)        # no history: stays as now
        use[:, :, 0] = np.fmax(use[:, :, 0], online)                              # now: no more than offered now
        left = {res: batch[res, :, None] + online[res, :, None] - use[res]
                - self._placed(col, avail)[nodes, None] for res, col in needs}    # (m, H) each
        short = {res: left[res] + EPS < task.req[col] for res, col in needs}
        groups: dict[tuple[int, int, bool], list[float]] = {}
        for k in range(nodes.size):
            hours = [h for h in range(use.shape[2]) if any(short[res][k, h] for res in short)]
            if not hours:
                continue
            h = hours[0]
            res = next(r for r in short if short[r][k, h])
            rising = bool(use[res, k, h] > online[res, k] + EPS)
            groups.setdefault((h, res, rising), []).append(float(left[res][k, h]))
        out: Counter = Counter()
        for (h, res, rising), lefts in groups.items():
            amount = ("at most " if len(lefts) > 1 else "") + _amount(res, max(lefts))
            if rising:
                label = (f"node(s) had predicted online peak at {self._clock(h)} leaving {amount}, "
                         f"but the pod runs {_duration(duration)}")
            else:
                label = f"node(s) had {amount} free for offline pods now"
            out[label] += len(lefts)
        return out

    def _clock(self, h: int) -> str:
        """Hour ``h`` of the pod's span as ``13:00 UTC`` (with the weekday when it is not today)."""
        start = datetime.fromtimestamp((int(self.now // 3600) + h) * 3600, UTC)
        today = datetime.fromtimestamp(self.now, UTC).date()
        return start.strftime("%H:%M UTC" if start.date() == today else "%a %H:%M UTC")


def _amount(res: int, value: float) -> str:
    value = max(float(value), 0.0)
    if res == 0:
        return f"{round(value / 1000, 1):g} cores of {BATCH_CPU}"
    return f"{round(value / 2**30, 1):g}Gi of {BATCH_MEMORY}"


def _duration(seconds: float) -> str:
    """``2h``, ``1h30m``, ``45s``: how long the pod says it runs."""
    total = int(round(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or f"{seconds:g}s"
