"""The scheduling cycle: snapshot -> session -> actions in configured order -> close.

:class:`Scheduler` owns the cache, the configuration (reloaded from its file
when it changes, the last good one kept when a new one is refused), the
clock and the effects; ``run_once`` is one cycle and ``run`` loops.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects, Effects
from scheduler.framework.config import ConfigWatcher, SchedulerConfig, default_config
from scheduler.framework.keeper import SnapshotKeeper
from scheduler.framework.session import Session
from scheduler.framework.snapshot import DEFAULT_SCHEDULER_NAMES, TaskStatus
from scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


ARRIVAL_DEBOUNCE_S = 0.02  # new work waits this long for what arrives with it before a cycle starts
STOP_POLL_S = 0.05  # a loop waiting for its interval's end or for new work looks at its stop event this often
GC_THRESHOLD0 = 10_000  # allocations between young collections (Python's default: 700)


def tune_gc(*thresholds: int) -> None:
    """Collect young objects every 10,000 allocations instead of 700 (or as ``thresholds`` say).

    A cycle builds tens of thousands of short-lived objects (tasks, jobs,
    arrays); with the default, many are promoted before they die and full
    collections walk the whole cluster cache over and over — a quarter of a
    10,000-node cycle's time.  Sessions break their own reference cycles
    (:meth:`Session.release`), so the longer interval leaves little garbage
    waiting.  Called by the scheduler's processes (serve, simulate, benchmarks).
    """
    gc.set_threshold(*(thresholds or (GC_THRESHOLD0, *gc.get_threshold()[1:])))


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cycle collection inside (unless it was off already, when it stays off).

    A cycle's tasks, jobs and node dicts live until the cycle ends and die by
    reference counting then (:meth:`Session.release`), so a collection inside a
    cycle finds almost nothing and only walks them: at 10,000 nodes the
    young-generation passes a cycle triggers took a seventh of its time.  What
    other threads leave for the collector meanwhile waits until the cycle ends.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def system_clock() -> datetime:
    """Now, in the scheduler's local time (aware): time windows (tdm's revocable zones) are read in it."""
    return datetime.now().astimezone()


@dataclass(frozen=True)
class CycleResult:
    binds: int
    evictions: int
    phase_changes: int
    pending: int
    seconds: float

    @property
    def changed(self) -> bool:
        return bool(self.binds or self.evictions or self.phase_changes)


class Scheduler:
    def __init__(self, cache: ClusterCache, *, config: SchedulerConfig | None = None,
                 config_path: str | Path | None = None, clock: Clock = system_clock,
                 effects: Effects | None = None, metrics: SchedulerMetrics | None = None,
                 scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES):
        self.cache = cache
        self.scheduler_names = frozenset(scheduler_names)
        self.snapshots = SnapshotKeeper(cache, self.scheduler_names)  # each cycle's, redoing only what changed
        self.clock = clock
        self.effects = effects or CacheEffects(cache, clock=lambda: self.clock().timestamp())
        self.plugin_state: dict[str, dict] = {}  # what plugins keep from one cycle to the next (Session.state)
        self.metrics = metrics or SchedulerMetrics()
        self.watcher = ConfigWatcher(config_path, on_result=self.metrics.config_reload,
                                     on_config=self._config_in_force) if config_path else None
        self._config = config or default_config()
        if self.watcher is None:
            self._config_in_force(self._config)

    def _config_in_force(self, config: SchedulerConfig) -> None:
        self.metrics.config_unimplemented(config.unimplemented)

    @property
    def config(self) -> SchedulerConfig:
        return self.watcher.current if self.watcher else self._config

    def run_once(self) -> CycleResult:
        if self.watcher:
            self.watcher.poll()
        config = self.config
        start = time.perf_counter()
        with collector_paused():  # what it held back is collected as it ends: within the cycle's time
            binds, evictions, phase_changes, pending = self._cycle(config)
        result = CycleResult(binds, evictions, phase_changes, pending, time.perf_counter() - start)
        self.metrics.cycle(seconds=result.seconds, binds=result.binds, evictions=result.evictions, pending=pending)
        return result

    def _cycle(self, config: SchedulerConfig) -> tuple[int, int, int, int]:
        """Snapshot, session, actions, close: binds, evictions, phase changes and pods left pending."""
        now = self.clock()
        snapshot = self.snapshots.take(now=now.timestamp())
        ssn = Session(snapshot, config, now=now, effects=self.effects, state=self.plugin_state)
        ssn.open()
        for action in config.build_actions():
            began = time.perf_counter()
            action.execute(ssn)
            self.metrics.action(action.name, time.perf_counter() - began)
        ssn.close()
        self.effects.flush()
        pending = sum(job.counts[TaskStatus.PENDING] for job in ssn.jobs.values())
        ssn.release()
        return ssn.binds, len(ssn.evictions), ssn.phase_changes, pending

    def run(self, *, interval: float = 1.0, stop: threading.Event | None = None, idle_every: float = 10.0,
            active: Callable[[], bool] = lambda: True, debounce: float = ARRIVAL_DEBOUNCE_S,
            early: bool = True) -> None:
        """Cycle every ``interval`` seconds, and (``early``) sooner when new work arrives, until ``stop`` is set.

        New work — a pod that waits for a node or a PodGroup that waits for admission coming into the cache
        (:attr:`ClusterCache.arrived`) — starts a cycle once nothing more arrived for ``debounce`` seconds
        (what arrives together is scheduled together; work that keeps streaming in waits for the interval's
        end, as before) rather than at the interval's end, and no sooner after the last cycle than that cycle
        took.  So the pods the embedded controllers make in one commit right after a cycle admitted their
        PodGroups are bound by the next cycle at once; the interval is the longest wait, as before.

        No cycle runs while ``active()`` says no (a replica that is not the
        leader), or while nothing waits to be scheduled, and a cycle that
        changed nothing and left nothing pending is not repeated until the cache
        changes (or ``idle_every`` seconds pass): with no work, a ten-thousand-node
        snapshot every second is CPU (and cache-lock time) taken from report intake.
        With a periodic action configured (``shuffle``) a cycle still runs every ``idle_every`` seconds.
        """
        stop = stop or threading.Event()
        idle_since: tuple[int, float] | None = None
        last = float("-inf")
        while not stop.is_set():
            began = time.monotonic()
            self.cache.arrived.clear()  # what arrives from now on wakes the next wait
            generation = self.cache.generation
            # actions that act on running pods as time passes (Action.periodic) need a cycle now and then
            # even when nothing is pending
            timed = self.config.has_periodic_action() and began - last >= idle_every
            quiet = (idle_since is not None and idle_since[0] == generation and began - idle_since[1] < idle_every) \
                or not (self.cache.has_pending_work() or timed) or not active()
            if quiet and active() and self.effects.backlog():
                self.effects.flush()  # writes that failed: again, without a whole cycle
            if not quiet:
                last = began
                self.cache.scheduling.set()
                try:
                    result = self.run_once()
                    idle = not result.changed and not result.pending
                    idle_since = (generation, began) if idle and self.cache.generation == generation else None
                except Exception:  # a bug in one cycle must not stop scheduling for good
                    log.exception("scheduling cycle failed")
                    idle_since = None
            self.cache.scheduling.clear()
            ended = time.monotonic()
            if early:
                self._wait(stop, deadline=began + interval, earliest=ended + (ended - began if not quiet else 0.0),
                           debounce=debounce)
            else:
                stop.wait(max(0.0, interval - (ended - began)))

    def _wait(self, stop: threading.Event, *, deadline: float, earliest: float, debounce: float) -> None:
        """Until ``deadline``, or until work arrived (no sooner than ``earliest``, then ``debounce`` more), or
        ``stop``."""
        arrived = self.cache.arrived
        while not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                return
            if arrived.is_set():
                self.cache.scheduling.set()  # a cycle is coming
                if now >= earliest:
                    self._settle(stop, deadline, debounce)
                    return
                stop.wait(min(earliest, deadline) - now)
                continue
            arrived.wait(min(deadline - now, STOP_POLL_S))  # stop is looked at this often

    def _settle(self, stop: threading.Event, deadline: float, debounce: float) -> None:
        """Until nothing more arrived for ``debounce`` seconds (or ``deadline``, or ``stop``): pods that stream in
        one by one (a controller creating them over the API) are scheduled together, at the interval's end."""
        arrived = self.cache.arrived
        while not stop.is_set():
            arrived.clear()
            left = deadline - time.monotonic()
            if left <= 0 or not arrived.wait(min(debounce, left, STOP_POLL_S)):
                return
