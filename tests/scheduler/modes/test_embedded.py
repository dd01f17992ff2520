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
import yaml

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
    from scheduler.api.loader import node_report_from_doc

    cache = ClusterCache()
    tmp_path.mkdir(parents=True, exist_ok=True)
    embedded = Embedded(cache, Store(tmp_path / "store.sqlite"), clock=lambda: AT.timestamp())
    embedded.load()
    for i in range(nodes):
        _, r = node_report_from_doc(report(f"n{i}", zones=[cpu]), "test")
        r.identity.sample_time_ns = int(AT.timestamp() * 1e9)
        r.identity.runs_pods = True  # an embedded agent: it runs what is bound to its node
        cache.accept_report(r, AT.timestamp(), register=True, capacity_key=f"n{i}")
    embedded.nodes.tick()  # node lifecycle finds them Ready
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
    assert embedded.apply(good) == [("queue/q", "created"), ("pod/default/a", "created")]
    bad = docs(pod("b"), pod("c", cpu="5x"))
    with pytest.raises(ManifestError, match=r"test.yaml:\d+: Pod default/c: .*invalid quantity"):
        embedded.apply(bad)
    assert [s.key for s in embedded.store.load() if s.kind == "Pod"] == ["default/a"]  # b was not stored either
    with pytest.raises(ManifestError, match="PodGroup default/missing is not defined"):
        embedded.apply(docs(pod("d", group="missing")))
    assert embedded.apply(docs(queue("q", weight=3))) == [("queue/q", "configured")]  # queues are updated
    assert embedded.cache.queues["q"].weight == 3


def test_namespaces_are_applied_relabelled_kept_and_deleted(tmp_path: Path) -> None:
    """A Namespace is stored and replaced like a queue; its labels reach the cache (a namespaceSelector reads
    them), survive a restart, and go with a delete."""
    embedded, _ = cluster(tmp_path)
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
    assert embedded.apply(docs(team)) == [("namespace/team-a", "created")]
    team["metadata"]["labels"] = {"team": "b"}
    assert embedded.apply(docs(team)) == [("namespace/team-a", "configured")]
    assert embedded.apply(docs(team)) == [("namespace/team-a", "unchanged")]
    assert embedded.cache.namespaces["team-a"].labels == {"team": "b", "kubernetes.io/metadata.name": "team-a"}
    embedded.store.close()
    cache = ClusterCache()
    assert Embedded(cache, Store(tmp_path / "store.sqlite")).load() == 2  # the namespace and the registered node
    assert cache.namespaces["team-a"].labels["team"] == "b"
    reloaded = Embedded(cache, Store(tmp_path / "store.sqlite"))
    assert reloaded.delete("Namespace", "team-a") == "deleted"
    assert "team-a" not in cache.namespaces


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
    assert reloaded.load() == 6  # the group, three pods and the two nodes they run on
    assert {p.name: p.node_name for p in cache.pods.values()} == bound
    assert sorted(cache.nodes) == ["n0", "n1"] and not any(n.ready for n in cache.nodes.values())  # till heard
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


def snapshot(embedded: Embedded) -> tuple:
    """What the store and the cache hold: a refused apply changes neither."""
    stored = sorted((s.kind, s.key, json.dumps(s.manifest, sort_keys=True)) for s in embedded.store.load())
    cached = (sorted(p.uid for p in embedded.cache.pods.values()), sorted(embedded.cache.queues),
              sorted(embedded.cache.podgroups), sorted(embedded.cache.priority_classes))
    return stored, cached


POD_TEXT = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    command: [sleep]\n"
# documents that crashed apply (issue 13, items 6, 7, 9, 11): each refused with the file, line and field (the
# file is a Queue of 8 lines, then the document)
REFUSED_AT_APPLY = [
    ("binary label", POD_TEXT.replace("name: web\n", "name: web\n  labels: {a: !!binary aGVsbG8=}\n"),
     "x.yaml:13:15: invalid YAML: tag !!binary is not allowed"),
    ("a set", POD_TEXT.replace("name: web\n", "name: web\n  annotations: !!set {a}\n"),
     "x.yaml:13:16: invalid YAML: tag !!set is not allowed"),
    ("node with metadata a string", "apiVersion: v1\nkind: Node\nmetadata: x\n",
     "x.yaml:9: Node <unnamed>: nodes join by running an agent"),
    ("metadata a string", "apiVersion: v1\nkind: Pod\nmetadata: x\n",
     "x.yaml:9: Pod default/<unnamed>: metadata: expected a mapping"),
    ("kind a mapping", "apiVersion: v1\nkind: {}\nmetadata: {name: a}\n", "x.yaml:9: ? a: kind: expected a string"),
    ("name with a slash", POD_TEXT.replace("name: web", "name: a/b", 1), "Pod default/a/b: metadata.name: 'a/b'"),
    ("name with a question mark", POD_TEXT.replace("name: web", "name: web?canary", 1), "metadata.name: 'web?canary'"),
    ("non-ASCII name", POD_TEXT.replace("name: web", "name: ünï", 1), "metadata.name: 'ünï' is not a lowercase"),
    ("long name", POD_TEXT.replace("name: web", "name: " + "a" * 1_000_000, 1),
     "metadata.name: must be no more than 253 characters, got 1,000,000"),
    ("10 MB name", POD_TEXT.replace("name: web", "name: " + "a" * 10_000_000, 1),
     "x.yaml: invalid YAML: the text is longer than 8,388,608 characters"),  # refused before it is parsed
    ("env name with =", POD_TEXT + "    env: [{name: A=B, value: x}]\n",
     "Pod default/web: spec.containers[0].env[0].name: 'A=B' is not a valid environment variable name"),
    ("env name with NUL", POD_TEXT + '    env: [{name: "A\\0B", value: x}]\n',
     "spec.containers[0].env[0].name: 'A\\x00B' is not a valid environment variable name"),
    ("empty env name", POD_TEXT + "    env: [{name: '', value: x}]\n", "spec.containers[0].env[0].name: must not be empty"),
    ("env value a list", POD_TEXT + "    env: [{name: A, value: [x]}]\n", "spec.containers[0].env[0].value: expected a string"),
    ("uid that names a path", POD_TEXT.replace("name: web\n", "name: web\n  uid: ../../etc\n"),
     "metadata.uid: '../../etc' is not a valid uid"),
    ("a pod over 4 MiB", POD_TEXT + "    args: [" + "y" * 5_000_000 + "]\n",
     "Pod default/web: the object is 5,000,"),
    ("a pod over 1 MiB", POD_TEXT + "    args: [" + "y" * 1_100_000 + "]\n",
     "bytes as JSON; at most 1,048,576 (1 MiB) are accepted, so that a pod fits in the 4 MiB gRPC message"),
]


@pytest.mark.parametrize("text,needle", [c[1:] for c in REFUSED_AT_APPLY], ids=[c[0] for c in REFUSED_AT_APPLY])
def test_apply_refuses_in_one_line_and_stores_nothing(tmp_path: Path, text: str, needle: str) -> None:
    embedded, _ = cluster(tmp_path)
    embedded.apply(docs(queue("q"), pod("first", queue="q")))
    before = snapshot(embedded)
    with pytest.raises(ManifestError) as info:
        embedded.apply(list(iter_text(yaml.safe_dump(queue("late")) + "---\n" + text, "x.yaml")))
    message = str(info.value)
    assert needle in message and "\n" not in message and len(message) < 600, message
    assert snapshot(embedded) == before


def test_unquoted_dates_are_stored_as_the_strings_they_are(tmp_path: Path) -> None:
    text = POD_TEXT.replace("name: web\n", "name: web\n  creationTimestamp: 2024-01-01T00:00:00Z\n"
                                           "  labels: {since: 2024-01-01}\n")
    embedded, _ = cluster(tmp_path)
    assert [a.name for a in embedded.apply(list(iter_text(text, "x.yaml")))] == ["pod/default/web"]
    stored = embedded.store.get("Pod", "default/web")
    assert stored.manifest["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"
    assert stored.manifest["metadata"]["labels"] == {"since": "2024-01-01"}
    assert next(iter(embedded.cache.pods.values())).created == datetime(2024, 1, 1, tzinfo=UTC)


def test_a_uid_names_one_pod_only(tmp_path: Path) -> None:
    """A second pod reusing a running pod's uid is refused: accepted, it replaced the first in the cache (pods are
    known by uid), and deleting it left the first pod's process running on its node."""
    embedded, sched = cluster(tmp_path)
    first = pod("first")
    first["metadata"]["uid"] = "0b3e7c1a-uid"
    embedded.apply(docs(first))
    sched.run_once()
    before = snapshot(embedded)
    second = pod("second")
    second["metadata"]["uid"] = "0b3e7c1a-uid"
    with pytest.raises(ManifestError, match=r"Pod default/second: metadata.uid: '0b3e7c1a-uid' is already the uid "
                                            r"of Pod default/first"):
        embedded.apply(docs(second))
    assert snapshot(embedded) == before
    running_pod = embedded.cache.pods["0b3e7c1a-uid"]
    assert running_pod.key == "default/first" and running_pod.node_name == "n0"
    assert embedded.delete("Pod", "default/first") == "deleting"
    (stop,) = embedded.pod_actions("n0", View(running(running_pod)))
    assert (stop.kind, stop.pod_uid) == (PodActionKind.STOP, "0b3e7c1a-uid")


def test_the_largest_pod_accepted_starts_in_one_message(tmp_path: Path) -> None:
    """At the object limit a pod's START, as the agent receives it, stays far below gRPC's 4 MiB."""
    from scheduler.api.manifests import GRPC_MESSAGE_BYTES, MAX_OBJECT_BYTES

    embedded, sched = cluster(tmp_path)
    text = POD_TEXT + "    args: [" + "y" * (MAX_OBJECT_BYTES - 400) + "]\n"
    assert [a.name for a in embedded.apply(list(iter_text(text, "x.yaml")))] == ["pod/default/web"]
    sched.run_once()
    (start,) = embedded.pod_actions("n0", View())
    assert start.kind == PodActionKind.START
    assert MAX_OBJECT_BYTES - 400 < len(start.pod_json.encode()) < MAX_OBJECT_BYTES + 4096 < GRPC_MESSAGE_BYTES // 3


def test_many_large_pods_for_one_node_start_over_several_directives(tmp_path: Path) -> None:
    """Issue 13 item 9: five pods near the object limit bound to one node at once would make one 5 MiB
    directive, over gRPC's 4 MiB (the agent's stream resets and none starts); they go out over two."""
    from scheduler.api.manifests import GRPC_MESSAGE_BYTES, MAX_OBJECT_BYTES
    from scheduler.modes.embedded.mode import START_BUDGET_BYTES

    embedded, sched = cluster(tmp_path)
    for i in range(5):
        text = POD_TEXT.replace("name: web", f"name: web{i}") + "    args: [" + "y" * (MAX_OBJECT_BYTES - 400) + "]\n"
        embedded.apply(list(iter_text(text, "x.yaml")))
    sched.run_once()
    first = embedded.pod_actions("n0", View())
    second = embedded.pod_actions("n0", View())
    sizes = [sum(len(a.pod_json.encode()) for a in d) for d in (first, second)]
    assert len(first) == 3 and len(second) == 2, sizes
    assert all(size <= START_BUDGET_BYTES < GRPC_MESSAGE_BYTES - 2**19 for size in sizes)
    assert {a.name for a in first + second} == {f"web{i}" for i in range(5)}
    assert embedded.pod_actions("n0", View()) == []  # each sent once until the resend interval


def test_null_labels_and_annotations_are_stored_as_absent(tmp_path: Path) -> None:
    """Found by tests/scheduler/test_fuzz.py: stored as null, they broke the pod's START and a restart."""
    text = POD_TEXT.replace("name: web\n", "name: web\n  labels: null\n  annotations: null\n")
    embedded, sched = cluster(tmp_path)
    embedded.apply(list(iter_text(text, "x.yaml")))
    assert "annotations" not in embedded.store.get("Pod", "default/web").manifest["metadata"]
    sched.run_once()
    (start,) = embedded.pod_actions("n0", View())
    assert json.loads(start.pod_json)["metadata"]["annotations"] == {}
    assert Embedded(ClusterCache(), embedded.store).load() == 2  # the pod and its node
