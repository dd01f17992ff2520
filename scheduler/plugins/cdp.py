"""cdp: cool-down protection — a running pod is no victim until it has run for its cool-down time.

Elastic jobs (Volcano issue 2075) grow into idle room and are preempted or
reclaimed back again; without a pause a pod that has just started could be
evicted at once, over and over.  A pod that carries ``volcano.sh/cooldown-time``
(a label, else an annotation; a Go duration such as ``600s`` or ``10m``) is
left out of preempt's and reclaim's victims while it is running and its
cool-down has not passed since it was scheduled.  A value that is not a Go
duration protects nothing (Volcano's rule) and is logged once.

When a pod was scheduled: the time this scheduler bound it; for a pod bound
before (or by another scheduler) its creation time, which comes no later than
Volcano's reading (the pod's ``PodScheduled`` condition), so such a pod is
protected at most as long as Volcano would protect it.  The plugin takes no
arguments.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Hashable
from typing import TYPE_CHECKING

from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)

COOLDOWN_KEY = "volcano.sh/cooldown-time"
# Go's time.ParseDuration: an optional sign, then number+unit pairs; a bare number only when it is 0.
_GO_DURATION = re.compile(r"([+-]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+|0)")
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_warned: set[str] = set()


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration string (``600s``, ``1h30m``, ``-5s``, ``0``); None when Go would refuse it."""
    match = _GO_DURATION.fullmatch(text)
    if match is None:
        return None
    seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(match.group(2)))
    return -seconds if match.group(1) == "-" else seconds


def cooldown(task: TaskInfo) -> float | None:
    """The pod's cool-down in seconds, None when it has none (or an unreadable one)."""
    pod = task.pod
    text = pod.labels.get(COOLDOWN_KEY)
    if text is None:
        text = pod.annotations.get(COOLDOWN_KEY)
        if text is None:
            return None
    seconds = go_duration(text)
    if seconds is None and text not in _warned:
        if len(_warned) > 1000:
            _warned.clear()
        _warned.add(text)
        log.warning("cdp: %s: %s=%r is not a duration (e.g. 600s); the pod has no cool-down protection",
                    pod.key, COOLDOWN_KEY, text)
    return seconds


class CooldownProtection(Plugin):
    name = "cdp"
    hooks = ("preemptable", "reclaimable", "evictable", "victim_key")

    def open(self, ssn: Session) -> None:
        self.now = ssn.now.timestamp()

    def protected(self, task: TaskInfo) -> bool:
        """Running, with a cool-down that has not passed since it was scheduled."""
        pod = task.pod
        if pod.phase != "Running":
            return False
        seconds = cooldown(task)
        if seconds is None:
            return False
        since = pod.bound_at if pod.bound_at is not None else (pod.created.timestamp() if pod.created else None)
        return since is not None and since + seconds > self.now

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not self.protected(t)]

    reclaimable = preemptable

    def evictable(self, task: TaskInfo) -> bool:
        return not self.protected(task)

    def victim_key(self, preemptor: TaskInfo) -> Hashable:
        return None  # the answer does not depend on the preemptor
