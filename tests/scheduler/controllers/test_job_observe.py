"""From what changed to Volcano's events: the requests the controller derives from its memory of the last
reconcile, as Volcano's informer handlers (job_controller_handler.go addPod/updatePod/deletePod/updateJob/
updatePodGroup) would queue them."""

from __future__ import annotations

import copy

import pytest

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.observe import JobMemory, PodMemo, requests_since, scale_of, spec_json
from scheduler.controllers.jobs.pods import PodView
from scheduler.controllers.jobs.spec import parse_job

TEMPLATE = {"spec": {"containers": [{"name": "c"}]}}
DOC = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "uid": "job-uid"},
       "spec": {"tasks": [{"name": "w", "replicas": 2, "maxRetry": 2, "template": TEMPLATE}]},
       "status": {"state": {"phase": "Running"}}}
JOB = parse_job(DOC, "t")


def pod(name: str = "j-w-0", phase: str = "Running", uid: str | None = None, *, exit_code: int | None = None,
        restarts: int = 0, version: str | None = "0", out_of_sync: bool = False) -> PodView:
    notes = {keys.TASK_SPEC: "w"}
    if version is not None:
        notes[keys.JOB_VERSION] = version
    if out_of_sync:
        notes[keys.OUT_OF_SYNC] = "true"
    status: dict = {"phase": phase}
    if exit_code is not None or restarts:
        status["containerStatuses"] = [{"ready": True, "restartCount": restarts,
                                        "state": {"terminated": {"exitCode": exit_code or 0}}}]
    return PodView.of({"metadata": {"name": name, "uid": uid or f"uid-{name}", "annotations": notes},
                       "status": status})


def memory(*pods: PodView, killed: set[str] | None = None, pg: str | None = None, doc: dict = DOC) -> JobMemory:
    job = parse_job(doc, "t")
    return JobMemory(uid="job-uid", spec=spec_json(job), scale=scale_of(job), phase="Running",
                     pods={p.name: PodMemo.of(p) for p in pods}, killed=killed or set(), podgroup_phase=pg)


def events(mem: JobMemory | None, *now: PodView, pg: str | None = None, job=JOB) -> list[tuple[str, str, int]]:
    return [(r.event, r.pod, r.exit_code) for r in requests_since(job, mem, {p.name: p for p in now}, pg)]


def test_no_memory_is_an_informers_initial_list() -> None:
    assert events(None, pod("j-w-0"), pod("j-w-1", out_of_sync=True)) == [
        ("OutOfSync", "", 0), ("PodPending", "j-w-0", 0), ("OutOfSync", "j-w-1", 0)]


def test_nothing_changed_means_no_request() -> None:
    p = pod()
    assert events(memory(p), p) == []


@pytest.mark.parametrize(("before", "after", "wanted"), [
    (pod(phase="Pending"), pod(phase="Running"), ("PodRunning", "j-w-0", 0)),
    (pod(phase="Running"), pod(phase="Pending"), ("PodPending", "j-w-0", 0)),
    (pod(phase="Running"), pod(phase="Failed", exit_code=137), ("PodFailed", "j-w-0", 137)),
    (pod(phase="Running"), pod(phase="Succeeded"), ("OutOfSync", "j-w-0", 0)),  # the task is not complete yet
    (pod(phase="Running"), pod(phase="Running", restarts=2), ("TaskFailed", "j-w-0", 0)),  # maxRetry 2 reached
    (pod(phase="Running"), pod(phase="Running", restarts=1), ("OutOfSync", "j-w-0", 0)),
    (pod(phase="Pending"), pod(phase="Failed", out_of_sync=True), ("OutOfSync", "j-w-0", 0)),
], ids=["running", "pending-again", "failed-with-exit-code", "one-succeeded", "restarts-reach-maxRetry",
        "a-restart", "out-of-sync-wins"])
def test_a_pods_change(before: PodView, after: PodView, wanted: tuple) -> None:
    assert events(memory(before), after) == [wanted]


def test_the_last_succeeded_pod_completes_the_task() -> None:
    done = pod("j-w-0", phase="Succeeded")
    assert events(memory(done, pod("j-w-1")), done, pod("j-w-1", phase="Succeeded")) == [
        ("TaskCompleted", "j-w-1", 0)]


def test_a_vanished_pod_was_evicted_unless_we_killed_it() -> None:
    a, b = pod("j-w-0"), pod("j-w-1")
    assert events(memory(a, b), a) == [("PodEvicted", "j-w-1", 0)]
    assert events(memory(a, b, killed={b.uid}), a) == [("OutOfSync", "j-w-1", 0)]


def test_a_pod_made_again_under_its_name_is_a_delete_and_an_add() -> None:
    old, new = pod("j-w-0", uid="one"), pod("j-w-0", uid="two", phase="Pending")
    assert events(memory(old), new) == [("PodEvicted", "j-w-0", 0), ("PodPending", "j-w-0", 0)]


def test_a_pod_without_a_job_version_is_skipped() -> None:
    assert events(memory(), pod(version=None)) == []


def test_spec_changes() -> None:
    scaled = copy.deepcopy(DOC)
    scaled["spec"]["tasks"][0]["replicas"] = 3
    assert events(memory(), job=parse_job(scaled, "t")) == [("JobUpdated", "", 0)]
    other = copy.deepcopy(DOC)
    other["spec"]["priorityClassName"] = "high"
    assert events(memory(), job=parse_job(other, "t")) == [("OutOfSync", "", 0)]


def test_podgroup_phase_changes() -> None:
    assert events(memory(pg="Inqueue"), pg="Running") == [("", "", 0)]
    assert events(memory(pg="Running"), pg="Unknown") == [("Unknown", "", 0)]
    assert events(memory(pg=None), pg="Running") == []  # first seen: no update event
