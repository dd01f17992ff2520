"""Volcano Jobs in Kubernetes mode for tests: a fake API server with two nodes, Kubernetes mode with its controllers,
a scheduler the test cycles and a kubelet the test plays (tests/scheduler/modes/test_kubernetes_jobs.py, and
tests/scheduler/vcctl/test_cli_kubernetes.py through its conftest)."""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Iterator

from kubernetes import client

from hack.lib.fake_apiserver import FakeApiServer, node
from tests.support import waiting
from tests.support.jobcluster import CONTAINER
from tests.support.kube_harness import Harness

VC_JOB = ("batch.volcano.sh", "v1alpha1")
CONFIG = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""
WRITES = ("create", "update", "patch", "delete", "deletecollection")
wait_until = functools.partial(waiting.wait_until, timeout=15.0)  # these tests wait up to 15 s unless they say


def volcano_job(name: str = "train", *, replicas: int = 2, **spec) -> dict:
    task = {"name": "worker", "replicas": replicas, "template": {"spec": {"containers": [copy.deepcopy(CONTAINER)]}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"minAvailable": replicas, "schedulerName": "scoria", "tasks": [task], **spec}}


class Cluster(Harness):
    """A fake API server, Kubernetes mode with its controllers, a scheduler cycled by the test, and a kubelet."""

    def __init__(self, api: FakeApiServer, **kwargs):
        super().__init__(api, CONFIG, namespaces=False, **kwargs)
        self.kube.start_controllers(lambda: True)
        self.custom = client.CustomObjectsApi(api.client())

    @property
    def controllers(self):
        assert self.kube.controllers is not None
        return self.kube.controllers

    # -- reading the server ----------------------------------------------------------------------------
    def job(self, name: str = "train") -> dict:
        return self.api.get("jobs.batch.volcano.sh", name, "default") or {}

    def phase(self, name: str = "train") -> str:
        return ((self.job(name).get("status") or {}).get("state") or {}).get("phase", "")

    def pods(self, job: str = "train") -> dict[str, dict]:
        return {n: p for (_, n), p in self.api.pods.items()
                if any(r.get("kind") == "Job" and r.get("name") == job for r in p["metadata"].get("ownerReferences") or [])}

    # -- the kubelet -----------------------------------------------------------------------------------
    def set_phase(self, name: str, phase: str, exit_code: int = 0) -> None:
        pod = self.api.get("pods", name, "default")
        assert pod is not None, f"pod {name} is gone"
        state = {"running": {}} if phase == "Running" else {"terminated": {"exitCode": exit_code}}
        pod["status"] = {**pod.get("status", {}), "phase": phase, "containerStatuses": [
            {"name": "main", "ready": phase == "Running", "restartCount": 0, "state": state}]}
        self.api.put(pod)

    def kubelet(self) -> None:
        """Terminating pods go; bound pods that are Pending start."""
        self.api.finish_terminating(everything=True)
        for (_, name), pod in list(self.api.pods.items()):
            if pod["spec"].get("nodeName") and pod["status"].get("phase") == "Pending" \
                    and not pod["metadata"].get("deletionTimestamp"):
                self.set_phase(name, "Running")

    def drive(self, predicate, timeout: float = 20.0, message: str = "the Job did not get there") -> None:
        """Scheduler cycles and the kubelet until ``predicate``."""
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"{message}: phase {self.phase()!r}, pods {sorted(self.pods())}"
            self.cycle()
            self.kubelet()
            time.sleep(0.05)

    def quiet_writes(self, seconds: float = 1.0) -> int:
        """Writes to the server over ``seconds`` once the controllers have settled (no reconcile for 0.3 s, the
        last change an informer brought handled), with nothing changing; the Lease's renewals aside."""
        if self.kube.controllers is not None:
            seen, since = -1, time.monotonic()
            while time.monotonic() - since < 0.3:
                if self.controllers.reconciles != seen:
                    seen, since = self.controllers.reconciles, time.monotonic()
                time.sleep(0.02)
        self.api.reset_requests()
        time.sleep(seconds)
        return sum(1 for c in self.api.calls if c.verb in WRITES and c.plural != "leases")


def two_node_api() -> Iterator[FakeApiServer]:
    """A fake API server with nodes n1 and n2 (4 CPUs, 16Gi, 110 pods each): the ``api`` fixture, made one with
    ``api = pytest.fixture(two_node_api, name="api")`` where it is used."""
    with FakeApiServer() as server:
        server.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
        server.put(node("n2", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
        yield server


def clusters(api: FakeApiServer) -> Iterator[Callable[..., Cluster]]:
    """``make(**mode_options)``: a :class:`Cluster` on ``api``, each closed at the end: the ``cluster`` fixture
    (``cluster = pytest.fixture(clusters, name="cluster")``)."""
    made: list[Cluster] = []

    def make(**kwargs) -> Cluster:
        c = Cluster(api, **kwargs)
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.close()
