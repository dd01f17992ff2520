"""Embedded mode's events: what happened to pods, groups and nodes, as ``kubectl get events`` and ``describe`` show.

Kubernetes keeps an Event object per occurrence, and its recorder folds an
occurrence that repeats one already seen (same object, type, reason and
message) into it: ``count`` goes up and ``lastTimestamp`` moves.  The same
happens here.  The scheduler records ``Scheduled``, ``FailedScheduling``,
``Preempted``, ``Evicted``, ``Killing``, ``TaintManagerEviction`` and the
nodes' ``NodeReady``/``NodeNotReady``; what the agents' runtimes report is
turned into ``Started``, ``BackOff``, ``Failed``, ``Completed``
(:mod:`.mode`).

Bounded: at most :data:`~scheduler.modes.embedded.store.MAX_EVENTS` are kept,
the oldest dropped first, and each message at most :data:`MAX_MESSAGE`
characters.  They are written to the store in one transaction per cycle (and
per second of node lifecycle), not one per event, so a restart keeps the recent
ones; an event is worth less than a decision, so a store that cannot take them
is logged, never raised.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple

from scheduler.controllers.host import rfc3339
from scheduler.modes.embedded.store import MAX_EVENTS, Store

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
SCHEDULER = "scoria-scheduler"
NODE_CONTROLLER = "node-controller"  # the name Kubernetes' node lifecycle controller records under
CONTROLLERS = "scoria-controllers"  # the Job and PodGroup controllers (Volcano's vc-controller-manager)
KUBELET = "kubelet"  # what the agent's runtime does, under the name kubectl users know it by
NORMAL, WARNING = "Normal", "Warning"


class Ref(NamedTuple):
    """The object an event is about (its ``involvedObject``)."""

    kind: str
    namespace: str  # "" for nodes and other cluster-scoped kinds
    name: str
    uid: str = ""


def stamp(seconds: float) -> str:
    return rfc3339(datetime.fromtimestamp(seconds, UTC))


class Events:
    def __init__(self, store: Store, clock: Callable[[], float], *, keep: int = MAX_EVENTS):
        self.store, self.clock, self.keep = store, clock, keep
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time: an older batch never lands after a newer one
        self._events: OrderedDict[int, dict] = OrderedDict()  # id -> event, oldest first
        self._series: dict[tuple, int] = {}  # (object, type, reason, message) -> id of its event
        self._dirty: set[int] = set()  # to write
        self._gone: set[int] = set()  # to delete: folded into a newer id
        self._next = 1

    def load(self) -> int:
        """The events the store kept; how many."""
        with self._lock:
            for ident, event in self.store.events()[-self.keep:]:
                self._events[ident] = event
                self._series[_series(event)] = ident
                self._next = max(self._next, ident + 1)
        return len(self._events)

    def record(self, ref: Ref, kind: str, reason: str, message: str, *, source: str = SCHEDULER,
               host: str = "") -> None:
        """One occurrence; folded into the same event when it repeats one kept (count and last time move)."""
        now = stamp(self.clock())
        message = message[:MAX_MESSAGE]
        obj = {"kind": ref.kind, "name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {}),
               **({"uid": ref.uid} if ref.uid else {})}
        with self._lock:
            key = (ref.kind, ref.namespace, ref.name, ref.uid, kind, reason, message)
            old_id = self._series.get(key)
            ident, self._next = self._next, self._next + 1  # the newest id: kept longest, by id as by time
            if old_id is not None and old_id in self._events:
                event = self._events.pop(old_id)
                event["count"] += 1
                event["lastTimestamp"] = now
                self._dirty.discard(old_id)
                self._gone.add(old_id)
            else:
                event = {"apiVersion": "v1", "kind": "Event",
                         "metadata": {"name": f"{ref.name}.{ident:x}", "namespace": ref.namespace or "default"},
                         "involvedObject": obj, "type": kind, "reason": reason, "message": message,
                         "source": {"component": source, **({"host": host} if host else {})},
                         "count": 1, "firstTimestamp": now, "lastTimestamp": now}
            self._events[ident] = event
            self._series[key] = ident
            while len(self._events) > self.keep:
                dropped, old = self._events.popitem(last=False)
                self._series.pop(_series(old), None)
                self._dirty.discard(dropped)
            self._dirty.add(ident)

    def emit(self, regarding: dict, kind: str, reason: str, message: str, *, source: str = CONTROLLERS) -> None:
        """What the controllers' ``Host.emit_event`` hands over: ``regarding`` is an object reference (kind,
        namespace, name, uid), as a Kubernetes Event's."""
        self.record(Ref(str(regarding.get("kind") or ""), str(regarding.get("namespace") or ""),
                        str(regarding.get("name") or ""), str(regarding.get("uid") or "")), kind, reason, message,
                    source=source)

    def flush(self) -> int:
        """Write what changed since the last flush, in one transaction; how many events."""
        with self._flushing:
            with self._lock:
                batch = [(i, dict(self._events[i])) for i in sorted(self._dirty) if i in self._events]
                gone, self._dirty, self._gone = sorted(self._gone), set(), set()
            try:
                self.store.put_events(batch, gone, keep=self.keep)
            except Exception as exc:  # events are best effort: a full disk must not stop a cycle
                log.warning("%d event(s) not stored: %s", len(batch), exc)
        return len(batch)

    def list(self, ref: Ref | None = None) -> list[dict]:
        """Every kept event, oldest first by last time; only those about ``ref`` (any uid when it has none)."""
        with self._lock:
            events = [dict(e) for e in self._events.values()]
        if ref is not None:
            events = [e for e in events if _about(e, ref)]
        return sorted(events, key=lambda e: e["lastTimestamp"])


def _about(event: dict, ref: Ref) -> bool:
    obj = event.get("involvedObject") or {}
    return (obj.get("kind"), obj.get("namespace", ""), obj.get("name")) == (ref.kind, ref.namespace, ref.name) and (
        not ref.uid or obj.get("uid", "") in ("", ref.uid))


def _series(event: dict) -> tuple:
    obj = event.get("involvedObject") or {}
    return (obj.get("kind"), obj.get("namespace", ""), obj.get("name"), obj.get("uid", ""), event.get("type"),
            event.get("reason"), event.get("message"))
