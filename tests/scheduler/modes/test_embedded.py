"""Embedded mode, scheduler side: the SQLite store, apply/delete, restarts, and reconciling with a node's runtime.

The agent side is faked here by the runtime list a report carries (proto
PodRuntime); tests/e2e/test_demo.py runs the real processes.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from proto.model import PodActionKind, PodRuntime
from scheduler.api.loader import iter_text
from scheduler.api.manifests import ManifestError
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Store, Stored, StoreError
from tests.support.builders import pod, podgroup, queue, report

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def docs(*manifests: dict):
    import yaml
    return list(iter_text(yaml.safe_dump_all(manifests, sort_keys=False), "test.yaml"))


def cluster(tmp_path: Path, *, nodes: int = 1, cpu: int = 8) -> tuple[Embedded, Scheduler]:
    from scheduler.api.loader import _node_report

    cache = ClusterCache()
    tmp_path.mkdir(parents=True, exist_ok=True)
    embedded = Embedded(cache, Store(tmp_path / "store.sqlite"), clock=lambda: AT.timestamp())
    embedded.load()
    for i in range(nodes):
        _, r = _node_report(report(f"n{i}", zones=[cpu]), "test")
        r.identity.sample_time_ns = int(AT.timestamp() * 1e9)
        cache.accept_report(r, AT.timestamp(), register=True, capacity_key=f"n{i}")
    return embedded, Scheduler(cache, effects=embedded.effects, clock=lambda: AT)


class View:
    """What a report carries that embedded mode reads: the runtime's pods."""

    def __init__(self, *runtime: PodRuntime):
        self.runtime = list(runtime)


def running(p, phase="Running", reason="") -> PodRuntime:
    return PodRuntime(p.uid, p.namespace, p.name, phase, reason, log_dir="/tmp/logs")


def test_the_store_keeps_objects_and_refuses_a_foreign_file(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.put([Stored("Pod", "default/a", {"kind": "Pod"}, {}), Stored("Queue", "q", {"kind": "Queue"}, {})])
    store.update_status([("Pod", "default/a", {"nodeName": "n1"}), ("Pod", "default/missing", {"x": 1})])
    store.close()
    again = Store(tmp_path / "s.sqlite")
    assert [(s.kind, s.key, s.status) for s in again.load()] == [("Queue", "q", {}), ("Pod", "default/a",
                                                                                     {"nodeName": "n1"})]
    foreign = tmp_path / "other.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    before = foreign.read_bytes()
    with pytest.raises(StoreError, match="not a Scoria store"):
        Store(foreign)
    assert foreign.read_bytes() == before
    (tmp_path / "junk.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match="not a readable SQLite database"):
        Store(tmp_path / "junk.sqlite")


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")

    class Boom:
        kind, key, status = "Pod", "default/b", {}

        @property
        def manifest(self):
            raise RuntimeError("the disk went away")

    with pytest.raises(RuntimeError):
        store.put([Stored("Pod", "default/a", {}, {}), Boom()])
    assert store.load() == []


def test_apply_stores_a_whole_file_or_nothing(tmp_path: Path) -> None:
    embedded, _ = cluster(tmp_path)
    good = docs(queue("q"), pod("a", queue="q"))
    assert embedded.apply(good) == ["queue/q", "pod/default/a"]
    bad = docs(pod("b"), pod("c", cpu="5x"))
    with pytest.raises(ManifestError, match=r"test.yaml:\d+: Pod default/c: .*invalid quantity"):
        embedded.apply(bad)
    assert [s.key for s in embedded.store.load() if s.kind == "Pod"] == ["default/a"]  # b was not stored either
    with pytest.raises(ManifestError, match="PodGroup default/missing is not defined"):
        embedded.apply(docs(pod("d", group="missing")))
    with pytest.raises(ManifestError, match="already exists"):
        embedded.apply(docs(pod("a")))
    assert embedded.apply(docs(queue("q", weight=3))) == ["queue/q"]  # queues are updated
    assert embedded.cache.queues["q"].weight == 3


def test_a_gang_binds_only_when_all_three_fit_and_a_restart_keeps_everything(tmp_path: Path) -> None:
    embedded, sched = cluster(tmp_path, cpu=4)
    embedded.apply(docs(podgroup("train", minMember=3), *[pod(f"train-{i}", cpu=2, group="train") for i in range(3)]))
    sched.run_once()
    assert not any(p.node_name for p in embedded.cache.pods.values())  # 6 CPUs asked, 4 there
    embedded2, sched2 = cluster(tmp_path / "big", nodes=2, cpu=4)
    embedded2.apply(docs(podgroup("train", minMember=3), *[pod(f"train-{i}", cpu=2, group="train")
                                                           for i in range(3)]))
    sched2.run_once()
    bound = {p.name: p.node_name for p in embedded2.cache.pods.values()}
    assert all(bound.values()) and len(bound) == 3
    # the scheduler is killed and started again: every pod, binding and the group's phase are back
    embedded2.store.close()
    cache = ClusterCache()
    reloaded = Embedded(cache, Store(tmp_path / "big" / "store.sqlite"))
    assert reloaded.load() == 4
    assert {p.name: p.node_name for p in cache.pods.values()} == bound
    assert cache.podgroups["default/train"].phase == "Running"


def test_pods_are_started_stopped_and_followed_on_their_node(tmp_path: Path) -> None:
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(pod("web", cpu=1)))
    sched.run_once()
    web = next(iter(embedded.cache.pods.values()))
    (start,) = embedded.pod_actions("n0", View())
    assert start.kind == PodActionKind.START and start.pod_uid == web.uid
    manifest = json.loads(start.pod_json)
    assert manifest["spec"]["nodeName"] == "n0" and manifest["metadata"]["uid"] == web.uid
    assert embedded.pod_actions("n0", View()) == []  # sent a moment ago: not again at once
    assert embedded.pod_actions("n1", View()) == []  # another node has nothing to do with it
    assert embedded.pod_actions("n0", View(running(web))) == []
    embedded.pod_actions("n0", View(running(web, "Failed", "Error")))
    stored = embedded.store.get("Pod", "default/web")
    assert stored.status["phase"] == "Failed"
    # the log folder is the scheduler's own for the pod, not the "/tmp/logs" the report named
    assert stored.status["runtime"]["logDir"] == str(tmp_path / "agent" / "logs" / f"default_web_{web.uid}")
    assert web.phase == "Failed"
    (stop,) = embedded.pod_actions("n0", View(PodRuntime("stranger", "x", "y", "Running")))
    assert stop.kind == PodActionKind.STOP and stop.pod_uid == "stranger"  # not ours any more: stop it


def test_delete_stops_a_running_pod_then_forgets_it(tmp_path: Path) -> None:
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(pod("web", cpu=1)))
    sched.run_once()
    web = next(iter(embedded.cache.pods.values()))
    assert embedded.delete("Pod", "default/web") == "deleting"
    (stop,) = embedded.pod_actions("n0", View(running(web)))
    assert stop.kind == PodActionKind.STOP and stop.grace_period_seconds == 30
    assert embedded.pod_actions("n0", View()) == []  # stopped: the record goes
    assert embedded.store.get("Pod", "default/web") is None and not embedded.cache.pods
    with pytest.raises(KeyError):
        embedded.delete("Pod", "default/web")


def test_an_eviction_is_carried_out_by_the_agent_and_recorded(tmp_path: Path) -> None:
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(pod("batch", cpu=1)))
    sched.run_once()
    victim = next(iter(embedded.cache.pods.values()))
    embedded.effects.evict(victim, "preempted by default/urgent")
    assert victim.terminating
    (evict,) = embedded.pod_actions("n0", View(running(victim)))
    assert evict.kind == PodActionKind.EVICT and "preempted" in evict.reason
    embedded.pod_actions("n0", View())  # the agent stopped it
    stored = embedded.store.get("Pod", "default/batch")
    assert stored.status["evicted"] and stored.status["phase"] == "Failed"
    assert victim.evicted and "preempted" in victim.reason
