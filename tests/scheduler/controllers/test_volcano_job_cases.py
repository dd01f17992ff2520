"""Volcano's Job controller test cases, as data (tests/fixtures/volcano-jobs/job_controller_test.yaml): the state
machine (job_state_test.go), the lifecycle policies (TestApplyPolicies) and the PodGroup's minResources
(TestTaskPriority_CalcPGMin, TestCalcPGMinResources)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.controller import Observed, run_action
from scheduler.controllers.jobs.policies import Request, apply_policies
from scheduler.controllers.jobs.quota import first_count_resources, group_min_resources, min_resources
from scheduler.controllers.jobs.spec import Job, JobSpec, Policy, Task, parse_job

FIXTURE = yaml.safe_load((Path(__file__).resolve().parents[2] / "fixtures" / "volcano-jobs" / "job_controller_test.yaml")
                         .read_text())
NOW = datetime(2025, 1, 1, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_the_fixture_names_its_source() -> None:
    assert FIXTURE["source"] == "volcano-sh/volcano pkg/controllers/job" and FIXTURE["commit"]
    names = [c["case"] for part in ("state", "policies", "min_resources") for c in FIXTURE[part]]
    assert len(names) == len(set(names))


def _pod(name: str, task: str, phase: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "test", "uid": f"uid-{name}",
                         "annotations": {keys.TASK_SPEC: task, keys.JOB_VERSION: "0"}},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": phase}}


@pytest.mark.parametrize("case", FIXTURE["state"], ids=lambda c: c["case"])
def test_state_machine_case(case: dict) -> None:
    spec = dict(case.get("spec") or {})
    spec["tasks"] = [dict(t, template=TEMPLATE) for t in spec.get("tasks", [])]
    counters = dict(case.get("status") or {})
    status = {"state": {"phase": case["phase"]}, **counters}
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": case.get("name", "job1"), "namespace": "test", "uid": "job-uid"},
           "spec": spec, "status": status}
    job = parse_job(doc, "case")
    pods = [_pod(**p) for p in case.get("pods") or ()]
    after, effects = run_action(job, Observed(job=doc, pods=pods), case["action"], NOW)
    assert after.phase == case["expect"]["phase"]
    if "retryCount" in case["expect"]:
        assert after.retry_count == case["expect"]["retryCount"]


def _job_for_policies(case: dict) -> Job:
    def policies(raw: list | None) -> tuple[Policy, ...]:
        return tuple(Policy(action=p["action"], events=(p["event"],) if p.get("event") else (),
                            exit_code=p.get("exitCode"), timeout=p.get("timeout")) for p in raw or ())
    task = Task(name="task1", replicas=6, min_available=6, template=TEMPLATE, policies=policies(case.get("task_policies")))
    spec = JobSpec(tasks=(task,), min_available=6, scheduler_name="volcano", policies=policies(case.get("policies")))
    return Job(namespace="test", name="job1", uid=case.get("uid", ""), spec=spec, doc={})


@pytest.mark.parametrize("case", FIXTURE["policies"], ids=lambda c: c["case"])
def test_apply_policies_case(case: dict) -> None:
    raw = case["request"]
    request = Request(event=raw.get("event", ""), action=raw.get("action", ""), task=raw.get("task", ""),
                      version=raw.get("version"), job_uid=raw.get("job_uid", ""))
    decision = apply_policies(_job_for_policies(case), request, version=0)
    assert decision.action == case["expect"]
    assert decision.delay == case.get("delay", 0)


def _tasks(case: dict) -> tuple[list[Task], dict[str, int]]:
    prios = case.get("priorities") or [0, 0]
    out = []
    for name, cpu, mine, prio in zip(("master", "worker"), ("50m", "100m"), case["mins"], prios, strict=True):
        template = {"spec": {"priorityClassName": f"p{prio}",
                             "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
        out.append(Task(name=name, replicas=2, min_available=2 if mine is None else mine, template=template))
    return out, {"p0": 0, "p2": 2}


@pytest.mark.parametrize("case", FIXTURE["min_resources"], ids=lambda c: c["case"])
def test_min_resources_case(case: dict) -> None:
    tasks, priorities = _tasks(case)
    job_min = case["jobMin"] or sum(t.min_available for t in tasks)
    if case["function"] == "group":
        got = group_min_resources(tasks, job_min, priorities)
    else:
        spec = JobSpec(tasks=tuple(tasks), min_available=job_min, scheduler_name="volcano")
        got = min_resources(Job(namespace="n", name="j", uid="u", spec=spec, doc={}), priorities)
    want = case["expect"]
    assert got == {"cpu": want["cpu"], "requests.cpu": want["cpu"], "pods": want["pods"], "count/pods": want["pods"]}


def test_first_count_takes_the_highest_priority_task_first() -> None:
    tasks, priorities = _tasks({"mins": [1, 1], "priorities": [0, 2]})
    assert first_count_resources(tasks, 3, priorities)["cpu"] == 2 * 100 + 50


@pytest.mark.parametrize("case", FIXTURE["actions"], ids=lambda c: c["case"])
def test_kill_and_sync_case(case: dict) -> None:
    from scheduler.controllers.kinds import CONFIGMAP, SECRET, SERVICE
    from scheduler.controllers.writes import Create, Delete

    raw = case["job"]
    tasks = [dict(t, template=TEMPLATE) for t in raw.get("tasks", [{"name": "task1", "replicas": 2}])]
    plugins = {name: [] for name in raw["plugins"]}
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": raw["name"], "namespace": "test", "uid": raw["uid"]},
           "spec": {"tasks": tasks, "plugins": plugins},
           "status": {"state": {"phase": raw["phase"]},
                      "controlledResources": {f"plugin-{p}": p for p in raw["plugins"]}}}
    kinds = {"Service": SERVICE, "Secret": SECRET, "ConfigMap": CONFIGMAP}
    objects = {(kinds[o["kind"]], o["name"]): {"apiVersion": "v1", "kind": o["kind"],
                                               "metadata": {"name": o["name"], "namespace": "test"}}
               for o in case.get("objects", [])}
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": case["podgroup"], "namespace": "test"}, "spec": {},
             "status": {"phase": case.get("podgroupPhase", "Running")}}
    pods = [_pod(**p) for p in case["pods"]]
    observed = Observed(job=doc, pods=pods, podgroup=group, objects=objects)
    job = parse_job(doc, "case")
    if case.get("sync"):
        status, effects = run_action(job, observed, keys.SYNC_JOB, NOW)
        made = [e.obj["metadata"]["name"] for e in effects if isinstance(e, Create) and e.obj["kind"] == "Pod"]
        assert len(made) + len(pods) == case["expect"]["pods"]
        return
    status, effects = run_action(job, observed, keys.RESTART_JOB, NOW)
    deleted = sorted(f"{e.kind.kind}/{e.name}" for e in effects if isinstance(e, Delete))
    assert deleted == case["expect"]["deleted"]
    assert status.controlled_resources == case["expect"]["controlledResources"]
    assert status.version == 1


def test_every_left_out_action_case_says_why() -> None:
    assert all(c["why"] for c in FIXTURE["actions_left_out"])
