"""The simulator's controllers: Volcano Jobs and Commands read from the files beside the other objects,
admitted as Volcano's webhook admits them, and the real controller loop run before each cycle."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.api.loader import BUILTIN_PRIORITY_CLASSES, Workload, load_workload
from scheduler.api.manifests import ManifestError
from scheduler.api.objects import DEFAULT_QUEUE
from scheduler.cluster.cache import ClusterCache
from scheduler.controllers.jobs.admission import AdmissionContext, QueueFacts, admit_command, admit_job
from scheduler.controllers.jobs.controller import Settings
from scheduler.controllers.jobs.spec import COMMAND_API, JOB_API, parse_job
from scheduler.controllers.kinds import JOB, annotations_of, controller_ref, name_of, namespace_of
from scheduler.controllers.loop import ControllerLoop
from scheduler.controllers.podgroups import PodGroupSettings
from scheduler.controllers.sshkeys import ssh_keygen
from scheduler.modes.simulator.host import SimulatorHost


def _job(doc: dict, source: str) -> tuple[str, Any]:
    job = parse_job(doc, source)  # the fields as written; admission, which needs the queues, comes after loading
    return job.key, doc


def _command(doc: dict, source: str) -> tuple[str, Any]:
    command = admit_command(doc, source)
    return f"{command.namespace}/{command.name}", doc


CONTROLLER_KINDS = {(JOB_API, "Job"): ("Job", _job), (COMMAND_API, "Command"): ("Command", _command)}


def default_scheduler(names: Iterable[str]) -> str:
    return sorted(names)[0] if names else "scoria"


def load_with_controllers(paths: Iterable[str | os.PathLike], *, scheduler_names: frozenset[str]) -> Workload:
    """The workload with its Jobs (admitted against its queues and priority classes) and Commands."""
    work = load_workload(paths, extra_kinds=CONTROLLER_KINDS, keep_documents=True)
    queues = {q.name: QueueFacts(q.state, sum(1 for o in work.queues if o.parent == q.name)) for q in work.queues}
    queues.setdefault(DEFAULT_QUEUE, QueueFacts())
    context = AdmissionContext(queues=queues, scheduler_name=default_scheduler(scheduler_names),
                               priority_classes={c.name for c in work.priority_classes} | set(BUILTIN_PRIORITY_CLASSES))
    jobs = set()
    for key, doc in work.extra.get("Job", ()):
        admit_job(doc, work.sources[("Job", key)], context)
        jobs.add(key)
    for key, doc in work.extra.get("Command", ()):
        target = f"{namespace_of(doc)}/{doc['target'].get('name')}"
        if target not in jobs:
            raise ManifestError(work.sources[("Command", key)], f"Command {key}",
                                f"target.name: Job {target} is not defined")
    return work


def needs_controllers(work: Workload) -> bool:
    if work.extra.get("Job") or work.extra.get("Command"):
        return True
    return any(controller_ref(doc) is not None and not annotations_of(doc).get("scheduling.k8s.io/group-name")
               for (kind, _), doc in work.documents.items() if kind == "Pod")


@dataclass
class SimulatedControllers:
    host: SimulatorHost
    loop: ControllerLoop
    at: datetime

    @classmethod
    def start(cls, cache: ClusterCache, work: Workload, at: datetime, *, scheduler_names: frozenset[str],
              wait_for_admission: bool) -> SimulatedControllers | None:
        """The controllers over the workload, or None when nothing in it needs them."""
        if not needs_controllers(work):
            return None
        host = SimulatorHost(cache, clock=lambda: at)
        for pod in work.pods:
            doc = dict(work.documents[("Pod", pod.key)])
            doc["metadata"] = {**doc.get("metadata", {}), "uid": pod.uid}
            host.seed(doc)
        for kind, items in (("PodGroup", work.podgroups), ("Queue", work.queues),
                            ("PriorityClass", work.priority_classes)):
            for obj in items:
                host.seed(work.documents[(kind, getattr(obj, "key", None) or obj.name)])
        for kind in ("Job", "Command"):
            for _, doc in work.extra.get(kind, ()):
                host.seed(doc)
        # one key pair for every ssh Job of the run: nothing reads the keys in a simulation
        settings = Settings(scheduler_name=default_scheduler(scheduler_names), wait_for_admission=wait_for_admission,
                            key_pair=functools.cache(ssh_keygen))
        loop = ControllerLoop(settings, PodGroupSettings(scheduler_names=scheduler_names))
        return cls(host, loop, at)

    def reconcile(self) -> int:
        return self.loop.reconcile(self.host, self.at).writes

    def job_report(self) -> list[dict]:
        out = []
        for job in sorted(self.host.list(JOB), key=lambda j: (namespace_of(j), name_of(j))):
            status = job.get("status") or {}
            row = {"namespace": namespace_of(job), "name": name_of(job),
                   "phase": (status.get("state") or {}).get("phase", ""),
                   "podGroup": f"{name_of(job)}-{job['metadata']['uid']}"}
            for key in ("minAvailable", "pending", "running", "succeeded", "failed", "terminating", "unknown",
                        "version", "retryCount"):
                row[key] = status.get(key, 0)
            out.append(row)
        return out
