"""Events in embedded mode: what the controllers say about the objects they act on (a Job's
``CommandIssued``, ``ExecuteAction``, ``PodGroupPending``, ``FailedAdmission``), kept in memory — the newest
:data:`MAX_EVENTS` — and read by ``job view`` (``GET /events/KIND/NAMESPACE/NAME``).  Repeats of an event
are counted on it, as Kubernetes' event recorder does, rather than kept twice."""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import UTC, datetime

MAX_EVENTS = 10_000


class EventLog:
    def __init__(self, limit: int = MAX_EVENTS) -> None:
        self._lock = threading.Lock()
        self._events: OrderedDict[tuple, dict] = OrderedDict()
        self.limit = limit

    def record(self, regarding: dict, type: str, reason: str, message: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        key = (str(regarding.get("kind")), str(regarding.get("namespace") or ""), str(regarding.get("name")),
               str(regarding.get("uid") or ""), type, reason, message)
        with self._lock:
            event = self._events.pop(key, None)
            if event is None:
                event = {"type": type, "reason": reason, "message": message, "firstTime": now, "count": 0,
                         "regarding": dict(regarding)}
            event["count"] += 1
            event["time"] = now
            self._events[key] = event
            while len(self._events) > self.limit:
                self._events.popitem(last=False)

    def about(self, kind: str, namespace: str, name: str) -> list[dict]:
        """The events about one object (any uid it had), oldest first."""
        with self._lock:
            found = [dict(e) for k, e in self._events.items() if k[:3] == (kind, namespace, name)]
        return sorted(found, key=lambda e: (e["time"], e["firstTime"]))
