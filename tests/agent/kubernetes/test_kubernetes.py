"""The agent's Kubernetes side — pod inventory, Eviction API, node labels — through the real ``kubernetes``
client against a small API server on a real socket (hack/lib/fake_apiserver.py)."""

from __future__ import annotations

import time

from agent.intents import Evict
from agent.kubernetes.evictor import KubernetesEvictor
from agent.kubernetes.node import NodeTaint
from agent.kubernetes.pods import KubernetesPodSource
from agent.labels import NodeLabels
from hack.lib.fake_apiserver import FakeApiServer, pod
from proto.model import QosLevel
from tests.support.waiting import wait_until


def test_pod_source_lists_then_follows_the_watch_and_relists_after_410() -> None:
    with FakeApiServer() as api:
        api.put_pod(pod("u-web", "web-0", "node-a", qos_class="Burstable", requests={"cpu": "1"}))
        api.put_pod(pod("u-train", "train-0", "node-a", qos_class="BestEffort",
                        annotations={"volcano.sh/qos-level": "BE"}, priority=-10))
        api.put_pod(pod("u-other", "elsewhere-0", "node-b"))
        source = KubernetesPodSource(api.core_v1(), "node-a")
        source.start()
        try:
            assert source.synced.wait(10)
            pods = {p.uid: p for p in source.pods()}
            assert set(pods) == {"u-web", "u-train"}  # only this node's
            assert pods["u-train"].qos_level == QosLevel.BE and pods["u-train"].priority == -10
            assert pods["u-web"].qos_level == QosLevel.LS and pods["u-web"].cpu_request == 1000
            api.put_pod(pod("u-new", "new-0", "node-a", qos_class="Guaranteed", requests={"cpu": "2"}))
            api.delete_pod("default", "web-0")
            api.put_pod(pod("u-train", "train-0", "node-a", qos_class="BestEffort", phase="Succeeded"))
            wait_until(lambda: {p.uid for p in source.pods()} == {"u-new"})  # finished pods leave too
            lists = len(api.requests)
            api.expire_watches()  # the watch ends and its resourceVersion is now too old: 410, then a fresh list
            api.put_pod(pod("u-late", "late-0", "node-a"))
            wait_until(lambda: len(api.requests) >= lists + 2)  # relisted (the list still has the finished pod)
            wait_until(lambda: {p.uid for p in source.pods()} == {"u-new", "u-late"})
            time.sleep(0.2)
            assert {p.uid for p in source.pods()} == {"u-new", "u-late"}
        finally:
            source.stop()


def test_evictor_goes_through_the_eviction_api_and_respects_disruption_budgets() -> None:
    now = [0.0]
    with FakeApiServer() as api:
        api.put_pod(pod("u1", "train-0", "node-a", namespace="ml"))
        api.put_pod(pod("u2", "train-1", "node-a", namespace="ml"))
        api.blocked.add(("ml", "train-1"))
        evictor = KubernetesEvictor(api.core_v1(), retry_after=10, clock=lambda: now[0])
        assert evictor.evict(Evict("u1", "ml", "train-0", "node cpu 97% over 95% for 3 samples", "cpu"))
        assert api.pods[("ml", "train-0")]["metadata"]["deletionTimestamp"]  # terminating: the kubelet's turn
        posts = sum(1 for method, _ in api.requests if method == "POST")
        assert evictor.evict(Evict("u1", "ml", "train-0", "again", "cpu"))  # already asked: no second request
        assert sum(1 for method, _ in api.requests if method == "POST") == posts
        assert not evictor.evict(Evict("u2", "ml", "train-1", "pressure", "cpu"))  # 429: budget holds, try later
        assert ("ml", "train-1") in api.pods
        assert evictor.evict(Evict("u9", "ml", "gone-0", "pressure", "cpu"))  # 404: already gone
        api.put_pod(pod("u3-new", "train-2", "node-a", namespace="ml"))
        assert evictor.evict(Evict("u3-old", "ml", "train-2", "pressure", "cpu"))  # same name, new pod: not ours
        assert ("ml", "train-2") in api.pods


def test_node_labels_are_read_from_the_node_object() -> None:
    with FakeApiServer() as api:
        api.put_node("node-a", {"scoria.io/pool": "latency-critical", "kubernetes.io/hostname": "node-a"})
        labels = NodeLabels(core_v1=api.core_v1(), node_name="node-a")
        assert labels()["scoria.io/pool"] == "latency-critical"
        missing = NodeLabels(core_v1=api.core_v1(), node_name="node-x")
        assert missing() == {}  # 404: no labels, logged, not a crash


def test_node_taint_comes_and_goes_and_keeps_other_taints() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    with FakeApiServer() as api:
        api.put_node("node-a", {}, [gpu])
        taint = NodeTaint(api.core_v1(), "node-a")
        assert taint(True)
        taints = api.nodes["node-a"]["spec"]["taints"]
        assert gpu in taints and any(t["key"] == "volcano.sh/offline-job-evicting" and t["effect"] == "NoSchedule"
                                     for t in taints)
        patches = sum(1 for method, _ in api.requests if method == "PATCH")
        assert taint(True) and sum(1 for method, _ in api.requests if method == "PATCH") == patches  # idempotent
        assert taint(False) and api.nodes["node-a"]["spec"]["taints"] == [gpu]
        assert not NodeTaint(api.core_v1(), "node-x")(True)  # no such node: reported, not raised


def test_node_taint_reads_again_after_a_concurrent_change() -> None:
    with FakeApiServer() as api:
        api.put_node("node-a", {})
        core = api.core_v1()
        real_read = core.read_node
        raced = []

        def read_then_someone_else_writes(name):
            node = real_read(name)
            if not raced:  # between our read and our patch another writer changes the node
                raced.append(1)
                api.put_node("node-a", {"changed": "yes"}, [{"key": "other", "effect": "NoExecute"}])
            return node

        core.read_node = read_then_someone_else_writes
        assert NodeTaint(core, "node-a")(True)
        keys = [t["key"] for t in api.nodes["node-a"]["spec"]["taints"]]
        assert keys == ["other", "volcano.sh/offline-job-evicting"]  # the other writer's taint survived
