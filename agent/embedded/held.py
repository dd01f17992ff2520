"""The pods the local runtime holds, in memory and on disk.

A :class:`HeldPod` is a pod's record (what is saved), its parsed spec and the
handles of its running containers.  :class:`Held` is the table of them: every
change is saved under the state directory before it matters (:meth:`Held.save`),
a pod let go is forgotten on disk too (:meth:`Held.drop`), and the uids stopped
lately are remembered so that a late START is ignored.  Not thread-safe: the
runtime calls it under its lock.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from agent.embedded.context import LOGGER
from agent.embedded.phase import TERMINAL
from agent.embedded.process import Handle
from agent.embedded.records import PodRecord, StateDir
from agent.embedded.spec import PodSpec, safe_name

log = logging.getLogger(LOGGER)

STOPPED_REMEMBERED = 10_000


@dataclass
class HeldPod:
    record: PodRecord
    spec: PodSpec | None                       # None: a pod that never parsed (reported Failed)
    handles: dict[str, Handle] = field(default_factory=dict)
    dirty: bool = False

    @property
    def terminal(self) -> bool:
        return self.record.phase in TERMINAL


class Held:
    def __init__(self, state: StateDir):
        self.state = state
        self._pods: dict[str, HeldPod] = {}
        self._stopped: OrderedDict[str, None] = OrderedDict()  # uids stopped lately: a late START is ignored

    def __contains__(self, uid: str) -> bool:
        return uid in self._pods

    def __iter__(self) -> Iterator[HeldPod]:
        return iter(self._pods.values())

    def get(self, uid: str) -> HeldPod | None:
        return self._pods.get(uid)

    def add(self, pod: HeldPod) -> HeldPod:
        self._pods[pod.record.uid] = pod
        return pod

    def save(self, pod: HeldPod) -> None:
        """Write the pod's record (a pod without a usable uid has none); a failure is logged, not raised."""
        if not safe_name(pod.record.uid):
            return
        try:
            self.state.save(pod.record)
            pod.dirty = False
        except OSError as exc:
            log.error("local runtime: cannot save pod %s: %s", pod.record.key, exc)

    def save_if_dirty(self, pod: HeldPod) -> None:
        """Save a pod still held whose record changed since it was last saved."""
        if pod.dirty and pod.record.uid in self._pods:
            self.save(pod)

    def drop(self, pod: HeldPod) -> None:
        """Let the pod go: out of the table, its record and exit files removed (its logs stay)."""
        self._pods.pop(pod.record.uid, None)
        self.state.remove(pod.record.uid)
        self.remember_stopped(pod.record.uid)

    def remember_stopped(self, uid: str) -> None:
        self._stopped[uid] = None
        self._stopped.move_to_end(uid)
        while len(self._stopped) > STOPPED_REMEMBERED:
            self._stopped.popitem(last=False)

    def was_stopped(self, uid: str) -> bool:
        return uid in self._stopped

    def trim_finished(self, max_finished: int) -> None:
        """Forget the oldest finished pods (their cgroups gone) beyond ``max_finished``."""
        finished = [p for p in self._pods.values() if p.terminal and p.record.stopping is None]
        if len(finished) <= max_finished:
            return
        finished.sort(key=lambda p: max((c.finished_at for c in p.record.containers), default=p.record.started_at))
        for pod in finished[:len(finished) - max_finished]:
            if pod.record.cgroup:
                continue
            log.info("local runtime: forgetting finished pod %s (more than %d finished pods held)", pod.record.key,
                     max_finished)
            self.drop(pod)

    def phase_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for pod in self._pods.values():
            counts[pod.record.phase] = counts.get(pod.record.phase, 0) + 1
        return counts
