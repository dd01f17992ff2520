"""Who may be a victim and who may evict: the pod's own statements and Volcano's preempt/reclaim rules
(issue 14, differences 2, 4 and 7), with cases ported from Volcano's action tests."""

from __future__ import annotations

import pytest

from scheduler.framework.config import parse_config
from tests.support.action_runs import evicted, one_tier, pipelined, run, with_
from tests.support.builders import node, pod, podgroup, priority_class, queue

PREEMPTABLE = "volcano.sh/preemptable"
CLASSES = [priority_class("low-priority", 10), priority_class("high-priority", 100000)]


def low(name: str, group: str = "pg1", cpu: str = "1", preemptable: str | None = None, **kw) -> dict:
    doc = pod(name, group=group, cpu=cpu, memory="1G", nodeName="n1", priorityClassName="low-priority", **kw)
    return with_(doc, annotations={PREEMPTABLE: preemptable}) if preemptable else doc


def high(name: str, group: str = "pg2", cpu: str = "1", **spec) -> dict:
    return with_(pod(name, group=group, cpu=cpu, memory="1G", priorityClassName="high-priority"), **spec)


def test_preempt_enough_tasks_to_fit_a_large_task_but_not_a_pod_that_is_not_preemptable() -> None:
    """preempt_test.go TestPreempt, "preempt enough tasks to fit large task of different job"."""
    objs = [*CLASSES, node("n1", cpu=6, memory="6G"), queue("q1"),
            podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Inqueue"),
            podgroup("pg2", queue="q1", priorityClassName="high-priority", phase="Inqueue"),
            low("preemptee1", preemptable="true"), low("preemptee2", preemptable="true"),
            low("preemptee3", preemptable="false"), high("preemptor1", cpu="5")]
    ssn = run(objs, one_tier("preempt"))
    assert evicted(ssn) == {"preemptee1", "preemptee2"}
    assert pipelined(ssn) == {"preemptor1": "n1"}


@pytest.mark.parametrize("where", ["annotation", "label"])
def test_a_pod_that_says_it_is_not_preemptable_is_never_a_victim(where: str) -> None:
    """preempt_test.go TestPreempt, "preempt low priority job in same queue but not pod with preemptable=false or
    higher priority" (volcano-sh/volcano#2232), the label form as GetPodPreemptable reads it too."""
    mark = {"annotations" if where == "annotation" else "labels": {PREEMPTABLE: "false"}}
    objs = [*CLASSES, node("n1", cpu=2, memory="12G"), queue("q1"),
            podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Inqueue"),
            podgroup("pg2", queue="q1", priorityClassName="high-priority", phase="Inqueue"),
            with_(low("preemptee1"), **mark), low("preemptee2", preemptable="true"), high("preemptor1"),
            high("preemptor2")]
    ssn = run(objs, one_tier("preempt"))
    assert evicted(ssn) == {"preemptee2"}


def test_reclaim_takes_only_the_preemptable_pod() -> None:
    """reclaim_test.go TestReclaim, "Two Queue with one Queue overusing resource, should reclaim"."""
    objs = [*CLASSES, node("n1", cpu=3, memory="3Gi"), queue("q1"), queue("q2"),
            podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Inqueue"),
            podgroup("pg2", queue="q2", priorityClassName="high-priority", phase="Inqueue"),
            low("preemptee1", preemptable="false"), low("preemptee2", preemptable="true"),
            low("preemptee3", preemptable="false"), high("preemptor1")]
    ssn = run(objs, one_tier("reclaim"))
    assert evicted(ssn) == {"preemptee2"}


NEVER = {"preemptionPolicy": "Never"}


def test_a_preemptor_with_preemption_policy_never_evicts_nobody() -> None:
    """preempt_test.go TestPreempt, "can not preempt resources when task preemption policy is never" (#3642)."""
    def world(**spec) -> list[dict]:
        return [*CLASSES, node("n1", cpu=1, memory="1Gi", pods=1), queue("q1"),
                podgroup("pg1", queue="q1", minMember=0, priorityClassName="low-priority", phase="Inqueue"),
                podgroup("pg2", queue="q1", priorityClassName="high-priority", phase="Inqueue"),
                low("preemptee1", preemptable="true"), high("preemptor1", **spec)]

    assert evicted(run(world(**NEVER), one_tier("preempt"))) == set()
    assert evicted(run(world(), one_tier("preempt"))) == {"preemptee1"}
    assert evicted(run(world(preemptionPolicy="PreemptLowerPriority"), one_tier("preempt"))) == {"preemptee1"}


def test_reclaim_goes_on_to_a_task_that_may_preempt() -> None:
    """reclaim_test.go TestReclaim, "Reclaim succeeds for second task when first task has PreemptionPolicy=Never"
    (Volcano's test asks gang no pipelined vote: enableJobPipelined is unset there)."""
    config = parse_config("""
actions: "reclaim"
tiers:
- plugins: [{name: conformance}, {name: gang, enableJobPipelined: false}, {name: proportion}, {name: priority}]
""")
    objs = [priority_class("low-priority", 100), priority_class("high-priority-no-preempt", 1000),
            node("n1", cpu=2, memory="2G"), queue("q1"), queue("q2"),
            podgroup("pg-victim", queue="q1", priorityClassName="low-priority", phase="Running"),
            podgroup("pg-preemptor", queue="q2", minMember=2, priorityClassName="high-priority-no-preempt",
                     phase="Inqueue"),
            low("victim-pod-no", group="pg-victim", preemptable="false"),
            low("victim-pod", group="pg-victim", preemptable="true"),
            with_(pod("preemptor-task1-non-preemptable", group="pg-preemptor", memory="1G",
                      priorityClassName="high-priority-no-preempt"), **NEVER),
            pod("preemptor-task2-preemptable", group="pg-preemptor", memory="1G",
                priorityClassName="high-priority-no-preempt")]
    ssn = run(objs, config)
    assert evicted(ssn) == {"victim-pod"}
    assert pipelined(ssn) == {"preemptor-task2-preemptable": "n1"}


def test_a_never_pod_is_still_allocated_where_there_is_room() -> None:
    objs = [*CLASSES, node("n1", cpu=2, memory="2G"), queue("q1"),
            podgroup("pg2", queue="q1", priorityClassName="high-priority"), high("quiet", **NEVER)]
    ssn = run(objs, one_tier("allocate, preempt"))
    assert ssn.bound and evicted(ssn) == set()


def test_preempt_stops_once_the_job_no_longer_starves() -> None:
    """Volcano's preempt loop asks JobStarving before each task: a job of minMember 1 whose first task is
    pipelined evicts for no other task."""
    objs = [*CLASSES, node("n1", cpu=3, memory="3G"), queue("q1"),
            podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Running"),
            *[low(f"low-{i}") for i in range(3)],
            podgroup("pg2", queue="q1", priorityClassName="high-priority", phase="Inqueue"),
            high("want-0"), high("want-1")]
    ssn = run(objs, one_tier("preempt"))
    assert len(evicted(ssn)) == 1
    assert list(pipelined(ssn)) == ["want-0"]


def test_reclaim_stops_once_the_job_no_longer_starves() -> None:
    objs = [*CLASSES, node("n1", cpu=3, memory="3G"), queue("q1"), queue("q2"),
            podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Running"),
            *[low(f"low-{i}") for i in range(3)],
            podgroup("pg2", queue="q2", priorityClassName="high-priority", phase="Inqueue"),
            high("want-0"), high("want-1")]
    ssn = run(objs, one_tier("reclaim"))
    assert len(evicted(ssn)) == 1


def test_a_task_that_finds_no_room_does_not_stop_the_jobs_next_task() -> None:
    """Volcano's preempt pops the job's next task after one that could not preempt."""
    objs = [*CLASSES, node("n1", cpu=2, memory="4G"), queue("q1"),
            podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Running"),
            low("low-0"), low("low-1"),
            podgroup("pg2", queue="q1", minMember=2, priorityClassName="high-priority", phase="Inqueue"),
            high("a-huge", cpu="16"), high("b-small"), high("c-small")]
    ssn = run(objs, one_tier("preempt"))
    assert evicted(ssn) == {"low-0", "low-1"}
    assert sorted(pipelined(ssn)) == ["b-small", "c-small"]


# -- topology-aware preemption ------------------------------------------------------------------------
TOPOLOGY = """
configurations:
- name: preempt
  arguments: {enableTopologyAwarePreemption: true, minCandidateNodesPercentage: 100}
"""


def two_nodes() -> list[dict]:
    return [priority_class("p10", 10), priority_class("p50", 50), priority_class("p100", 100),
            node("n1", cpu=2, memory="4G"), node("n2", cpu=2, memory="4G"), queue("q1"),
            podgroup("mid", queue="q1", priorityClassName="p50", phase="Running"),
            pod("mid-0", group="mid", cpu="2", memory="1G", nodeName="n1", priorityClassName="p50"),
            podgroup("lo", queue="q1", priorityClassName="p10", phase="Running"),
            pod("lo-0", group="lo", cpu="2", memory="1G", nodeName="n2", priorityClassName="p10"),
            podgroup("hi", queue="q1", priorityClassName="p100", phase="Inqueue"),
            pod("hi-0", group="hi", cpu="2", memory="1G", priorityClassName="p100")]


def test_topology_aware_preemption_takes_the_node_whose_victims_matter_least() -> None:
    plain = run(two_nodes(), one_tier("preempt"))
    assert evicted(plain) == {"mid-0"}  # the first node that works
    aware = run(two_nodes(), one_tier("preempt", configurations=TOPOLOGY))
    assert evicted(aware) == {"lo-0"} and pipelined(aware) == {"hi-0": "n2"}


def test_topology_aware_preemption_spares_victims_it_does_not_need() -> None:
    """Volcano's SelectVictimsOnNode reprieves victims, most important first, while the preemptor still fits."""
    objs = [priority_class("p10", 10), priority_class("p20", 20), priority_class("p100", 100),
            node("n1", cpu=4, memory="4G"), queue("q1"),
            podgroup("small", queue="q1", priorityClassName="p10", phase="Running"),
            pod("small-0", group="small", cpu="1", memory="1G", nodeName="n1", priorityClassName="p10"),
            podgroup("big", queue="q1", priorityClassName="p20", phase="Running"),
            pod("big-0", group="big", cpu="3", memory="1G", nodeName="n1", priorityClassName="p20"),
            podgroup("hi", queue="q1", priorityClassName="p100", phase="Inqueue"),
            pod("hi-0", group="hi", cpu="3", memory="1G", priorityClassName="p100")]
    assert evicted(run(objs, one_tier("preempt"))) == {"small-0", "big-0"}  # least important first, until it fits
    assert evicted(run(objs, one_tier("preempt", configurations=TOPOLOGY))) == {"big-0"}


def test_topology_aware_preemption_dry_runs_only_as_many_candidates_as_asked() -> None:
    """Volcano's calculateNumCandidates: 10% of two nodes is none, raised to minCandidateNodesAbsolute (1), so
    the first node that works is taken; minCandidateNodesAbsolute 2 dry-runs both."""
    defaults = TOPOLOGY.replace(", minCandidateNodesPercentage: 100", "")
    assert evicted(run(two_nodes(), one_tier("preempt", configurations=defaults))) == {"mid-0"}
    two = TOPOLOGY.replace("minCandidateNodesPercentage: 100", "minCandidateNodesAbsolute: 2")
    assert evicted(run(two_nodes(), one_tier("preempt", configurations=two))) == {"lo-0"}
    capped = TOPOLOGY.replace("100}", "100, maxCandidateNodesAbsolute: 1}")
    assert evicted(run(two_nodes(), one_tier("preempt", configurations=capped))) == {"mid-0"}


def test_what_a_node_could_still_free_follows_the_sessions_evictions() -> None:
    """PreemptionBasic (kube's scheduler_perf) was quadratic: a victim evicted for one preemptor still counted as
    freeable, so every later preemptor of the cycle re-searched the nodes earlier ones had claimed.  The index
    now follows evictions, and their undoing when a statement is discarded."""
    from scheduler.actions.shared.victims import VictimIndex
    from scheduler.framework.statement import Statement
    from tests.support.sessions import open_session, task

    ssn = open_session([*CLASSES, node("n1", cpu=4, memory="4G"), queue("q1"),
                        podgroup("pg1", queue="q1", priorityClassName="low-priority", phase="Running"),
                        low("a"), low("b")])
    index = VictimIndex(ssn, lambda t: t.job.queue, "preemptable")
    before = index.freeable(["q1"])[0, 0]
    stmt = Statement(ssn)
    stmt.evict(task(ssn, "default/a"), "test")
    assert index.freeable(["q1"])[0, 0] == before - 1000  # a's CPU is no longer there to free
    stmt.discard()
    assert index.freeable(["q1"])[0, 0] == before
