"""What a vcctl-like command does to Volcano Jobs and Queues, whatever holds them.

``python -m scheduler job|queue ...`` (:mod:`scheduler.vcctl`) speaks vcctl's words; a :class:`Backend`
carries them out: the embedded scheduler's control endpoint, or a cluster's API server with a
kubeconfig.  A backend only stores, reads and deletes objects: everything both would otherwise do
twice — the Command that suspends or resumes a Job, a Queue made from flags, the checks before a
Queue is deleted, a ``job list`` row — is here, as pure functions over Kubernetes-shaped manifests.

Errors a backend raises: :class:`VcctlError` for what the user is told in one line (an object that
does not exist, one that exists already, a server that cannot be reached or refuses the request),
:class:`proto.errors.InputError` for a manifest the server refuses as invalid (the command exits 2).
"""

from __future__ import annotations

import secrets
from typing import Protocol

from scheduler.controllers.kinds import COMMAND, QUEUE, meta, name_of, namespace_of, new_controller_ref, part

SUSPEND, RESUME = "AbortJob", "ResumeJob"  # the Command actions of `job suspend` and `job resume` (vcctl's)
QUEUE_STATES = {"open": "Open", "close": "Closed"}  # `queue operate --action` -> the state the Queue gets
DEFAULT_QUEUE = "default"


class VcctlError(Exception):
    """Something to tell the user in one line; the command exits with ``status``."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class NotFound(VcctlError):
    """The Job or Queue named does not exist."""


class AlreadyExists(VcctlError):
    """A Job or Queue of that name exists already."""


class Backend(Protocol):
    """Where the Jobs and Queues are.  Objects are Kubernetes-shaped dicts (as the API returns them)."""

    def list_jobs(self, namespace: str | None) -> list[dict]:
        """The Jobs of ``namespace`` (None: every namespace), status included."""
        ...

    def get_job(self, namespace: str, name: str) -> dict:
        """One Job, status included; NotFound."""
        ...

    def create_job(self, doc: dict) -> dict:
        """Store a new Job (``metadata.namespace`` set by the caller); the stored form.  AlreadyExists;
        InputError when the server refuses it as invalid (admission)."""
        ...

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete a Job; what it owns (pods, PodGroup, plugin objects) goes with it.  NotFound."""
        ...

    def create_command(self, doc: dict) -> dict:
        """Store a ``bus.volcano.sh`` Command (made by :func:`job_command`); the controller takes it."""
        ...

    def job_events(self, namespace: str, name: str) -> list[dict]:
        """Events about the Job, oldest first, as ``{type, reason, message, time}`` (``[]`` if there are none)."""
        ...

    def list_queues(self) -> list[dict]:
        ...

    def get_queue(self, name: str) -> dict:
        """One Queue; NotFound."""
        ...

    def create_queue(self, doc: dict) -> dict:
        """Store a new Queue (made by :func:`queue_manifest`); AlreadyExists."""
        ...

    def set_queue_state(self, name: str, state: str) -> None:
        """Set ``status.state`` of a Queue to ``Open`` or ``Closed``; NotFound."""
        ...

    def set_queue_weight(self, name: str, weight: int) -> None:
        """Set ``spec.weight`` of a Queue; NotFound."""
        ...

    def delete_queue(self, name: str) -> None:
        """Delete a Queue (the caller has checked :func:`check_queue_deletable`); NotFound."""
        ...


def job_command(job: dict, action: str) -> dict:
    """The Command vcctl makes to ``action`` a Job: owned by the Job, naming it (uid included) as its target.

    Volcano names it by ``generateName: <job>-<action>-``; the name is made here (five random letters,
    as the API server would add) so that a backend without generateName stores it as it is.
    """
    ref = new_controller_ref(job)
    suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    return {"apiVersion": COMMAND.api_version, "kind": COMMAND.kind,
            "metadata": {"name": f"{name_of(job)}-{action.lower()}-{suffix}", "namespace": namespace_of(job),
                         "ownerReferences": [ref]},
            "action": action, "target": ref}


def queue_manifest(name: str, *, weight: int = 1, state: str = "Open") -> dict:
    """The Queue ``vcctl queue create`` makes: its weight, and its state in ``status`` (where Volcano keeps it)."""
    return {"apiVersion": QUEUE.api_version, "kind": QUEUE.kind, "metadata": {"name": name},
            "spec": {"weight": weight}, "status": {"state": state}}


def check_queue_deletable(queue: dict) -> None:
    """Volcano's admission for deleting a Queue: never ``default``, and only once it is Closed."""
    name = name_of(queue)
    if name == DEFAULT_QUEUE:
        raise VcctlError(f"queue {DEFAULT_QUEUE!r} can not be deleted")
    state = str(part(queue, "status").get("state") or "Open")
    if state != "Closed":
        raise VcctlError(f"only a queue with state Closed can be deleted, queue {name!r} is {state}: "
                         f"close it first (queue operate --name {name} --action close)")


def job_row(job: dict) -> dict:
    """What ``job list`` shows of a Job (vcctl's columns)."""
    status = part(job, "status")
    labels = meta(job).get("labels") or {}
    replicas = sum(int(t.get("replicas") or 0) for t in part(job, "spec").get("tasks") or () if isinstance(t, dict))
    return {"namespace": namespace_of(job), "name": name_of(job),
            "creation": str(meta(job).get("creationTimestamp") or "")[:10],
            "phase": str(part(status, "state").get("phase") or ""),
            "jobType": str(labels.get("volcano.sh/job-type") or "Batch"), "replicas": replicas,
            **{k: int(status.get(k) or 0) for k in ("minAvailable", "pending", "running", "succeeded", "failed",
                                                     "unknown", "retryCount")}}

