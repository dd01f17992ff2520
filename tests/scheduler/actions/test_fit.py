"""Resource fit is the session's own check: without the predicates plugin allocate still never binds onto a full
node, and preempt and reclaim still evict until the preemptor fits (issue 14, difference 1)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.framework.config import parse_config
from tests.support.action_runs import bound, evicted, pipelined, run
from tests.support.builders import node, pod, podgroup, priority_class, queue
from tests.support.sessions import open_session, task

WITHOUT_PREDICATES = """
actions: "{actions}"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}]
- plugins: [{{name: proportion}}, {{name: binpack}}]
"""
BARE = 'actions: "{actions}"\ntiers:\n- plugins: [{{name: gang}}]\n'
GANG_PRIORITY = 'actions: "{actions}"\ntiers:\n- plugins: [{{name: gang}}, {{name: priority}}]\n'


@pytest.mark.parametrize("layout", [WITHOUT_PREDICATES, BARE], ids=["no predicates", "gang alone"])
def test_allocate_never_binds_onto_a_full_node(layout: str) -> None:
    objs = [node("n1", cpu=2), node("n2", cpu=4, pods=1), pod("running", cpu="2", nodeName="n1"),
            pod("other", cpu="1", nodeName="n2"), pod("want", cpu="1")]
    ssn = run(objs, parse_config(layout.format(actions="allocate")))
    assert bound(ssn) == {}
    assert task(ssn, "default/want").fit_error == "0/2 nodes are available: 1 Insufficient cpu, 1 Too many pods"


def test_allocate_without_predicates_picks_a_node_with_room() -> None:
    objs = [node("n1", cpu=2), node("n2", cpu=4), pod("running", cpu="2", nodeName="n1"), pod("want", cpu="1")]
    ssn = run(objs, parse_config(BARE.format(actions="allocate")))
    assert bound(ssn) == {"want": "n2"}


def test_feasible_checks_resources_with_no_predicate_plugin() -> None:
    ssn = open_session([node("n1", cpu=2), node("n2", cpu=8), pod("p", cpu="4", memory="1Gi")],
                       parse_config(BARE.format(actions="allocate")))
    t = task(ssn, "default/p")
    assert ssn.feasible(t, ssn.nodes.idle).tolist() == [False, True]
    assert ssn.explain(t, ssn.nodes.idle) == "0/2 nodes are available: 1 Insufficient cpu"


def test_unknown_capacity_is_left_to_the_plugin_that_set_it() -> None:
    ssn = open_session([node("n1", cpu=2), pod("p", cpu="1")], parse_config(BARE.format(actions="allocate")))
    avail = ssn.nodes.idle.copy()
    avail[0, 0] = np.nan
    assert ssn.fit(task(ssn, "default/p"), avail).tolist() == [True]


PREEMPT_WORLD = [node("n1", cpu=4, memory="64Gi"), priority_class("low", 1), priority_class("high", 100),
                 podgroup("low", priorityClassName="low"),
                 *[pod(f"low-{i}", group="low", cpu="1", nodeName="n1", priorityClassName="low") for i in range(4)],
                 podgroup("high", priorityClassName="high"),
                 pod("urgent", group="high", cpu="2", priorityClassName="high")]


@pytest.mark.parametrize("layout", [WITHOUT_PREDICATES, GANG_PRIORITY],
                         ids=["no predicates", "gang and priority"])
def test_preempt_without_predicates_evicts_until_the_preemptor_fits(layout: str) -> None:
    ssn = run(PREEMPT_WORLD, parse_config(layout.format(actions="allocate, preempt")))
    assert len(evicted(ssn)) == 2  # two 1-CPU pods for a 2-CPU preemptor: not none, not more
    assert pipelined(ssn) == {"urgent": "n1"}


def test_reclaim_without_predicates_evicts_until_the_reclaimer_fits() -> None:
    objs = [node("n1", cpu=4, memory="64Gi"), queue("a"), queue("b"),
            *[pod(f"a-{i}", queue="a", cpu="1", nodeName="n1") for i in range(4)],
            pod("b-0", queue="b", cpu="2")]
    ssn = run(objs, parse_config(WITHOUT_PREDICATES.format(actions="allocate, reclaim")))
    assert len(evicted(ssn)) == 2
    assert pipelined(ssn) == {"b-0": "n1"}
