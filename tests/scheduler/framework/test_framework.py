"""Framework pieces: statements undo exactly, phases follow their table, the scheduler reloads its config."""

from __future__ import annotations

from datetime import UTC

import numpy as np
import pytest

from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import parse_config
from scheduler.framework.snapshot import TaskStatus
from scheduler.framework.statement import Statement
from scheduler.framework.status import InvalidTransition, check_transition, next_phase
from tests.support.builders import node, pod, podgroup, queue
from tests.support.sessions import AT, open_session, task


def world():
    return [node("n1", cpu=4, memory="8Gi"), node("n2", cpu=4, memory="8Gi"), queue("q"),
            podgroup("g", minMember=2, queue="q"), pod("g-0", group="g", cpu="1"), pod("g-1", group="g", cpu="1"),
            pod("old", queue="q", cpu="2", nodeName="n2")]


def state(ssn):
    nodes = ssn.nodes
    return (nodes.idle.copy(), nodes.used.copy(), nodes.releasing.copy(), nodes.pipelined.copy(),
            {uid: list(job.counts) for uid, job in ssn.jobs.items()},
            {uid: job.allocated.copy() for uid, job in ssn.jobs.items()},
            ssn.plugins["proportion"].attrs["q"].allocated.copy(), ssn.plugins["drf"].shares.copy())


def same(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            if not np.array_equal(x, y):
                return False
        elif isinstance(x, dict):
            if x.keys() != y.keys() or any(not np.array_equal(np.asarray(x[k]), np.asarray(y[k])) for k in x):
                return False
        elif x != y:
            return False
    return True


def test_discard_restores_everything() -> None:
    ssn = open_session(world())
    before = state(ssn)
    stmt = Statement(ssn)
    stmt.allocate(task(ssn, "default/g-0"), 0)
    stmt.pipeline(task(ssn, "default/g-1"), 1)
    stmt.evict(task(ssn, "default/old"), "test")
    assert ssn.jobs["default/g"].counts[TaskStatus.ALLOCATED] == 1
    assert ssn.nodes.releasing[0, 1] == 2000
    assert not same(before, state(ssn))
    stmt.discard()
    assert same(before, state(ssn))
    assert task(ssn, "default/g-0").node == -1 and task(ssn, "default/old").status == TaskStatus.RUNNING


def test_rollback_to_a_mark_keeps_earlier_operations() -> None:
    ssn = open_session(world())
    stmt = Statement(ssn)
    stmt.allocate(task(ssn, "default/g-0"), 0)
    mark = stmt.mark()
    stmt.evict(task(ssn, "default/old"), "test")
    stmt.rollback(mark)
    assert task(ssn, "default/g-0").status == TaskStatus.ALLOCATED
    assert task(ssn, "default/old").status == TaskStatus.RUNNING and stmt.evictions == 0


def test_commit_binds_and_evicts_through_the_effects() -> None:
    ssn = open_session(world())
    stmt = Statement(ssn)
    stmt.allocate(task(ssn, "default/g-0"), 0)
    stmt.evict(task(ssn, "default/old"), "for a test")
    stmt.commit()
    cache = ssn.effects.cache
    assert cache.pods["default/g-0"].node_name == "n1"
    assert cache.pods["default/old"].evicted and cache.pods["default/old"].reason == "Evicted: for a test"
    assert ssn.binds == 1 and len(ssn.evictions) == 1


@pytest.mark.parametrize("old,new,ok", [
    ("Pending", "Inqueue", True), ("Inqueue", "Running", True), ("Running", "Unknown", True),
    ("Unknown", "Running", True), ("Running", "Completed", True), ("Completed", "Running", False),
    ("Completed", "Pending", False), ("Inqueue", "Unknown", True), ("Unknown", "Inqueue", False),
])
def test_phase_table(old: str, new: str, ok: bool) -> None:
    if ok:
        assert check_transition(old, new) == new
    else:
        with pytest.raises(InvalidTransition):
            check_transition(old, new)


@pytest.mark.parametrize("statuses,min_member,phase,ready,expected", [
    ([TaskStatus.RUNNING, TaskStatus.RUNNING], 2, "Inqueue", True, "Running"),
    ([TaskStatus.ALLOCATED, TaskStatus.PENDING], 2, "Inqueue", False, "Inqueue"),
    ([TaskStatus.PENDING], 1, "Pending", False, "Pending"),
    ([TaskStatus.RUNNING, TaskStatus.PENDING], 2, "Running", False, "Unknown"),
    ([TaskStatus.SUCCEEDED, TaskStatus.SUCCEEDED], 2, "Running", True, "Completed"),
    ([TaskStatus.SUCCEEDED, TaskStatus.RUNNING], 2, "Running", True, "Running"),
    # Volcano session.go getPodGroupPhase: running members and a gang that is not whole is Unknown,
    # also when the missing members are gone rather than pending (issue 14 item 9)
    ([TaskStatus.RUNNING, TaskStatus.RUNNING], 3, "Running", False, "Unknown"),
    ([TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.FAILED], 3, "Inqueue", False, "Unknown"),
    # ... but not while they are only terminating on their nodes
    ([TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.RELEASING], 3, "Running", False, "Running"),
    ([TaskStatus.SUCCEEDED, TaskStatus.FAILED], 2, "Running", True, "Completed"),
], ids=["all placed", "half placed", "not admitted", "broken gang", "all succeeded", "some succeeded",
        "gang lost a member", "gang member failed", "member terminating", "all finished"])
def test_next_phase(statuses, min_member, phase, ready, expected) -> None:
    ssn = open_session([node("n1"), podgroup("g", minMember=min_member)] +
                       [pod(f"g-{i}", group="g") for i in range(len(statuses))])
    job = ssn.jobs["default/g"]
    for t, status in zip(sorted(job.tasks.values(), key=lambda t: t.pod.name), statuses, strict=True):
        job.set_status(t, status)
    job.phase = phase
    assert next_phase(job, ready) == expected


def test_queue_allocation_includes_children() -> None:
    cache = ClusterCache()
    for doc in [node("n1", cpu=8), queue("parent"), queue("child", parent="parent"),
                pod("a", queue="child", cpu="2", nodeName="n1"), pod("b", queue="parent", cpu="1", nodeName="n1")]:
        cache.upsert(parse_object(doc, "test"))
    Scheduler(cache, clock=lambda: AT).run_once()
    assert cache.queues["child"].allocated["cpu"] == 2000
    assert cache.queues["parent"].allocated["cpu"] == 3000


GOOD = 'actions: "enqueue, allocate"\ntiers:\n- plugins: [{name: gang}, {name: predicates}, {name: proportion}]\n'
OTHER = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins: [{name: gang}, {name: predicates}]\n'


def test_scheduler_reloads_config_and_keeps_the_last_good_one(tmp_path) -> None:
    path = tmp_path / "scheduler.conf"
    path.write_text(GOOD)
    cache = ClusterCache()
    for doc in [node("n1", cpu=4), pod("be", cpu=None, memory=None)]:
        cache.upsert(parse_object(doc, "test"))
    sched = Scheduler(cache, config_path=path, clock=lambda: AT)
    sched.run_once()
    assert cache.pods["default/be"].node_name == ""  # no backfill in force yet
    path.write_text("actions: [enqueue\n")  # a broken edit
    sched.run_once()
    assert sched.config.actions == ("enqueue", "allocate")
    assert "invalid YAML" in sched.watcher.last_error
    path.write_text(OTHER.replace("predicates", "no-such-plugin"))
    sched.run_once()
    assert sched.config.actions == ("enqueue", "allocate") and "unknown plugin" in sched.watcher.last_error
    refused = sched.metrics.registry.get_sample_value("scoria_scheduler_config_reloads_total", {"result": "refused"})
    assert refused == 2
    assert cache.pods["default/be"].node_name == ""
    path.write_text(OTHER)
    sched.run_once()
    assert sched.config.actions == ("enqueue", "allocate", "backfill") and sched.watcher.last_error is None
    assert cache.pods["default/be"].node_name == "n1"  # the new config took effect in that very cycle


def test_invalid_config_at_start_is_an_error(tmp_path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text("actions: allocate\ntiers: []\n")
    with pytest.raises(ValueError, match="tiers"):
        Scheduler(ClusterCache(), config_path=path)


def test_pipeline_nominates_and_the_next_cycle_places_there() -> None:
    config = parse_config('actions: "enqueue, allocate, preempt"\ntiers:\n'
                          '- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n'
                          '- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]\n')
    cache = ClusterCache()
    for doc in [node("n1", cpu=2), node("n2", cpu=2),
                {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                 "value": 100},
                pod("low-1", cpu="2", nodeName="n1"), pod("low-2", cpu="2", nodeName="n2"),
                pod("vip", cpu="2", priorityClassName="high")]:
        cache.upsert(parse_object(doc, "test"))
    sched = Scheduler(cache, config=config, clock=lambda: AT)
    first = sched.run_once()
    vip = cache.pods["default/vip"]
    assert first.evictions == 1 and vip.nominated_node in ("n1", "n2") and not vip.node_name
    target = vip.nominated_node
    sched.run_once()
    assert vip.node_name == target and vip.nominated_node == ""


def test_shipped_config_is_the_built_in_default() -> None:
    from pathlib import Path

    from scheduler.framework.config import default_config, load_config
    shipped = load_config(Path(__file__).resolve().parents[3] / "daemonset" / "config" / "scheduler.conf")
    default = default_config()
    assert shipped.actions == default.actions
    assert [[(p.name, p.flags, p.raw_args) for p in t] for t in shipped.tiers] == \
        [[(p.name, p.flags, p.raw_args) for p in t] for t in default.tiers]


def test_a_cycle_leaves_no_cyclic_garbage() -> None:
    """Sessions break their reference cycles: a cycle's tasks and jobs are freed without the cycle collector."""
    import gc
    from datetime import datetime

    from scheduler.api.manifests import parse_object
    from scheduler.cluster.cache import ClusterCache
    from scheduler.cycle import Scheduler
    from tests.support.builders import node, pods

    cache = ClusterCache()
    for i in range(5):
        cache.upsert(parse_object(node(f"n{i}"), "test"))
    for doc in pods("p", 60, cpu="100m"):
        cache.upsert(parse_object(doc, "test"))
    sched = Scheduler(cache, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    sched.run_once()
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            sched.run_once()
        leftover = gc.collect()
    finally:
        gc.enable()
    assert leftover < 50, f"{leftover} objects were left for the cycle collector"
