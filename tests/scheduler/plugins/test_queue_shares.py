"""Batch resources are no part of a queue's share (issue 13, item 13).

``kubernetes.io/batch-cpu`` and ``batch-memory`` are what online work leaves idle on a node, offered by its
agent to offline pods.  Counted as a share they made a queue that holds an online pod "at its deserved share"
for an offline pod that asks for none of its CPU (the built-in configuration never placed it), made a queue
above its share for holding offline pods (its online pods open to reclaim), and put jobs last in DRF's order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.framework.config import parse_config
from scheduler.plugins.shared.queueshare import ShareOf, share
from tests.support.builders import node, pod, queue
from tests.support.scenario import run_scenario
from tests.support.sessions import config_with, open_session, task

ROOT = Path(__file__).resolve().parents[3]
COLOCATION = (ROOT / "daemonset" / "config" / "scheduler-colocation.conf").read_text()
OFFLINE = {"cpu": None, "memory": None, "extra": {"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": "1Gi"}}


@pytest.mark.parametrize("config", [None, COLOCATION], ids=["built-in default", "scheduler-colocation.conf"])
@pytest.mark.parametrize("online", ["running", "pending"])
def test_an_offline_pod_is_placed_beside_online_work_in_its_queue(tmp_path: Path, config: str | None,
                                                                  online: str) -> None:
    """The issue's case: a node that registered by reporting (embedded mode, the simulator), an online pod in
    queue default, an offline pod asking only for batch resources — placed with either configuration."""
    objects = [{"report": {"name": "n1", "zones": [16], "zoneMemory": "64Gi", "cpuUsed": 5.0, "batchCpu": 6000,
                           "batchMemory": "16Gi"}},
               {"pod": {"name": "web", "cpu": 2, "memory": "2Gi", **({"nodeName": "n1"} if online == "running" else {})}},
               {"pod": {"name": "be", **OFFLINE}}]
    result = run_scenario({"objects": objects, "config": config}, tmp_path)
    pods = {p["name"]: p for p in result["pods"]}
    assert pods["be"]["node"] == "n1", pods["be"]["reason"]
    assert pods["web"]["node"] == "n1", pods["web"]["reason"]


def test_a_node_without_batch_resources_says_so(tmp_path: Path) -> None:
    """Where no node offers batch resources the reason is the node's, not a queue share it never had."""
    objects = [{"node": {"name": "n1", "cpu": 16, "memory": "64Gi"}},
               {"pod": {"name": "web", "cpu": 2, "memory": "2Gi", "nodeName": "n1"}}, {"pod": {"name": "be", **OFFLINE}}]
    be = {p["name"]: p for p in run_scenario({"objects": objects}, tmp_path)["pods"]}["be"]
    assert be["node"] is None and be["reason"].startswith("0/1 nodes are available: 1 Insufficient kubernetes.io/batch")


# queue a holds an online pod (2 of 8 CPUs, its whole share of what it asks) and every batch CPU the node offers;
# queue b asks for CPU and for batch CPU
SHARED = [node("n1", cpu=8, memory="64Gi", extra={"kubernetes.io/batch-cpu": 6000}), queue("a"), queue("b"),
          pod("a-web", queue="a", cpu="2", memory="1Gi", nodeName="n1"),
          *[pod(f"a-be-{i}", queue="a", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000}, nodeName="n1")
            for i in range(6)],
          *[pod(f"b-web-{i}", queue="b", cpu="2", memory="1Gi") for i in range(4)],
          pod("b-be", queue="b", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000})]


def test_proportion_keeps_batch_out_of_shares() -> None:
    ssn = open_session(SHARED, config_with("proportion"))
    plugin = ssn.plugins["proportion"]
    a, b = plugin.attrs["a"], plugin.attrs["b"]
    col = ssn.index.column["kubernetes.io/batch-cpu"]
    assert a.deserved[col] == 0 and b.deserved[col] == 0  # no share of batch resources is handed out
    assert a.share == pytest.approx(1.0)  # 2 of its deserved 2 CPUs: the batch it holds does not count
    # at its share of CPU, a is no reclaim victim for b, however much batch CPU its offline pods hold
    assert plugin.reclaimable(task(ssn, "default/b-web-3"), [task(ssn, "default/a-web")]) == []
    assert ssn.overused(ssn.queues["b"]) is None
    assert ssn.allocatable(ssn.queues["b"], task(ssn, "default/b-be")) is None


def test_proportion_still_limits_batch_by_an_explicit_capability() -> None:
    objs = [node("n1", cpu=8, memory="64Gi", extra={"kubernetes.io/batch-cpu": 6000}),
            queue("q", capability={"kubernetes.io/batch-cpu": "2"}),
            *[pod(f"be-{i}", queue="q", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000}, nodeName="n1")
              for i in range(2)],
            pod("more", queue="q", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000})]
    ssn = open_session(objs, config_with("proportion"))
    assert "would exceed its capability: kubernetes.io/batch-cpu 3" in ssn.allocatable(ssn.queues["q"],
                                                                                    task(ssn, "default/more"))


# The built-in plugins, with proportion in the tier of gang and conformance: the first tier with reclaim victims
# decides (Volcano's rule), so in the built-in layout proportion (tier 2) is not asked whether a victim's queue
# stays above its share (volcano-sh/volcano#5896).
SHARES_DECIDE = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: proportion}]
- plugins: [{name: overcommit}, {name: drf, enablePreemptable: false}, {name: predicates}, {name: nodeorder},
            {name: binpack}]
"""


def test_reclaim_takes_no_online_pod_from_a_queue_at_its_share(tmp_path: Path) -> None:
    """End to end with the built-in plugins, proportion deciding reclaim victims: b's fourth online pod does not
    get a's online pod evicted because a's offline pods hold the node's batch CPU."""
    result = run_scenario({"objects": SHARED_SCENARIO, "config": SHARES_DECIDE}, tmp_path)
    pods = {p["name"]: p for p in result["pods"]}
    assert not pods["a-web"]["evicted"] and pods["a-web"]["node"] == "n1"
    assert sum(1 for i in range(4) if pods[f"b-web-{i}"]["node"]) == 3


SHARED_SCENARIO = [
    {"node": {"name": "n1", "cpu": 8, "memory": "64Gi", "extra": {"kubernetes.io/batch-cpu": 6000}}},
    {"queue": {"name": "a"}}, {"queue": {"name": "b"}},
    {"pod": {"name": "a-web", "queue": "a", "cpu": 2, "memory": "1Gi", "nodeName": "n1"}},
    {"pods": {"prefix": "a-be", "count": 6, "queue": "a", "cpu": None, "memory": None,
              "extra": {"kubernetes.io/batch-cpu": 1000}, "nodeName": "n1"}},
    {"pods": {"prefix": "b-web", "count": 4, "queue": "b", "cpu": 2, "memory": "1Gi"}},
    {"pod": {"name": "b-be", "queue": "b", "cpu": None, "memory": None, "extra": {"kubernetes.io/batch-cpu": 1000}}},
]


def test_capacity_keeps_batch_out_of_shares() -> None:
    objs = [node("n1", cpu=8, memory="64Gi", extra={"kubernetes.io/batch-cpu": 6000}),
            queue("a", deserved={"cpu": "4"}), queue("b", deserved={"cpu": "4"}),
            *[pod(f"a-be-{i}", queue="a", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000}, nodeName="n1")
              for i in range(3)],
            pod("b-web", queue="b", cpu="2", memory=None, nodeName="n1"),
            pod("a-more", queue="a", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000})]
    ssn = open_session(objs, config_with("capacity"))
    plugin = ssn.plugins["capacity"]
    assert plugin.attrs["a"].share == 0 and plugin.attrs["b"].share == pytest.approx(0.5)
    assert ssn.compare_queues(ssn.queues["a"], ssn.queues["b"]) < 0  # a has used none of its CPU: it goes first
    assert plugin.preemptive(ssn.queues["a"], task(ssn, "default/a-more"))  # batch asks take no deserved CPU


def test_drf_orders_jobs_by_their_real_resources() -> None:
    objs = [node("n1", cpu=8, memory="64Gi", extra={"kubernetes.io/batch-cpu": 6000}),
            pod("batchy", cpu="1", memory=None, extra={"kubernetes.io/batch-cpu": 6000}, nodeName="n1"),
            pod("cpuy", cpu="4", memory=None, nodeName="n1")]
    ssn = open_session(objs, parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n'))
    shares = {job.name: ssn.plugins["drf"].shares[uid] for uid, job in ssn.jobs.items()}
    assert shares == {"pod:batchy": pytest.approx(1 / 8), "pod:cpuy": pytest.approx(4 / 8)}


# -- the shares computed once per session read the same as from scratch --------------------------------------
_amounts = st.lists(st.sampled_from([0.0, 1e-12, 0.5, 1.0, 3.0, 1000.0, 2.0**40, math.inf]), min_size=4, max_size=4)


@given(deserved=_amounts, allocated=_amounts, mask=st.lists(st.booleans(), min_size=4, max_size=4))
def test_a_queue_share_of_a_fixed_deserved_is_share(deserved, allocated, mask) -> None:
    d, a, m = np.array(deserved), np.array(allocated), np.array(mask)
    with np.errstate(all="raise"):  # what share() silences, ShareOf does not raise either
        fast = ShareOf(d, m)(a)
    assert fast == share(a, d, m) or (math.isnan(fast) and math.isnan(share(a, d, m)))


@given(total=_amounts, allocated=_amounts, mask=st.lists(st.booleans(), min_size=4, max_size=4))
def test_drf_shares_read_as_dominant_share(total, allocated, mask) -> None:
    from scheduler.framework.resources import dominant_share, dominant_shares
    from scheduler.plugins.drf import DRF
    t, a, m = np.array(total), np.array(allocated), np.array(mask)
    drf = DRF.__new__(DRF)
    drf.total, drf.mask = t, m
    drf._counted = m & (t > 0)
    drf._counted_total = t[drf._counted] if drf._counted.any() else None
    with np.errstate(invalid="ignore"):  # (an infinite total and allocation: NaN, as always)
        want = dominant_share(a, t, m)
        for got in (drf._share(a), dominant_shares(a[None, :], t, m)[0]):
            assert got == want or (math.isnan(got) and math.isnan(want))
