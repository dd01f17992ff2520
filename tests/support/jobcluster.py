"""A small cluster for Job controller tests: a MemoryHost, the controller loop, a clock that tests move, and the
parts of a scheduler and kubelet the controller waits for (admitting PodGroups, running and finishing pods)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from scheduler.controllers.host import MemoryHost
from scheduler.controllers.jobs.controller import Settings
from scheduler.controllers.kinds import COMMAND, JOB, POD, PODGROUP, annotations_of, name_of
from scheduler.controllers.loop import ControllerLoop, ReconcileResult

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CONTAINER = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}


def job_manifest(name: str = "train", *, namespace: str = "default", tasks: list[dict] | None = None,
                 **spec: object) -> dict:
    """A Job manifest; tasks are ``{"name", "replicas", ...}`` with a one-container template filled in."""
    tasks = tasks if tasks is not None else [{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 2}]
    full = [{"template": {"spec": {"containers": [copy.deepcopy(CONTAINER)]}}, **t} for t in tasks]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"tasks": full, **spec}}


class JobCluster:
    def __init__(self, *, graceful_pods: bool = False, wait_for_admission: bool = True) -> None:
        self.now = START
        self.host = MemoryHost(clock=lambda: self.now, graceful_pods=graceful_pods)
        self.loop = ControllerLoop(Settings(wait_for_admission=wait_for_admission,
                                            key_pair=lambda: ("PRIVATE", "ssh-rsa PUBLIC")))

    # -- the controller ------------------------------------------------------------------------------------
    def reconcile(self) -> ReconcileResult:
        return self.loop.reconcile(self.host, self.now)

    def settle(self, rounds: int = 6) -> int:
        """Reconcile until a round writes nothing; the writes in all."""
        total = 0
        for _ in range(rounds):
            writes = self.reconcile().writes
            total += writes
            if not writes:
                return total
        raise AssertionError("the controller did not settle")

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    # -- reading ------------------------------------------------------------------------------------------
    def job(self, name: str = "train", namespace: str = "default") -> dict:
        job = self.host.get(JOB, namespace, name)
        assert job is not None, f"Job {namespace}/{name} is gone"
        return job

    def status(self, name: str = "train") -> dict:
        return self.job(name).get("status") or {}

    def phase(self, name: str = "train") -> str:
        return self.status(name).get("state", {}).get("phase", "")

    def pods(self) -> dict[str, dict]:
        return {name_of(p): p for p in self.host.list(POD)}

    def pod_names(self) -> list[str]:
        return sorted(self.pods())

    def podgroups(self) -> list[dict]:
        return self.host.list(PODGROUP)

    def events(self, reason: str | None = None) -> list[str]:
        return [e["message"] for e in self.host.events if reason is None or e["reason"] == reason]

    # -- the scheduler's part -----------------------------------------------------------------------------
    def admit(self) -> None:
        """Every Pending PodGroup Inqueue, as the enqueue action would."""
        for group in self.podgroups():
            if (group.get("status") or {}).get("phase", "Pending") == "Pending":
                self.host.write_status(PODGROUP, group["metadata"]["namespace"], name_of(group), {"phase": "Inqueue"})
                self.host.writes -= 1  # the scheduler's write, not the controller's

    def set_group_phase(self, phase: str) -> None:
        for group in self.podgroups():
            self.host.write_status(PODGROUP, group["metadata"]["namespace"], name_of(group), {"phase": phase})
            self.host.writes -= 1

    # -- the kubelet's part -------------------------------------------------------------------------------
    def set_phase(self, phase: str, *names: str, exit_code: int | None = None, ready: bool = True,
                  restarts: int = 0) -> None:
        for name in names or self.pod_names():
            status: dict = {"phase": phase}
            if exit_code is not None or phase != "Pending" or restarts:
                state = {"terminated": {"exitCode": exit_code or 0}} if phase in ("Failed", "Succeeded") else \
                    {"running": {}}
                status["containerStatuses"] = [{"name": "main", "ready": ready and phase == "Running",
                                                "restartCount": restarts, "state": state}]
            self.host.set_pod_status("default", name, **status)

    def evict(self, name: str) -> None:
        """Someone else (a kubelet, an eviction) deletes the pod."""
        self.host.delete(POD, "default", name)
        self.host.writes -= 1

    def command(self, action: str, job: str = "train", name: str | None = None) -> None:
        target = self.job(job)
        self.host.create({"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                          "metadata": {"name": name or f"{job}-{action.lower()}", "namespace": "default"},
                          "action": action,
                          "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job,
                                     "uid": target["metadata"]["uid"], "controller": True}})
        self.host.writes -= 1

    def commands(self) -> list[dict]:
        return self.host.list(COMMAND)

    def versions(self) -> dict[str, str]:
        return {n: annotations_of(p).get("volcano.sh/job-version", "") for n, p in self.pods().items()}
