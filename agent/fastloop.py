"""The agent's fast loop: what it does every 25 ms (a mixin of :class:`agent.loop.Agent`, which owns the state).

Two ways to use the offline quota, chosen by the slow loop each second
(:func:`agent.policies.cpu.on_signals`): where offline pods are SCHED_IDLE the quota is open and the
fast loop clamps it on online signals (:meth:`FastLoop._clamp_on_signals`); elsewhere it always clamps
and the fast loop cuts it as online work rises and lets it back up once online use has left room
(:meth:`FastLoop._always_clamped`).  Every cgroup write goes through the agent's executor.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent.collectors.load import CpuMeter
from agent.intents import CgroupWrite
from agent.policies.cpu import OnlineSignals, offline_quota, online_signal

if TYPE_CHECKING:
    from agent.cgroups.layout import Layout
    from agent.loop import AgentConfig
    from agent.metrics import AgentMetrics
    from agent.profile import ProfileSpec
    from proto.model import Capacity

log = logging.getLogger(__name__)


class FastLoop:
    """The fast loop's ticks.  The attributes below are the agent's (set in its constructor)."""

    config: AgentConfig
    layout: Layout
    metrics: AgentMetrics
    capacity: Capacity
    spec: ProfileSpec
    quota: int | None
    monotonic: Callable[[], float]
    _apply: Callable[[list[CgroupWrite]], None]
    _fast_tree: CpuMeter
    _fast_offline: CpuMeter
    _fast_stall: CpuMeter | None
    _fast_durations: list[float]
    _fast_last: float
    _fast_online: float | None
    _fast_recent: deque[tuple[float, float]]
    _fast_cut_at: float | None
    _slow_quota: int | None
    _signals: bool
    _clamp_until: float | None
    _slow_online: float | None
    _offline_busy: bool
    _offline_cpu: float
    _system_cpu: float
    _quota_on_parent: bool

    # -- the fast loop ------------------------------------------------------------------------------
    def fast_tick(self) -> bool:
        """Clamp the offline quota if online work needs room now; True if it was cut."""
        if not self.config.enforce:
            return False
        started = self.monotonic()
        try:
            tree, offline = self._fast_tree.sample(), self._fast_offline.sample()
            stall = self._fast_stall.sample() if self._fast_stall is not None else None
        except (OSError, ValueError) as exc:
            log.debug("fast sample failed: %s", exc)
            return False
        if tree is None or offline is None:
            return False
        online = tree if self.layout.online_tree else max(0.0, tree - offline)
        capacity = self.capacity.cpu_millis
        # Busy if either clock says so: CFS throttling leaves some 25 ms windows with no offline CPU at all.
        busy_at = capacity * self.config.offline_busy_percent / 100.0
        self._offline_busy = offline > busy_at or self._offline_cpu > busy_at
        if not self._quota_on_parent:  # online pods share the offline parent: its quota must stay off
            self._fast_took(started)
            return False
        window_start, self._fast_last = self._fast_last, started
        if self._signals:
            baseline = online if self._slow_online is None else self._slow_online  # none yet: no rise
            signals = OnlineSignals(online, baseline, None if stall is None else stall / 10.0)
            cut, reacted = self._clamp_on_signals(started, capacity, signals)
        else:
            cut, reacted = self._always_clamped(started, capacity, online)
        if reacted:
            self.metrics.reaction.observe(self.monotonic() - window_start)
        self._fast_took(started)
        return cut

    def _fast_took(self, started: float) -> None:
        if len(self._fast_durations) < 4096:  # flushed by every slow tick
            self._fast_durations.append(self.monotonic() - started)

    def _clamp_on_signals(self, now: float, capacity: int, signals: OnlineSignals) -> tuple[bool, bool]:
        """Offline pods are SCHED_IDLE: clamp when online signals call for it, hold the clamp ``clampHold``
        after the last one (cutting further while online use grows), then open the quota again.
        (cut, cut for a signal)."""
        cpu = self.spec.cpu
        signal = online_signal(signals, capacity, cpu)
        if signal is not None:
            self._clamp_until = now + cpu.clamp_hold
        if self._clamp_until is None:
            return False, False
        if now >= self._clamp_until:
            self._clamp_until = None
            self._apply([CgroupWrite(self.layout.offline_parent, "cpu.quota", None,
                                     f"fast: open (no online signal for {cpu.clamp_hold * 1000:.0f} ms)")])
            return False, False
        wanted = offline_quota(capacity, signals.online, self._system_cpu, cpu)
        current = capacity if self.quota is None else self.quota
        if wanted >= current - capacity * self.config.fast_cut_percent / 100.0:
            return False, False
        self._apply([CgroupWrite(self.layout.offline_parent, "cpu.quota", wanted,
                                 f"fast: {signal or 'clamp held'}: online {signals.online:.0f}m + system "
                                 f"{self._system_cpu:.0f}m")])
        return True, signal is not None

    def _always_clamped(self, started: float, capacity: int, online: float) -> tuple[bool, bool]:
        """No SCHED_IDLE: the quota is the protection.  Cut it as soon as online work needs the room.
        (cut, cut as online use rose)."""
        system = self._system_cpu  # daemons move slowly: the slow loop's figure, one file read less a tick
        wanted = offline_quota(capacity, online, system, self.spec.cpu)
        rising = self._fast_online is not None and online > self._fast_online + capacity * 0.05
        self._fast_online = online
        recent = self._fast_recent
        recent.append((started, online))
        while recent and recent[0][0] < started - self.spec.cpu.clamp_hold:
            recent.popleft()
        step = capacity * self.config.fast_cut_percent / 100.0
        cut = self.quota is None or wanted < self.quota - step
        if cut:
            self._apply([CgroupWrite(self.layout.offline_parent, "cpu.quota", wanted,
                                     f"fast: online {online:.0f}m + system {system:.0f}m")])
            self._fast_cut_at = started
        elif self._fast_cut_at is not None and started - self._fast_cut_at >= self.spec.cpu.clamp_hold:
            self._reopen(capacity, max(o for _, o in recent), system, step)
        return cut, cut and rising

    def _reopen(self, capacity: int, peak: float, system: float, step: float) -> None:
        """After a cut, give offline work back the room online work has left for ``clampHold``: the quota
        for the highest online use seen in that span, never above the slow loop's decision.  Without this a
        cut held until the next slow tick, and bursty online work kept the offline quota at its 25 ms peaks
        nearly all the time."""
        if self._slow_quota is None or self.quota is None:
            return
        target = min(self._slow_quota, offline_quota(capacity, peak, system, self.spec.cpu))
        if target > self.quota + step:
            self._apply([CgroupWrite(self.layout.offline_parent, "cpu.quota", target,
                                     f"fast: room again (online peak {peak:.0f}m over "
                                     f"{self.spec.cpu.clamp_hold * 1000:.0f} ms + system {system:.0f}m)")])
        if self.quota >= self._slow_quota:
            self._fast_cut_at = None

