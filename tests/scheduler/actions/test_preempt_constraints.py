"""Preemption that knows constraints (issue 15): evicting the pod that breaks the preemptor's required
anti-affinity (or whose own anti-affinity, spread count or host port refuses it) counts as making room, and
victims are chosen, kube-scheduler's way (SelectVictimsOnNode), so that the preemptor fits with every
constraint once they are gone: evicted in Volcano's order until it does, then spared, most important first,
when not needed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.framework.config import parse_config
from scheduler.framework.session import Session
from scheduler.framework.snapshot import TaskStatus
from scheduler.framework.statement import Statement
from scheduler.plugins.shared.podaffinity import term_matches
from tests.support.action_runs import evicted, pipelined, run, with_
from tests.support.builders import node, pod
from tests.support.sessions import config_with, node_index, open_session, task


def _config(topology: bool = False):
    extra = ("configurations:\n- name: preempt\n  arguments: {enableTopologyAwarePreemption: true}\n"
             if topology else "")
    return parse_config('actions: "allocate, preempt"\ntiers:\n- plugins:\n  - name: priority\n'
                        '  - name: predicates\n' + extra)


def _anti(key: str, value: str, topology: str = "kubernetes.io/hostname") -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology}]}}


def _placed(name: str, node_name: str, prio: int, cpu: str = "1", **kw) -> dict:
    labels = kw.pop("labels", None)
    return with_(pod(name, nodeName=node_name, priority=prio, cpu=cpu, memory="1Gi", **kw), labels=labels)


def _ports(*ports: int) -> dict:
    return {"containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            "ports": [{"containerPort": p, "hostPort": p} for p in ports]}]}


# -- the counts: a pod being evicted counts now, not once it is gone ------------------------------------
def test_an_evicted_pods_anti_affinity_holds_now_and_is_gone_in_future_mode() -> None:
    objs = [node("n1", cpu=4), node("n2", cpu=4),
            _placed("guard", "n1", 0, labels={"app": "guard"}, affinity=_anti("app", "web")),
            with_(pod("web", priority=100), labels={"app": "web"})]
    ssn = open_session(objs, config_with("priority", "predicates"))
    web, guard = task(ssn, "default/web"), task(ssn, "default/guard")
    n1 = node_index(ssn, "n1")
    full = ssn.nodes.future_idle(web)
    assert not ssn.feasible(web, full, mode="now")[n1]
    assert ssn.feasible(web, full, mode="reach")[n1]  # evictions could clear it
    stmt = Statement(ssn)
    stmt.evict(guard, "test")
    assert guard.status == TaskStatus.RELEASING
    assert not ssn.feasible(web, full, mode="now")[n1]  # still there until it is gone (kube counts it)
    assert ssn.fits_after_evictions(web, n1)
    assert ssn.feasible(web, ssn.nodes.future_idle(web), mode="future")[n1]
    stmt.discard()  # the eviction undone: it holds for good again
    assert not ssn.fits_after_evictions(web, n1)


def test_the_preemptors_own_anti_affinity_counts_an_evicted_pod_until_gone() -> None:
    objs = [node("n1", cpu=4), _placed("db", "n1", 0, labels={"app": "db"}),
            with_(pod("web", priority=100, affinity=_anti("app", "db")), labels={"app": "web"})]
    ssn = open_session(objs, config_with("priority", "predicates"))
    web, db = task(ssn, "default/web"), task(ssn, "default/db")
    n1 = node_index(ssn, "n1")
    assert not ssn.fits_after_evictions(web, n1)
    stmt = Statement(ssn)
    stmt.evict(db, "test")
    assert not ssn.feasible(web, ssn.nodes.future_idle(web), mode="now")[n1]
    assert ssn.fits_after_evictions(web, n1)


# -- the action ------------------------------------------------------------------------------------------
def _conflict_world() -> list[dict]:
    """n1 has room for 1 cpu more; filler (lowest) is evicted first in Volcano's order, but only guard's
    anti-affinity keeps web off: kube's semantics evict guard alone."""
    return [node("n1", cpu=3),
            _placed("filler", "n1", 0),
            _placed("guard", "n1", 10, labels={"app": "guard"}, affinity=_anti("app", "web")),
            with_(pod("web", priority=100), labels={"app": "web"})]


def test_preempt_evicts_the_pod_whose_anti_affinity_blocks_and_spares_the_rest() -> None:
    ssn = run(_conflict_world(), _config())
    assert evicted(ssn) == {"guard"}
    assert pipelined(ssn) == {"web": "n1"}


def test_topology_aware_preempt_evicts_only_the_conflicting_pod() -> None:
    ssn = run(_conflict_world(), _config(topology=True))
    assert evicted(ssn) == {"guard"}
    assert pipelined(ssn) == {"web": "n1"}


def test_a_conflict_with_a_pod_that_may_not_be_evicted_makes_no_room() -> None:
    objs = [node("n1", cpu=4), _placed("filler", "n1", 0),
            _placed("guard", "n1", 1000, labels={"app": "guard"}, affinity=_anti("app", "web")),
            with_(pod("web", priority=100), labels={"app": "web"})]
    ssn = run(objs, _config())
    assert evicted(ssn) == set()  # evicting filler frees cpu but leaves guard's anti-affinity
    assert pipelined(ssn) == {}


def test_a_held_host_port_is_freed_by_evicting_its_holder_only() -> None:
    objs = [node("n1", cpu=3), _placed("filler", "n1", 0),
            {**_placed("holder", "n1", 10), "spec": {**_placed("holder", "n1", 10)["spec"], **_ports(8080)}},
            {**pod("web", priority=100), "spec": {**pod("web", priority=100)["spec"], **_ports(8080)}}]
    ssn = run(objs, _config())
    assert evicted(ssn) == {"holder"}
    assert pipelined(ssn) == {"web": "n1"}


def test_an_unconstrained_preemption_keeps_volcanos_prefix_of_victims() -> None:
    """No constraint involved: victims go in Volcano's order until resources fit, none spared (Volcano's
    normal preempt does not reprieve)."""
    objs = [node("n1", cpu=3), _placed("small", "n1", 0, cpu="1"), _placed("big", "n1", 10, cpu="2"),
            pod("web", priority=100, cpu="2")]
    ssn = run(objs, _config())
    assert evicted(ssn) == {"small", "big"}


# -- property: never pipelined where a required constraint of its breaks once the victims are gone -----------
def _violations(ssn: Session) -> list[str]:
    """Pipelined preemptors whose node, without the pods being evicted, breaks hostname anti-affinity either way."""
    out = []
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.status != TaskStatus.PIPELINED:
                continue
            others = [o for o in ssn.nodes.tasks[t.node].values()
                      if o is not t and o.status in (TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED)]
            others += [o for j in ssn.jobs.values() for o in j.tasks.values()
                       if o is not t and o.status == TaskStatus.PIPELINED and o.node == t.node]
            for o in others:
                for a, b in ((t, o), (o, t)):
                    aff = a.pod.pod_affinity
                    if aff is None:
                        continue
                    for term in aff.anti_required:
                        if term_matches(term, b.pod, ssn.snapshot.namespace_labels):
                            out.append(f"{t.pod.name} on {ssn.nodes.names[t.node]} with {o.pod.name}")
    return out


APPS = ("a", "b", "c")


@st.composite
def worlds(draw):
    n_nodes = draw(st.integers(1, 3))
    objs: list[dict] = [node(f"n{i}", cpu=draw(st.integers(2, 4))) for i in range(n_nodes)]
    for i in range(draw(st.integers(0, 8))):
        app = draw(st.sampled_from(APPS))
        aff = _anti("app", draw(st.sampled_from(APPS))) if draw(st.booleans()) else None
        objs.append(_placed(f"run{i}", f"n{draw(st.integers(0, n_nodes - 1))}", draw(st.sampled_from((0, 10, 1000))),
                            labels={"app": app}, affinity=aff))
    for i in range(draw(st.integers(1, 3))):
        app = draw(st.sampled_from(APPS))
        aff = _anti("app", draw(st.sampled_from(APPS))) if draw(st.booleans()) else None
        objs.append(with_(pod(f"new{i}", priority=draw(st.sampled_from((100, 2000))), affinity=aff),
                          labels={"app": app}))
    return objs, draw(st.booleans())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True,
          database=None)
@given(worlds())
def test_no_preemptor_is_pipelined_where_its_anti_affinity_breaks_once_victims_are_gone(world) -> None:
    objs, topology = world
    ssn = run(objs, _config(topology=topology))
    assert _violations(ssn) == []
