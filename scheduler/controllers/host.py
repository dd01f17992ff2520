"""Where the controllers read and write objects: the :class:`Host` a run mode implements, and
:class:`MemoryHost`, the in-memory one the simulator and the tests use.

A host holds manifests (dicts shaped as the Kubernetes API returns them).  It assigns what an API
server assigns on create (``uid``, ``resourceVersion``, ``creationTimestamp``, a Pod's ``Pending``
phase), deletes what an owner owns when the owner goes (garbage collection through
``ownerReferences``), and records events.  Controllers never call a host directly: they return
effects (:mod:`scheduler.controllers.writes`) and the loop applies them.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from scheduler.controllers.kinds import (
    ALL_KINDS,
    POD,
    PODGROUP,
    Kind,
    key_of,
    kind_of,
    meta,
    name_of,
    namespace_of,
    owner_uids,
)


class HostError(Exception):
    """A write the host refused or could not make (the loop retries at the next reconcile)."""


class NotFound(HostError):
    """The object does not exist (any more)."""


class AlreadyExists(HostError):
    """An object of that kind and name exists already."""


class Host(Protocol):
    """What a mode gives the controllers: objects by kind, writes, status, events."""

    def list(self, kind: Kind) -> list[dict]:
        """Every object of ``kind`` (all namespaces); the caller may not change what it gets."""
        ...

    def create(self, obj: dict) -> dict:
        """Store a new object; the stored form (uid, resourceVersion, creationTimestamp set).  AlreadyExists."""
        ...

    def update(self, obj: dict) -> dict:
        """Replace an object's metadata labels/annotations/ownerReferences and its spec (or data); status
        is kept.  NotFound."""
        ...

    def annotate(self, kind: Kind, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        """Merge ``annotations`` into the object's (a None value removes the key).  NotFound."""
        ...

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str = "") -> None:
        """Delete the object (only if its uid is ``uid``, when given) and, by garbage collection, what it owns.
        NotFound."""
        ...

    def write_status(self, kind: Kind, namespace: str, name: str, status: dict) -> None:
        """Replace the object's status.  NotFound."""
        ...

    def emit_event(self, regarding: dict, type: str, reason: str, message: str) -> None:
        """Record an event about ``regarding`` (an object reference); never fails the caller."""
        ...


def rfc3339(at: datetime) -> str:
    """A timestamp as Kubernetes writes one: UTC, whole seconds, ``Z``."""
    return at.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


_SPEC_KEYS = ("spec", "data", "stringData", "type", "action", "target", "reason", "message", "value",
              "globalDefault", "description", "preemptionPolicy")


def merge_annotations(notes: dict[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """``notes`` with ``changes`` applied as a merge patch applies them (None removes the key); ``notes`` itself."""
    for key, value in changes.items():
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
    return notes


class MemoryHost:
    """Objects in memory, with the API server's bookkeeping: deterministic uids, resource versions,
    creation times from ``clock``, cascading deletion, an event list and a count of writes.

    ``graceful_pods``: a deleted pod first gets a ``deletionTimestamp`` (terminating) and goes only
    when :meth:`finish_terminating` is called, as a kubelet would; otherwise it goes at once.
    ``copy_on_list``: :meth:`list` returns copies (False: the stored objects themselves, for speed, as an
    informer's cache does — the controllers never change what they list).
    """

    def __init__(self, *, clock: Callable[[], datetime] | None = None, graceful_pods: bool = False,
                 uid_seed: str = "scoria", copy_on_list: bool = True) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        self.graceful_pods = graceful_pods
        self.copy_on_list = copy_on_list
        self.objects: dict[Kind, dict[str, dict]] = {k: {} for k in ALL_KINDS}
        self.events: list[dict] = []
        self.writes = 0  # every create, update, annotate, delete, status write and event
        self._seed = uid_seed
        self._serial = 0
        self._version = 0

    # -- reading -------------------------------------------------------------------------------------------
    def list(self, kind: Kind) -> list[dict]:
        if kind == POD:
            self._refresh_pods()
        elif kind == PODGROUP:
            self._refresh_groups()
        objects = self.objects.get(kind, {}).values()
        return [copy.deepcopy(o) for o in objects] if self.copy_on_list else list(objects)

    def _refresh_pods(self) -> None:
        """Hook: a host whose pods' state lives elsewhere (a scheduler's cache) brings their statuses up to date
        before they are listed.  Here they are what was written."""

    def _refresh_groups(self) -> None:
        """Hook: as :meth:`_refresh_pods`, for PodGroups."""

    def get(self, kind: Kind, namespace: str, name: str) -> dict | None:
        obj = self.objects.get(kind, {}).get(self._key(kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def seed(self, doc: dict) -> dict:
        """Put an object in place as it is, filling in only what an API server would have (not a write):
        what existed before the controllers ran."""
        kind = kind_of(doc)
        stored = copy.deepcopy(doc)
        m = stored.setdefault("metadata", {})
        if kind.namespaced:
            m.setdefault("namespace", "default")
        if not m.get("uid"):
            self._serial += 1
            m["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self._seed}/{kind}/{key_of(stored)}/{self._serial}"))
        m.setdefault("creationTimestamp", rfc3339(self.clock()))
        m["resourceVersion"] = self._bump()
        self.objects.setdefault(kind, {})[key_of(stored)] = stored
        return copy.deepcopy(stored)

    # -- writing -------------------------------------------------------------------------------------------
    def create(self, obj: dict) -> dict:
        kind = kind_of(obj)
        table = self.objects.setdefault(kind, {})
        key = key_of(obj)
        if key in table:
            raise AlreadyExists(f"{kind} {key} already exists")
        stored = copy.deepcopy(obj)
        m = stored.setdefault("metadata", {})
        if kind.namespaced:
            m.setdefault("namespace", "default")
        self._serial += 1
        m["uid"] = m.get("uid") or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self._seed}/{kind}/{key}/{self._serial}"))
        m.setdefault("creationTimestamp", rfc3339(self.clock()))
        m["resourceVersion"] = self._bump()
        if kind.kind == "Pod" and kind.api_version == "v1":
            stored.setdefault("status", {}).setdefault("phase", "Pending")
        table[key] = stored
        self.writes += 1
        return copy.deepcopy(stored)

    def update(self, obj: dict) -> dict:
        stored = self._stored(kind_of(obj), namespace_of(obj), name_of(obj))
        new_meta, old_meta = meta(obj), stored["metadata"]
        for field in ("labels", "annotations", "ownerReferences"):
            if field in new_meta:
                old_meta[field] = copy.deepcopy(new_meta[field])
            else:
                old_meta.pop(field, None)
        for field in _SPEC_KEYS:
            if field in obj:
                stored[field] = copy.deepcopy(obj[field])
            else:
                stored.pop(field, None)
        old_meta["resourceVersion"] = self._bump()
        self.writes += 1
        return copy.deepcopy(stored)

    def annotate(self, kind: Kind, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        stored = self._stored(kind, namespace, name)
        merge_annotations(stored["metadata"].setdefault("annotations", {}), annotations)
        stored["metadata"]["resourceVersion"] = self._bump()
        self.writes += 1

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str = "") -> None:
        stored = self._stored(kind, namespace, name)
        if uid and stored["metadata"].get("uid") != uid:
            raise NotFound(f"{kind} {namespace}/{name} with uid {uid} is gone (another has its name)")
        self.writes += 1
        if self.graceful_pods and kind.kind == "Pod" and kind.api_version == "v1":
            stored["metadata"].setdefault("deletionTimestamp", rfc3339(self.clock()))
            stored["metadata"]["resourceVersion"] = self._bump()
            return
        self._remove(kind, self._key(kind, namespace, name))

    def write_status(self, kind: Kind, namespace: str, name: str, status: dict) -> None:
        stored = self._stored(kind, namespace, name)
        stored["status"] = copy.deepcopy(status)
        stored["metadata"]["resourceVersion"] = self._bump()
        self.writes += 1

    def emit_event(self, regarding: dict, type: str, reason: str, message: str) -> None:
        self.events.append({"regarding": dict(regarding), "type": type, "reason": reason, "message": message,
                            "time": rfc3339(self.clock())})
        self.writes += 1

    # -- the kubelet's part, for tests and the simulator ---------------------------------------------------
    def set_pod_status(self, namespace: str, name: str, **status: object) -> None:
        """Change a pod's status fields (phase, containerStatuses, ...) as its kubelet would; not a write."""
        stored = self._stored(Kind("v1", "Pod"), namespace, name)
        stored.setdefault("status", {}).update(copy.deepcopy(status))
        stored["metadata"]["resourceVersion"] = self._bump()

    def finish_terminating(self) -> int:
        """Remove the pods that were terminating (graceful deletion done); how many."""
        table = self.objects.get(Kind("v1", "Pod"), {})
        gone = [key for key, pod in table.items() if pod["metadata"].get("deletionTimestamp")]
        for key in gone:
            self._remove(Kind("v1", "Pod"), key)
        return len(gone)

    # -- inside --------------------------------------------------------------------------------------------
    def _bump(self) -> str:
        self._version += 1
        return str(self._version)

    @staticmethod
    def _key(kind: Kind, namespace: str, name: str) -> str:
        return f"{namespace or 'default'}/{name}" if kind.namespaced else name

    def _stored(self, kind: Kind, namespace: str, name: str) -> dict:
        obj = self.objects.get(kind, {}).get(self._key(kind, namespace, name))
        if obj is None:
            raise NotFound(f"{kind} {self._key(kind, namespace, name)} not found")
        return obj

    def _remove(self, kind: Kind, key: str) -> None:
        """Drop the object and, depth first, everything whose ownerReferences name it (foreground deletion)."""
        obj = self.objects[kind].pop(key, None)
        if obj is None:
            return
        uid = obj["metadata"].get("uid")
        if not uid:
            return
        for other_kind, table in self.objects.items():
            for other_key in [k for k, o in table.items() if uid in owner_uids(o)]:
                self._remove(other_kind, other_key)
