"""Volcano Jobs in embedded mode, scheduler side: apply and admission, the controllers over the store (one
transaction a reconcile, cascading deletion, status from the runtime's reports), pod addresses and names, and
what a START carries.  The agent is faked by the runtime a report carries; tests/e2e/test_volcano_jobs.py runs
the real processes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from proto.model import ContainerRuntime, PodActionKind, PodRuntime
from scheduler.api.manifests import ManifestError
from scheduler.controllers.kinds import JOB, POD
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Store
from tests.scheduler.modes.test_embedded import View, cluster, docs
from tests.support.jobcluster import job_manifest


def settle(embedded: Embedded, scheduler, rounds: int = 8) -> None:
    """Reconcile and schedule until neither changes anything."""
    for _ in range(rounds):
        writes, _ = embedded.controllers.reconcile_once()
        result = scheduler.run_once()
        if not writes and not result.changed:
            return
    raise AssertionError("did not settle")


def small_job(name: str = "train", **spec) -> dict:
    doc = job_manifest(name, **spec)
    for task in doc["spec"]["tasks"]:
        task["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        task["template"]["spec"]["containers"][0]["command"] = ["sleep", "60"]
    return doc


def pods(embedded: Embedded) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in embedded.controllers.host.list(POD)}


def job_status(embedded: Embedded, name: str = "train") -> dict:
    stored = embedded.store.get("Job", f"default/{name}")
    assert stored is not None
    return stored.status


def report_running(embedded: Embedded, node: str = "n0", phase: str = "Running", exit_code: int = 0,
                   only: set[str] | None = None, deleted_too: bool = False) -> list:
    """The node's report: what is bound to it runs (or ends with ``phase``), but what was deleted it has
    stopped (unless ``deleted_too``: not yet)."""
    runtime = []
    for p in embedded.cache.pods.values():
        if p.terminating and not deleted_too:
            continue
        if p.node_name == node and (only is None or p.name in only):
            state = "running" if phase == "Running" else "terminated"
            runtime.append(PodRuntime(p.uid, p.namespace, p.name, phase, log_dir="",
                                      containers=[ContainerRuntime("main", state, exit_code, 0, 1)]))
    return embedded.pod_actions(node, View(*runtime))


def test_a_job_is_admitted_stored_and_its_pods_made_scheduled_and_named(tmp_path: Path) -> None:
    embedded, scheduler = cluster(tmp_path)
    embedded.controllers.key_pair = lambda: ("PRIVATE", "ssh-rsa PUBLIC")
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
    applied = embedded.apply(docs(small_job(plugins={"svc": [], "ssh": [], "env": []})))
    assert [(a.name, a.result) for a in applied] == [("job/default/train", "created")]
    settle(embedded, scheduler)
    assert sorted(pods(embedded)) == ["train-master-0", "train-worker-0", "train-worker-1"]
    assert all(p.node_name == "n0" for p in embedded.cache.pods.values())
    for kind in ("Service", "ConfigMap", "Secret", "NetworkPolicy", "PodGroup"):
        assert embedded.store.of_kind(kind), kind
    # each pod an address of the range; the START says it, the names of the namespace, the svc ConfigMap and
    # the ssh Secret its volumes and variables read
    actions = embedded.pod_actions("n0", View())
    starts = {a.name: json.loads(a.pod_json) for a in actions if a.kind == PodActionKind.START}
    context = starts["train-master-0"]["scoria"]
    assert context["network"]["cidr"] == "10.213.0.0/16" and context["network"]["podIP"].startswith("10.213.")
    names = {n: ip for ip, ns in context["hosts"] for n in ns}
    assert names["train-worker-1.train"] == starts["train-worker-1"]["scoria"]["network"]["podIP"]
    assert names["train-master-0.train.default.svc.cluster.local"] == context["network"]["podIP"]
    assert set(context["configMaps"]) == {"train-svc"} and set(context["secrets"]) == {"train-ssh"}
    assert base64.b64decode(context["secrets"]["train-ssh"]["data"]["id_rsa"]) == b"PRIVATE"
    assert len({s["scoria"]["network"]["podIP"] for s in starts.values()}) == 3


def test_admission_refuses_with_the_field_and_stores_nothing(tmp_path: Path) -> None:
    embedded, _ = cluster(tmp_path)
    bad = small_job()
    bad["spec"]["tasks"][1]["minAvailable"] = 5
    with pytest.raises(ManifestError, match=r"spec.tasks\[1\].minAvailable"):
        embedded.apply(docs(small_job("other"), bad))
    assert embedded.store.of_kind("Job") == []
    with pytest.raises(ManifestError, match="queue"):
        embedded.apply(docs(small_job(queue="nowhere")))
    command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": "c"},
               "action": "AbortJob", "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                                "name": "absent"}}
    with pytest.raises(ManifestError, match="target.name: Job default/absent not found"):
        embedded.apply(docs(command))
    with pytest.raises(ManifestError, match="unknown field"):
        embedded.apply(docs({**small_job(), "spec": {**small_job()["spec"], "minAvailabel": 1}}))


def test_runtime_reports_become_pod_status_and_job_phases(tmp_path: Path) -> None:
    embedded, scheduler = cluster(tmp_path)
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
    embedded.apply(docs(small_job(policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
                                  tasks=[{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 2}])))
    settle(embedded, scheduler)
    assert {p["status"]["phase"] for p in pods(embedded).values()} == {"Pending"}  # bound, not running yet
    report_running(embedded)
    settle(embedded, scheduler)
    assert job_status(embedded)["state"]["phase"] == "Running" and job_status(embedded)["running"] == 3
    master = pods(embedded)["train-master-0"]["status"]
    assert master["containerStatuses"][0]["ready"] and master["podIP"].startswith("10.213.")
    report_running(embedded, phase="Succeeded", only={"train-master-0"})
    settle(embedded, scheduler)
    assert job_status(embedded)["state"]["phase"] in ("Completing", "Completed")


def test_deleting_a_job_cascades_in_one_go_and_survives_a_restart(tmp_path: Path) -> None:
    embedded, scheduler = cluster(tmp_path / "a")
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
    embedded.apply(docs(small_job(plugins={"svc": []})))
    settle(embedded, scheduler)
    report_running(embedded)
    settle(embedded, scheduler)
    # a scheduler restart: the controllers' view read back from the store, the addresses kept
    before = {p.name: embedded.network.addresses.of(p.uid) for p in embedded.cache.pods.values()}
    embedded.store.close()
    again, scheduler2 = cluster(tmp_path / "a")
    again.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
    assert {p.name: again.network.addresses.of(p.uid) for p in again.cache.pods.values()} == before
    assert again.controllers.reconcile_once()[0] == 0  # nothing to redo
    assert again.delete("Job", "default/train") == "deleted"
    again.controllers.reconcile_once()
    # running pods are stopped by their node first; the rest of what the Job owned is gone at once
    assert all(p.terminating for p in again.cache.pods.values())
    assert not again.store.of_kind("Service") and not again.store.of_kind("PodGroup")
    actions = report_running(again, deleted_too=True)
    assert {a.kind for a in actions} == {PodActionKind.STOP}
    again.pod_actions("n0", View())  # the node no longer runs them: their records go
    again.controllers.reconcile_once()
    assert not again.store.of_kind("Pod") and not again.cache.pods
    assert again.controllers.host.list(JOB) == []


def test_a_failed_commit_leaves_nothing_and_is_redone(tmp_path: Path, monkeypatch) -> None:
    embedded, scheduler = cluster(tmp_path)
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=False)
    embedded.apply(docs(small_job()))

    def full(writes):
        from scheduler.modes.embedded.store import StoreFault
        raise StoreFault("disk full", full=True)
    monkeypatch.setattr(Store, "commit", lambda self, writes: full(writes))
    with pytest.raises(Exception, match="disk full"):
        embedded.controllers.reconcile_once()
    assert not embedded.store.of_kind("Pod") and not embedded.cache.pods and not embedded.store.of_kind("PodGroup")
    monkeypatch.undo()
    embedded.controllers.loop.memory.clear()
    embedded.controllers.loop.seen.clear()
    settle(embedded, scheduler)
    assert len(embedded.store.of_kind("Pod")) == 3


def test_an_eviction_by_the_scheduler_deletes_the_pod_and_restarts_the_job(tmp_path: Path) -> None:
    """The scheduler's eviction path (preempt/reclaim): EVICT to the node, the pod stopped, its record deleted
    (it has a controller), which the Job controller sees as PodEvicted; RestartJob makes the pods again."""
    embedded, scheduler = cluster(tmp_path)
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
    embedded.apply(docs(small_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}])))
    settle(embedded, scheduler)
    report_running(embedded)
    settle(embedded, scheduler)
    victim = next(p for p in embedded.cache.pods.values() if p.name == "train-worker-0")
    embedded.effects.evict(victim, "preempted by a higher priority pod")
    actions = report_running(embedded, deleted_too=True)
    assert [(a.kind, a.name) for a in actions if a.kind != PodActionKind.START] == [
        (PodActionKind.EVICT, "train-worker-0")]
    report_running(embedded)  # the node stopped it: it is no longer reported
    assert embedded.store.get("Pod", "default/train-worker-0") is None or \
        embedded.store.get("Pod", "default/train-worker-0").manifest["metadata"]["uid"] != victim.uid
    settle(embedded, scheduler)
    report_running(embedded)  # the node stops the others the restart deleted
    settle(embedded, scheduler)
    status = job_status(embedded)
    assert status["retryCount"] == 1 and status["version"] == 1
    assert sorted(pods(embedded)) == ["train-master-0", "train-worker-0", "train-worker-1"]
    assert {p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods(embedded).values()} == {"1"}, \
        {n: (p["metadata"]["annotations"]["volcano.sh/job-version"], p["metadata"].get("deletionTimestamp"))
         for n, p in pods(embedded).items()}


def test_an_exit_code_the_runtime_reports_drives_the_jobs_policy(tmp_path: Path) -> None:
    embedded, scheduler = cluster(tmp_path)
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
    embedded.apply(docs(small_job(policies=[{"exitCode": 3, "action": "AbortJob"}])))
    settle(embedded, scheduler)
    report_running(embedded)
    settle(embedded, scheduler)
    report_running(embedded, phase="Failed", exit_code=3, only={"train-worker-1"})
    settle(embedded, scheduler)
    assert job_status(embedded)["state"]["phase"] in ("Aborting", "Aborted")


def test_the_controllers_look_at_their_own_writes_once_the_scheduling_cycle_they_woke_ends(tmp_path: Path,
                                                                                            monkeypatch) -> None:
    """One core between them: the cycle binding the pods the controllers just made goes first; the controllers'
    look at those writes waits for its end (the flush's kick), and never longer than YIELD_S."""
    import threading
    import time

    from scheduler.modes.embedded import controllers as module

    monkeypatch.setattr(module, "YIELD_S", 1.0)
    embedded, _ = cluster(tmp_path)
    embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=False)
    done: list[tuple[float, int]] = []
    once = embedded.controllers.reconcile_once

    def counted():
        writes, wake = once()
        done.append((time.monotonic(), writes))
        return writes, wake
    embedded.controllers.reconcile_once = counted  # type: ignore[method-assign]

    def wait_for(n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(done) < n:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    stop = threading.Event()
    embedded.controllers.start(stop)
    try:
        assert wait_for(1, 5)
        embedded.cache.scheduling.set()  # as the scheduling loop marks a coming cycle
        embedded.apply(docs(small_job()))
        assert wait_for(2, 5) and done[-1][1] > 0  # the Job's PodGroup and pods, made at once
        time.sleep(0.3)
        assert len(done) == 2  # their look at what they wrote waits for the cycle
        embedded.cache.scheduling.clear()
        embedded.controllers.kick()  # the cycle's flush
        assert wait_for(3, 0.5)
        embedded.cache.scheduling.set()  # a cycle that never ends: waited for YIELD_S at most
        embedded.controllers.host.note("Job", "default/other", None)
        assert wait_for(4, 2)
        embedded.apply(docs(small_job("second")))
        assert wait_for(5, 2) and done[-1][1] > 0
        began = done[-1][0]
        assert wait_for(6, 3) and 0.9 <= done[-1][0] - began <= 2.0
    finally:
        stop.set()
        embedded.cache.scheduling.clear()
        embedded.controllers.join()
