"""Incremental snapshots (scheduler.framework.keeper): after any sequence of cache changes, a kept
snapshot equals one taken from scratch — every task, job, queue and node array, and their order.

The whole suite also runs with ``SnapshotKeeper.verify`` on (tests/conftest.py), so every cycle of
every test is checked the same way; here the changes are drawn at random, cycles in between.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.keeper import SnapshotDiverged, SnapshotKeeper, snapshot_differences, take_snapshot
from scheduler.framework.snapshot import Snapshot
from tests.support.builders import node, pod, podgroup, priority_class, queue

AT = datetime(2026, 1, 1, 12, tzinfo=UTC)
NODES = [f"n{i}" for i in range(4)]
PODS = [f"p{i}" for i in range(6)]
GROUPS = ["g0", "g1", "g2"]


def _obj(doc: dict) -> Any:
    return parse_object(doc, "test")


def _pod(name: str, draw: Any) -> Any:
    group = draw(st.sampled_from([None, *GROUPS]))
    return _obj(pod(name, group=group, cpu=draw(st.sampled_from(["100m", "1", "2"])),
                    extra=draw(st.sampled_from([None, {"example.com/dongle": 1}])),
                    priority=draw(st.sampled_from([None, 5])),
                    priorityClassName=draw(st.sampled_from([None, "high"])),
                    nodeName=draw(st.sampled_from([None, None, *NODES, "gone-node"])),
                    phase=draw(st.sampled_from([None, "Succeeded"])) if draw(st.booleans()) else None))


@st.composite
def changes(draw: Any) -> list[tuple[str, Any]]:
    """A list of cache changes, with ``cycle`` (a real scheduling cycle) and ``check`` among them."""
    out: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from([
            "pod", "pod", "pod", "remove", "readd", "bind", "unbind", "evict", "nominate", "terminating", "finish",
            "group", "remove_group", "group_status", "node", "remove_node", "priority_class", "remove_class",
            "queue", "foreign", "namespace", "remove_namespace", "namespaces_known", "cycle", "check", "check"]))
        name = draw(st.sampled_from(PODS))
        if kind in ("pod", "readd"):
            out.append((kind, _pod(name, draw)))
        elif kind == "foreign":
            doc = pod(name)
            doc["spec"]["schedulerName"] = "someone-else"
            out.append((kind, _obj(doc)))
        elif kind in ("group", "remove_group", "group_status"):
            out.append((kind, _obj(podgroup(draw(st.sampled_from(GROUPS)), minMember=draw(st.integers(1, 3)),
                                            queue=draw(st.sampled_from([None, "q"])),
                                            minResources=draw(st.sampled_from([None, {"cpu": "1"},
                                                                               {"example.com/widget": "1"}]))))))
        elif kind in ("node", "remove_node"):
            out.append((kind, _obj(node(draw(st.sampled_from(NODES)), cpu=draw(st.sampled_from([4, 8])),
                                        labels=draw(st.sampled_from([None, {"zone": "a"}])),
                                        extra=draw(st.sampled_from([None, {"example.com/dongle": 2}]))))))
        elif kind in ("priority_class", "remove_class"):
            out.append((kind, _obj(priority_class("high", draw(st.sampled_from([10, 1000]))))))
        elif kind in ("namespace", "remove_namespace"):
            out.append((kind, _obj(namespace("default", draw(st.sampled_from([{}, {"team": "a"}, {"team": "b"}]))))))
        elif kind == "namespaces_known":
            out.append((kind, draw(st.booleans())))
        elif kind == "queue":
            out.append((kind, _obj(queue("q", draw(st.integers(1, 3)),
                                         capability=draw(st.sampled_from([None, {"cpu": "4"}]))))))
        elif kind in ("bind", "nominate"):
            out.append((kind, (f"default/{name}", draw(st.sampled_from(NODES)),
                               draw(st.sampled_from([None, {"scoria.io/numa-nodes": "0"}])))))
        else:
            out.append((kind, f"default/{name}"))
    out.append(("check", None))
    return out


def _apply(cache: ClusterCache, sched: Scheduler, kind: str, arg: Any) -> None:
    if kind in ("pod", "foreign", "group", "node", "priority_class", "queue", "namespace"):
        cache.upsert(arg)
    elif kind == "remove":
        cache.remove_pod(arg)
    elif kind == "readd":  # out and in again: the pods dict now holds it last
        cache.remove_pod(arg.uid)
        cache.upsert(arg)
    elif kind == "remove_group":
        cache.remove("PodGroup", arg.key)
    elif kind == "remove_node":
        cache.remove("Node", arg.name)
    elif kind == "remove_class":
        cache.remove("PriorityClass", arg.name)
    elif kind == "remove_namespace":
        cache.remove("Namespace", arg.name)
    elif kind == "namespaces_known":
        cache.set_namespaces_known(arg)
    elif kind == "group_status":
        current = cache.podgroups.get(arg.key)
        if current is not None:
            cache.set_group_status(current, "Inqueue" if current.phase == "Pending" else "Pending", [])
    elif kind == "bind":
        uid, where, annotations = arg
        cache.bind(uid, where, annotations, at=AT.timestamp())
    elif kind == "nominate":
        cache.nominate(arg[0], arg[1])
    elif kind == "unbind":
        cache.unbind(arg)
    elif kind == "evict":
        cache.evict(arg, "test")
    elif kind in ("terminating", "finish"):  # changed in place, as the run modes do: read live
        target = cache.pods.get(arg)
        if target is not None:
            if kind == "terminating":
                target.terminating = not target.terminating
            else:
                target.phase = "Succeeded"
            cache.generation += 1
    elif kind == "cycle":
        sched.run_once()


def _release(snapshot: Snapshot) -> None:
    for job in snapshot.jobs.values():
        job.tasks = {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=changes())
def test_a_kept_snapshot_equals_one_from_scratch(steps: list[tuple[str, Any]]) -> None:
    cache = ClusterCache()
    for name in NODES[:2]:
        cache.upsert(_obj(node(name)))
    sched = Scheduler(cache, clock=lambda: AT)  # its own keeper verifies every cycle (tests/conftest.py)
    keeper = SnapshotKeeper(cache)
    keeper.verify = False  # compared here, explicitly
    for kind, arg in steps:
        if kind == "check":
            kept, scratch = keeper.take(AT.timestamp()), take_snapshot(cache, now=AT.timestamp())
            problems = snapshot_differences(kept, scratch)
            assert not problems, "\n".join(problems)
            _release(kept)
            _release(scratch)
        else:
            _apply(cache, sched, kind, arg)


def test_the_comparison_sees_a_change_made_behind_the_caches_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects enter through ``upsert`` (which journals them): one put straight into the cache's dict is
    not seen by a kept snapshot, and verify (on in the whole test suite) says so."""
    cache = ClusterCache()
    cache.upsert(_obj(node("n0")))
    cache.upsert(_obj(pod("a")))
    keeper = SnapshotKeeper(cache)
    keeper.take(AT.timestamp())
    sneaked = _obj(pod("b"))
    cache.pods[sneaked.uid] = sneaked
    cache.implicit_groups[sneaked.uid] = cache.implicit_groups["default/a"]
    monkeypatch.setattr(SnapshotKeeper, "verify", True)
    with pytest.raises(SnapshotDiverged, match="pod:b"):
        keeper.take(AT.timestamp())


def test_only_changed_pods_are_read_again() -> None:
    cache = ClusterCache()
    cache.upsert(_obj(node("n0")))
    for i in range(50):
        cache.upsert(_obj(pod(f"p{i}", nodeName="n0")))
    keeper = SnapshotKeeper(cache)
    keeper.take(AT.timestamp())
    seeds = dict(keeper._seeds)
    cache.upsert(_obj(pod("p7", cpu="2", nodeName="n0")))
    cache.bind("default/p9", "n0", {"scoria.io/numa-nodes": "0"})
    cache.remove_pod("default/p3")
    keeper.take(AT.timestamp())
    redone = {uid for uid, seed in keeper._seeds.items() if seeds.get(uid) is not seed}
    assert redone == {"default/p7", "default/p9"}
    assert "default/p3" not in keeper._seeds


def namespace(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_namespace_labels_are_journalled_and_terms_follow_them() -> None:
    """A Namespace relabelled is seen by the next kept snapshot, without reading any pod again, and a
    namespaceSelector term follows it; the same labels again (an informer's resync) journal nothing."""
    cache = ClusterCache()
    cache.upsert(_obj(node("n0", labels={"zone": "a"})))
    cache.upsert(_obj(namespace("team-b", {"team": "red"})))
    db = pod("db", namespace="team-b", nodeName="n0", phase="Running")
    db["metadata"]["labels"] = {"app": "db"}
    cache.upsert(_obj(db))
    web = pod("web")
    web["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone",
         "namespaceSelector": {"matchLabels": {"team": "blue"}}}]}}
    cache.upsert(_obj(web))
    sched = Scheduler(cache, clock=lambda: AT)
    sched.run_once()
    assert cache.pods["default/web"].node_name == "" and "pod affinity" in (cache.pods["default/web"].reason or "")
    keeper = SnapshotKeeper(cache)
    first = keeper.take(AT.timestamp())
    assert first.namespace_labels["team-b"] == {"team": "red", "kubernetes.io/metadata.name": "team-b"}
    seeds = dict(keeper._seeds)
    cache.upsert(_obj(namespace("team-b", {"team": "red"})))  # a resync: nothing changed
    assert not keeper._journal.namespaces
    cache.upsert(_obj(namespace("team-b", {"team": "blue"})))
    assert keeper._journal.namespaces
    kept = keeper.take(AT.timestamp())
    assert kept.namespace_labels["team-b"]["team"] == "blue"
    assert all(keeper._seeds[uid] is seed for uid, seed in seeds.items())  # no pod read again
    sched.run_once()
    assert cache.pods["default/web"].node_name == "n0"
    cache.remove("Namespace", "team-b")  # gone: the namespace has only its name label, which the term does not match
    assert "team-b" not in keeper.take(AT.timestamp()).namespace_labels


def test_whether_namespaces_are_known_is_journalled_and_carried() -> None:
    """Kubernetes mode lists namespaces after it starts scheduling: the cache says when they are known, the
    kept snapshot carries it (without reading any pod again), and saying the same again journals nothing."""
    cache = ClusterCache()
    assert cache.namespaces_known  # the simulator and embedded mode know them from the start
    cache.upsert(_obj(node("n0")))
    cache.upsert(_obj(pod("a")))
    keeper = SnapshotKeeper(cache)
    assert keeper.take(AT.timestamp()).namespaces_known
    seeds = dict(keeper._seeds)
    generation = cache.generation
    cache.set_namespaces_known(False)
    assert keeper._journal.namespaces and cache.generation > generation  # a waiting pod gets a cycle
    assert not keeper.take(AT.timestamp()).namespaces_known
    cache.set_namespaces_known(False)
    assert not keeper._journal.namespaces
    cache.upsert(_obj(namespace("default", {"team": "a"})))  # listed: the labels, then the flag
    cache.set_namespaces_known(True)
    kept = keeper.take(AT.timestamp())
    assert kept.namespaces_known and kept.namespace_labels["default"]["team"] == "a"
    assert all(keeper._seeds[uid] is seed for uid, seed in seeds.items())
    assert take_snapshot(cache).namespaces_known


def test_a_pod_removed_and_added_again_comes_last_as_in_the_cache() -> None:
    """The cache's pods dict puts a pod inserted again at the end; so must a kept snapshot (its jobs, and
    the tasks on each node, come in that order)."""
    cache = ClusterCache()
    cache.upsert(_obj(node("n0")))
    for name in ("a", "b", "c"):
        cache.upsert(_obj(pod(name, nodeName="n0")))
    keeper = SnapshotKeeper(cache)
    keeper.verify = False
    keeper.take(AT.timestamp())
    cache.remove_pod("default/a")
    cache.upsert(_obj(pod("d", nodeName="n0")))
    cache.upsert(_obj(pod("a", nodeName="n0")))
    kept = keeper.take(AT.timestamp())
    assert list(kept.jobs) == ["default/pod:b", "default/pod:c", "default/pod:d", "default/pod:a"]
    assert list(kept.nodes.tasks[0]) == ["default/b", "default/c", "default/d", "default/a"]
    assert not snapshot_differences(kept, take_snapshot(cache, now=AT.timestamp()))


@pytest.mark.parametrize("read_after", [0, 1, 2, 3, 4])
def test_each_nodes_tasks_read_late_come_as_if_kept_all_along(read_after: int) -> None:
    """A node table makes each node's task list only when it is first read; placements and their undoing
    before then leave the lists as they would have left them (the order is what preemption breaks ties by)."""
    cache = ClusterCache()
    cache.upsert(_obj(node("n0")))
    cache.upsert(_obj(node("n1")))
    for name, where in (("a", "n0"), ("b", "n1"), ("c", "n0")):
        cache.upsert(_obj(pod(name, nodeName=where)))
    for name in ("x", "y"):
        cache.upsert(_obj(pod(name)))
    snap = take_snapshot(cache, now=AT.timestamp())
    table = snap.nodes
    tasks = {t.pod.name: t for job in snap.jobs.values() for t in job.tasks.values()}
    moves = [("place", "x", 0), ("place", "y", 1), ("unplace", "a", 0), ("place", "a", 0), ("unplace", "x", 0)]
    for i, (kind, name, where) in enumerate(moves):
        if i == read_after:
            assert [list(on) for on in table.tasks]  # read now: made from here on
        getattr(table, kind)(tasks[name], where)
    assert [list(on) for on in table.tasks] == [["default/c", "default/a"], ["default/b", "default/y"]]
