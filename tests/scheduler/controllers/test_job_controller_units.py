"""Units of the Job controller: the state tables, conditions, the pods and PodGroup it builds, quota usage,
durations, the status's JSON form, and dependsOn readiness (TestIsDependsOnPodsReady's cases)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.controllers.jobs import keys, state
from scheduler.controllers.jobs.controller import Observed, run_action
from scheduler.controllers.jobs.jobstatus import JobStatus
from scheduler.controllers.jobs.podgroup import desired_podgroup, podgroup_update
from scheduler.controllers.jobs.pods import PodView, new_pod
from scheduler.controllers.jobs.quota import format_resources, pod_usage
from scheduler.controllers.jobs.spec import JobSpec, format_duration, parse_duration, parse_job
from scheduler.controllers.kinds import copy_tree
from scheduler.controllers.writes import Create

NOW = datetime(2025, 1, 1, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def job_doc(tasks: list[dict], **spec) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "job1", "namespace": "test", "uid": "u1",
                         "annotations": {keys.PREEMPTABLE: "true", "other": "x"}, "labels": {keys.COOLDOWN_TIME: "5m"}},
            "spec": {"tasks": [{"template": TEMPLATE, **t} for t in tasks], **spec}}


# -- the tables -------------------------------------------------------------------------------------------------
def test_every_phase_has_steps_and_every_step_moves_only_where_the_transitions_allow() -> None:
    assert set(state.STEPS) == set(keys.PHASES)
    spec = JobSpec(tasks=(), min_available=0, scheduler_name="s", max_retry=3)
    for phase, table in state.STEPS.items():
        assert "*" in table
        for step in table.values():
            if step.update is None:
                continue
            for counts in ({}, {"terminating": 1}, {"running": 2, "succeeded": 1}, {"pending": 5}):
                status = JobStatus(phase=phase, retry_count=3, **counts)
                step.update(status, spec)
                assert state.allowed(phase, status.phase), (phase, step.update.__name__, status.phase)


def test_an_unknown_phase_is_treated_as_pending_and_refused_moves_are_undone(caplog) -> None:
    assert state.step("Weird", keys.RESTART_JOB) == state.STEPS[keys.PENDING][keys.RESTART_JOB]
    assert not state.allowed(keys.COMPLETED, keys.RUNNING) and state.allowed(keys.RUNNING, keys.RUNNING)


def test_conditions_keep_one_entry_per_phase_the_latest_last() -> None:
    status = JobStatus()
    for phase, at in (("Pending", "t1"), ("Running", "t2"), ("Pending", "t3")):
        status.append_condition(phase, at)
    assert status.conditions == [{"status": "Running", "lastTransitionTime": "t2"},
                                 {"status": "Pending", "lastTransitionTime": "t3"}]


def test_status_json_round_trips_and_leaves_out_zeros() -> None:
    status = JobStatus(phase="Running", last_transition="2025-01-01T00:00:00Z", min_available=3, running=3,
                       version=2, task_status_count={"w": {"Running": 3, "Pending": 0}},
                       controlled_resources={"plugin-svc": "svc"}, running_duration="1m0s")
    raw = status.to_dict()
    assert "pending" not in raw and raw["taskStatusCount"] == {"w": {"phase": {"Running": 3}}}
    again = JobStatus.from_dict(raw)
    assert again.to_dict() == raw


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3),
                                               ("0", 0), ("2m0s", 120), ("1.h", 3600), (".5h", 1800)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5x", "m", ".h"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_durations_print_as_go_does() -> None:
    assert [format_duration(s) for s in (0, 5, 60, 3725)] == ["0s", "5s", "1m0s", "1h2m5s"]


# -- what gets built ----------------------------------------------------------------------------------------------
def test_a_new_pod_from_its_template(tmp_path) -> None:
    doc = job_doc([{"name": "w", "replicas": 3, "topologyPolicy": "single-numa-node",
                    "template": {"metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c"}]}}}],
                  volumes=[{"mountPath": "/data", "volumeClaimName": "shared"}])
    job = parse_job(doc, "t")
    pod = new_pod(job, job.spec.tasks[0], 2, version=4, retry_count=1)
    notes, labels = pod["metadata"]["annotations"], pod["metadata"]["labels"]
    assert pod["metadata"]["name"] == "job1-w-2" and notes["a"] == "b" and labels["app"] == "x"
    assert notes[keys.JOB_VERSION] == "4" and notes[keys.JOB_RETRY_COUNT] == "1"
    assert notes[keys.NUMA_POLICY] == "single-numa-node" and notes[keys.PREEMPTABLE] == "true" and "other" not in notes
    assert labels[keys.COOLDOWN_TIME] == "5m"
    (volume,) = pod["spec"]["volumes"]
    assert volume["persistentVolumeClaim"] == {"claimName": "shared"}
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"mountPath": "/data", "name": volume["name"]}]
    assert job.spec.tasks[0].template["spec"]["containers"] == [{"name": "c"}]  # the template is not changed


def test_partition_ids_label_the_pods() -> None:
    job = parse_job(job_doc([{"name": "w", "replicas": 4, "partitionPolicy": {"totalPartitions": 2,
                                                                             "partitionSize": 2}}]), "t")
    ids = [new_pod(job, job.spec.tasks[0], i, version=0, retry_count=0)["metadata"]["labels"][keys.PARTITION_ID]
           for i in range(4)]
    assert ids == ["0", "0", "1", "1"]
    group = desired_podgroup(job, {})
    assert group["spec"]["subGroupPolicy"][0]["matchLabelKeys"] == [keys.PARTITION_ID]


def test_podgroup_updates_only_what_the_job_governs() -> None:
    job = parse_job(job_doc([{"name": "w", "replicas": 2}]), "t")
    group = desired_podgroup(job, {})
    group["status"] = {"phase": "Running"}
    assert podgroup_update(group, job, {}) is None
    scaled = parse_job(job_doc([{"name": "w", "replicas": 3, "minAvailable": 3}], minAvailable=3), "t")
    updated = podgroup_update(group, scaled, {})
    assert updated["spec"]["minMember"] == 3 and updated["spec"]["minTaskMember"] == {"w": 3}
    assert updated["spec"]["minResources"]["cpu"] == "3" and updated["status"] == {"phase": "Running"}


@pytest.mark.parametrize("field, stale", [
    ("priorityClassName", "other"), ("minMember", 1), ("minResources", {"cpu": "1"}), ("minTaskMember", {"w": 1}),
    ("minTaskMember", None), ("subGroupPolicy", [{"name": "w"}])])
def test_podgroup_update_notices_each_field_the_job_governs(field: str, stale: object) -> None:
    job = parse_job(job_doc([{"name": "w", "replicas": 2}]), "t")
    group = desired_podgroup(job, {})
    if stale is None:
        del group["spec"][field]
    else:
        group["spec"][field] = stale
    updated = podgroup_update(group, job, {})
    assert updated is not None and podgroup_update(updated, job, {}) is None
    assert group["spec"].get(field) == stale  # the one read is left as it was


def test_copy_tree_copies_manifests_apart() -> None:
    shared = {"a": [1, {"b": "c"}]}
    doc = {"x": shared, "y": shared, "t": (1, 2), "when": NOW}
    copied = copy_tree(doc)
    assert copied == {"x": shared, "y": shared, "t": [1, 2], "when": NOW}
    copied["x"]["a"][1]["b"] = "changed"
    assert shared["a"][1]["b"] == "c" and copied["y"]["a"][1]["b"] == "c"


def test_pod_usage_in_quota_names() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1},
                                                       "limits": {"cpu": "1"}}},
                           {"name": "b", "resources": {"limits": {"memory": "1Gi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "100m"}}
    usage = pod_usage(spec)
    assert usage == {"count/pods": 1, "pods": 1, "cpu": 2100, "requests.cpu": 2100, "limits.cpu": 1100,
                     "memory": 2 * 2**30, "requests.memory": 2 * 2**30, "limits.memory": 2**30,
                     "requests.nvidia.com/gpu": 1, "nvidia.com/gpu": 1}
    assert format_resources({"cpu": 1500, "memory": 2**30, "pods": 2}) == {"cpu": "1500m", "memory": "1Gi",
                                                                          "pods": "2"}


# -- dependsOn readiness (job_controller_actions_test.go TestIsDependsOnPodsReady) ---------------------------------
def _pod(name: str, phase: str, ready: bool | None = None) -> dict:
    status: dict = {"phase": phase}
    if ready is not None:
        status["containerStatuses"] = [{"ready": ready}]
    return {"metadata": {"name": name, "uid": name, "annotations": {keys.TASK_SPEC: name.split("-")[1],
                                                                    keys.JOB_VERSION: "0"}}, "status": status}


@pytest.mark.parametrize(("replicas", "pods", "ready"), [
    (2, [_pod("job1-task1-0", "Succeeded"), _pod("job1-task1-1", "Succeeded")], True),
    (1, [_pod("job1-task1-0", "Running", ready=True)], True),
    (1, [_pod("job1-task1-0", "Running", ready=False)], False),
    (1, [], False),
], ids=["DependsOn task has all pods succeeded", "DependsOn task has pods running and ready",
        "DependsOn task has pods running but not ready", "no pod yet (Scoria)"])
def test_depends_on_readiness(replicas: int, pods: list[dict], ready: bool) -> None:
    doc = job_doc([{"name": "task1", "replicas": replicas, "minAvailable": replicas},
                   {"name": "task2", "replicas": 1, "dependsOn": {"name": ["task1"]}}])
    doc["status"] = {"state": {"phase": "Running"}}
    group = {"metadata": {"name": "job1-u1"}, "status": {"phase": "Running"}}
    job = parse_job(doc, "t")
    _, effects = run_action(job, Observed(job=doc, pods=pods, podgroup=group), keys.SYNC_JOB, NOW)
    made = {e.obj["metadata"]["name"] for e in effects if isinstance(e, Create) and e.obj["kind"] == "Pod"}
    assert ("job1-task2-0" in made) == ready


def test_pod_view_reads_exit_codes_restarts_and_readiness() -> None:
    view = PodView.of({"metadata": {"name": "p", "uid": "u", "deletionTimestamp": "x",
                                    "annotations": {keys.JOB_VERSION: "3", keys.OUT_OF_SYNC: "true"}},
                       "status": {"phase": "Failed", "initContainerStatuses": [{"restartCount": 1}],
                                  "containerStatuses": [{"restartCount": 2, "ready": False,
                                                         "state": {"terminated": {"exitCode": 7}}}]}})
    assert (view.version, view.exit_code, view.restarts, view.ready, view.terminating, view.out_of_sync,
            view.task) == (3, 7, 3, False, True, True, "default")
