"""allocate goes on past a task that does not place, as Volcano's allocateResourcesForTasks does (issue 14,
difference 5): past a queue refusal always, past a placement failure while the job could still become ready."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.actions.shared.jobs import could_become_ready
from scheduler.api.objects import TASK_SPEC_KEY
from scheduler.framework.config import parse_config
from scheduler.framework.snapshot import TaskStatus
from tests.support.action_runs import bound, run, with_
from tests.support.builders import node, pod, podgroup, queue
from tests.support.sessions import task

ALLOCATE = parse_config("""
actions: "allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}]
""")


def test_a_task_that_finds_no_node_is_passed_over_while_the_gang_can_still_run() -> None:
    # a-big sorts first and fits nowhere; minMember 2 of 3 can still be met by the two small ones
    objs = [node("n1", cpu=4), podgroup("job", minMember=2),
            pod("a-big", group="job", cpu="8"), pod("b-small", group="job", cpu="1"), pod("c-small", group="job", cpu="1")]
    ssn = run(objs, ALLOCATE)
    assert bound(ssn) == {"b-small": "n1", "c-small": "n1"}
    assert "Insufficient cpu" in (task(ssn, "default/a-big").fit_error or "")


def test_when_every_member_must_run_one_that_finds_no_node_ends_the_job() -> None:
    # Volcano's NeedContinueAllocating: minAvailable == number of tasks means stop at the first failure
    objs = [node("n1", cpu=4), podgroup("job", minMember=3),
            pod("a-big", group="job", cpu="8"), pod("b-small", group="job", cpu="1"), pod("c-small", group="job", cpu="1")]
    ssn = run(objs, ALLOCATE)
    assert bound(ssn) == {}
    assert task(ssn, "default/b-small").fit_error is None  # never tried
    assert ssn.jobs["default/job"].fit_count == 0


def test_a_task_its_queue_refuses_is_passed_over() -> None:
    # the queue's capability refuses a-big (4 CPUs of 3); b-small still fits the queue and the node
    objs = [node("n1", cpu=8), queue("q", capability={"cpu": "3"}), podgroup("job", queue="q", minMember=1),
            pod("a-big", group="job", cpu="4"), pod("b-small", group="job", cpu="1")]
    ssn = run(objs, ALLOCATE)
    assert bound(ssn) == {"b-small": "n1"}
    assert "capability" in (task(ssn, "default/a-big").fit_error or "")


def test_a_ready_job_takes_turns_and_keeps_its_place_in_its_tasks() -> None:
    objs = [node("n1", cpu=4), podgroup("job", minMember=1),
            *[pod(f"t{i}", group="job", cpu="1") for i in range(6)]]
    ssn = run(objs, ALLOCATE)
    assert sorted(bound(ssn)) == ["t0", "t1", "t2", "t3"]
    assert all("Insufficient cpu" in (task(ssn, f"default/t{i}").fit_error or "") for i in (4, 5))


def test_a_role_that_found_no_node_is_not_searched_again() -> None:
    """Volcano's TaskHasFitErrors: once a task of a role fails, its job's other tasks of that role are skipped."""
    ps = {TASK_SPEC_KEY: "ps"}
    objs = [node("n1", cpu=4), podgroup("job", minMember=1),
            with_(pod("ps-0", group="job", cpu="8"), annotations=ps),
            with_(pod("ps-1", group="job", cpu="8"), annotations=ps),
            with_(pod("worker-0", group="job", cpu="1"), labels={TASK_SPEC_KEY: "worker"})]
    ssn = run(objs, ALLOCATE)
    assert bound(ssn) == {"worker-0": "n1"}
    assert task(ssn, "default/ps-1").fit_error == task(ssn, "default/ps-0").fit_error


# -- could_become_ready, on stand-in jobs: only what it reads -----------------------------------------------
@dataclass
class FakePod:
    annotations: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)

    @property
    def task_role(self) -> str:
        return self.annotations.get(TASK_SPEC_KEY) or self.labels.get(TASK_SPEC_KEY) or ""


@dataclass
class FakeTask:
    status: TaskStatus
    pod: FakePod
    best_effort: bool = False


@dataclass
class FakeJob:
    min_member: int
    tasks: dict
    min_task_member: dict = field(default_factory=dict)

    @property
    def group(self) -> FakeJob:  # the PodGroup's spec.minTaskMember, as could_become_ready reads it
        return self

    @property
    def ready_num(self) -> int:
        return sum(1 for t in self.tasks.values() if t.status in (TaskStatus.ALLOCATED, TaskStatus.RUNNING))

    def pending_tasks(self) -> list:
        return [t for t in self.tasks.values() if t.status == TaskStatus.PENDING]


def job(min_member: int, roles: list[tuple[str, TaskStatus]], minimums: dict | None = None) -> FakeJob:
    tasks = {str(i): FakeTask(status, FakePod(annotations={TASK_SPEC_KEY: role} if role else {}))
             for i, (role, status) in enumerate(roles)}
    return FakeJob(min_member, tasks, minimums or {})


P, A = TaskStatus.PENDING, TaskStatus.ALLOCATED


@pytest.mark.parametrize("j,failed,expected", [
    (job(3, [("", P)] * 3), {""}, False),                         # every member must run
    (job(2, [("", P)] * 3), {""}, True),                          # no roles: go on
    (job(3, [("ps", A), ("ps", P), ("w", P), ("w", P)], {"ps": 1, "w": 2}), {"ps"}, True),   # ps has its one
    (job(3, [("ps", P), ("ps", P), ("w", P), ("w", P)], {"ps": 1, "w": 2}), {"ps"}, False),  # ps below its own min
    # minMember below the roles' sum: only the total counts, failed roles' pending tasks excluded
    (job(2, [("ps", P), ("w", P), ("w", P), ("x", P)], {"ps": 1, "w": 2}), {"ps"}, True),
    (job(3, [("ps", P), ("w", P), ("w", P), ("x", P)], {"ps": 2, "w": 2}), {"ps", "w"}, False),
], ids=["all must run", "no roles", "role at its min", "role below its min", "total still reachable",
        "total out of reach"])
def test_could_become_ready(j: FakeJob, failed: set[str], expected: bool) -> None:
    assert could_become_ready(j, failed) is expected  # type: ignore[arg-type]
