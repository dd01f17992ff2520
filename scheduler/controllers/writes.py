"""What a controller's decision asks for, as values: the loop applies them, in order, through the host.

Keeping decisions as data is what makes the controllers testable without any host: a test (or a
ported Volcano case) compares the effects, and the loop is the one place that writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.controllers.host import AlreadyExists, Host, HostError, NotFound
from scheduler.controllers.kinds import Kind, kind_of, name_of, namespace_of


@dataclass(frozen=True)
class Create:
    obj: dict

    def describe(self) -> str:
        return f"create {kind_of(self.obj)} {namespace_of(self.obj)}/{name_of(self.obj)}"


@dataclass(frozen=True)
class Update:
    obj: dict

    def describe(self) -> str:
        return f"update {kind_of(self.obj)} {namespace_of(self.obj)}/{name_of(self.obj)}"


@dataclass(frozen=True)
class Annotate:
    kind: Kind
    namespace: str
    name: str
    annotations: dict[str, str | None]

    def describe(self) -> str:
        return f"annotate {self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Delete:
    kind: Kind
    namespace: str
    name: str
    uid: str = ""

    def describe(self) -> str:
        return f"delete {self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class WriteStatus:
    kind: Kind
    namespace: str
    name: str
    status: dict

    def describe(self) -> str:
        return f"status {self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Emit:
    regarding: dict
    type: str  # Normal or Warning
    reason: str
    message: str

    def describe(self) -> str:
        return f"event {self.reason} on {self.regarding.get('kind')} {self.regarding.get('name')}"


Effect = Create | Update | Annotate | Delete | WriteStatus | Emit


@dataclass
class Applied:
    """How applying a decision's effects went: writes made, and the first failure (None: all applied)."""

    writes: int = 0
    failed: str | None = None


def apply_effects(host: Host, effects: list[Effect]) -> Applied:
    """Apply ``effects`` in order; stop at the first one the host refuses (the rest wait for the next reconcile).

    Creating what exists already and deleting what is gone are what was wanted, so they count as done
    (as Volcano's controllers treat AlreadyExists and NotFound).
    """
    out = Applied()
    for effect in effects:
        try:
            match effect:
                case Create(obj):
                    host.create(obj)
                case Update(obj):
                    host.update(obj)
                case Annotate(kind, namespace, name, notes):
                    host.annotate(kind, namespace, name, notes)
                case Delete(kind, namespace, name, uid):
                    host.delete(kind, namespace, name, uid=uid)
                case WriteStatus(kind, namespace, name, status):
                    host.write_status(kind, namespace, name, status)
                case Emit(regarding, type_, reason, message):
                    host.emit_event(regarding, type_, reason, message)
            out.writes += 1
        except AlreadyExists:
            continue
        except NotFound:
            if isinstance(effect, Delete):
                continue
            out.failed = f"{effect.describe()}: not found"
            return out
        except HostError as exc:  # a mode's write failed (API error, store error): retried next reconcile
            out.failed = f"{effect.describe()}: {exc}"
            return out
    return out
