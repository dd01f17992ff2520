"""The scheduler in Kubernetes mode, through the real ``kubernetes`` client against hack/lib/fake_apiserver.py.

Informers feed the real cache, the real scheduler cycles, and its effects go
back through the API server: binds, evictions (PodDisruptionBudgets), status
and events, and leader election on a Lease.  (The ``api`` and ``harness``
fixtures are in conftest.py, shared with test_kubernetes_faults.py.)
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from hack.lib.fake_apiserver import FakeApiServer, node
from scheduler.modes.kubernetes.leader import LeaderElector
from tests.support.kube_harness import Harness, serve_kubernetes
from tests.support.waiting import wait_until

PG = "scheduling.volcano.sh/v1beta1"
GANG_CONFIG = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def pending_pod(name: str, *, cpu: str = "1", namespace: str = "default", group: str | None = None,
                priority_class: str | None = None, annotations: dict | None = None, limits: dict | None = None) -> dict:
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if limits:
        resources["limits"] = limits
    spec = {"schedulerName": "scoria", "containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "annotations": ann},
            "spec": spec, "status": {"phase": "Pending"}}


def running_pod(name: str, node_name: str, *, cpu: str = "1", labels: dict | None = None,
                priority_class: str | None = None) -> dict:
    obj = pending_pod(name, cpu=cpu, priority_class=priority_class)
    obj["spec"]["nodeName"] = node_name
    obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def test_pods_submitted_to_the_api_server_get_bound(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(node("n2", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    for i in range(5):
        api.put(pending_pod(f"web-{i}"))
    api.put(pending_pod("other-scheduler") | {"spec": {"schedulerName": "default-scheduler",
                                                        "containers": [{"name": "c", "image": "x"}]}})
    h = harness()
    result = h.cycle()
    assert result.binds == 5
    assert all(h.node_of(f"web-{i}") in ("n1", "n2") for i in range(5))
    assert h.node_of("other-scheduler") is None  # not ours
    assert api.count(verb="create", plural="pods", subresource="binding") == 5
    events = [e for e in api.objects("events") if e["reason"] == "Scheduled"]
    assert len(events) == 5


def test_namespace_labels_reach_the_cache_and_a_namespace_selector_follows_them(api, harness) -> None:
    """Namespaces are informed (labels, kubernetes.io/metadata.name as the API server sets it); relabelling
    one lets a pod whose affinity term selects namespaces by label find the pod it must join."""
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}, labels={"zone": "a"}))
    api.core_v1().create_namespace({"metadata": {"name": "team-b", "labels": {"team": "red"}}})
    db = pending_pod("db", namespace="team-b")
    db["spec"]["nodeName"] = "n1"
    db["status"]["phase"] = "Running"
    db["metadata"]["labels"] = {"app": "db"}
    api.put(db)
    web = pending_pod("web")
    web["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone",
         "namespaceSelector": {"matchLabels": {"team": "blue"}}}]}}
    api.put(web)
    h = harness()
    assert h.cycle().binds == 0
    assert h.cache.namespaces["team-b"].labels == {"team": "red", "kubernetes.io/metadata.name": "team-b"}
    h.api.core_v1().patch_namespace("team-b", {"metadata": {"labels": {"team": "blue"}}})
    wait_until(lambda: h.cache.namespaces["team-b"].labels.get("team") == "blue")
    assert h.cycle().binds == 1 and h.node_of("web") == "n1"
    h.api.remove("namespaces", "team-b")
    wait_until(lambda: "team-b" not in h.cache.namespaces)


def test_a_gang_stays_unbound_until_it_fits_and_says_why(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "train", "namespace": "default"},
             "spec": {"minMember": 3}})
    for i in range(3):
        api.put(pending_pod(f"train-{i}", cpu="2", group="train"))
    h = harness(GANG_CONFIG)
    h.cycle()
    h.cycle()
    assert all(h.node_of(f"train-{i}") is None for i in range(3))
    assert api.count(verb="create", plural="pods", subresource="binding") == 0
    failed = [e for e in api.objects("events") if e["reason"] == "FailedScheduling"]
    assert failed and "3 required members" in failed[0]["message"] or "of 3" in failed[0]["message"]
    group = api.get("podgroups", "train", "default")
    assert group["status"]["phase"] in ("Pending", "Inqueue")
    # no status flood: another cycle that changes nothing writes nothing
    writes = api.count(verb="patch")
    h.cycle()
    assert api.count(verb="patch") == writes
    api.put(node("n2", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))  # now it fits
    wait_until(lambda: "n2" in h.cache.nodes)
    h.cycle()
    h.cycle()
    assert all(h.node_of(f"train-{i}") in ("n1", "n2") for i in range(3))
    wait_until(lambda: api.get("podgroups", "train", "default")["status"]["phase"] == "Running")


NUMA_CONFIG = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: numa-aware}, {name: nodeorder}]
"""


def numa_harness(harness) -> Harness:
    """NUMA-aware scheduling, with node n1 reporting two zones of 4 CPUs."""
    from scheduler.api.loader import node_report_from_doc
    from tests.support.builders import report

    h = harness(NUMA_CONFIG)
    _, r = node_report_from_doc(report("n1", zones=[4, 4]), "test")
    r.identity.sample_time_ns = time.time_ns()
    h.cache.accept_report(r, time.time(), register=False, capacity_key="n1")
    return h


def test_placement_decisions_are_written_before_the_binding(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}))
    api.put(pending_pod("db", cpu="3", limits={"cpu": "3", "memory": "1Gi"},
                        annotations={"volcano.sh/numa-topology-policy": "single-numa-node"}))
    h = numa_harness(harness)
    h.cycle()
    pod = api.get("pods", "db", "default")
    assert pod["spec"]["nodeName"] == "n1" and pod["metadata"]["annotations"]["scoria.io/numa-nodes"] in ("0", "1")
    calls = [(c.verb, c.subresource) for c in api.calls if c.plural == "pods" and c.name == "db"]
    assert calls.index(("patch", None)) < calls.index(("create", "binding"))


def test_a_watch_expiry_loses_nothing_and_counts_nothing_twice(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "64", "memory": "64Gi", "pods": "110"}))
    api.put(running_pod("kept", "n1"))
    api.put(running_pod("goes", "n1"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    pods = next(i for i in h.kube.source.informers if i.kind == "pods")
    lists = pods.lists
    assert api.wait_watching("pods")
    api.fail("GET", "/api/v1/pods", status=503, times=None, watch=True)  # the watch breaks and cannot resume
    api.close_watches()
    api.remove("pods", "goes", "default")   # deleted meanwhile
    api.put(pending_pod("new"))             # created meanwhile
    api.compact()                           # and the history it would resume from is gone
    api.clear_failures()
    wait_until(lambda: pods.lists > lists)  # 410: listed again
    wait_until(lambda: {p.name for p in h.cache.pods.values()} == {"kept", "new"})
    assert sum(1 for p in h.cache.pods.values() if p.name == "kept") == 1
    h.cycle()
    assert h.node_of("new") == "n1"


def test_an_eviction_refused_by_a_disruption_budget_is_not_forced(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "2", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
             "value": 1000})
    api.put(running_pod("guarded", "n1", cpu="2", labels={"app": "guarded"}))
    api.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "guard", "namespace": "default"},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    api.sync_budgets()  # the disruption controller: disruptionsAllowed 0
    assert api.get("poddisruptionbudgets", "guard", "default")["status"]["disruptionsAllowed"] == 0
    api.put(pending_pod("urgent", cpu="2", priority_class="high"))
    h = harness(GANG_CONFIG)
    h.cycle()
    # the budget's 429 is its answer, not overload: one request, undone at once (it was sent five times)
    assert api.count(verb="create", plural="pods", subresource="eviction") == 1
    assert api.get("pods", "guarded", "default") is not None  # the budget held
    wait_until(lambda: "default/guarded" in h.cache.pods and not h.cache.pods["default/guarded"].terminating
               if "default/guarded" in h.cache.pods else any(p.name == "guarded" and not p.terminating
                                                               for p in h.cache.pods.values()))
    assert not h.cache.evicting
    refused = [e for e in api.objects("events") if e["reason"] == "EvictionRefused"]
    assert refused and refused[0]["involvedObject"]["name"] == "guarded"
    assert h.node_of("urgent") is None
    for _ in range(2):  # retried by later cycles, one request each, and never forced
        h.cycle()
    assert [c.status for c in api.calls if c.subresource == "eviction"] == [429, 429, 429]
    assert len([e for e in api.objects("events") if e["reason"] == "EvictionRefused"]) == 1  # said once, not per cycle
    assert not [c for c in api.calls if c.method == "DELETE" and c.plural == "pods"]
    assert not api.get("pods", "guarded", "default")["metadata"].get("deletionTimestamp")
    assert h.node_of("urgent") is None
    budget = api.get("poddisruptionbudgets", "guard", "default")
    api.put({**budget, "spec": {**budget["spec"], "minAvailable": 0}})
    api.sync_budgets()  # the budget allows one disruption now: the next try goes through
    h.cycle()
    assert [c.status for c in api.calls if c.subresource == "eviction"] == [429, 429, 429, 201]
    api.finish_terminating(everything=True)
    wait_until(lambda: not any(p.name == "guarded" for p in h.cache.pods.values()))
    h.cycle()
    assert h.node_of("urgent") == "n1"


def test_an_eviction_refused_by_a_budget_not_yet_processed_does_not_wait_out_its_retry_after(api, harness) -> None:
    """A budget the disruption controller has not seen yet gets 429 with Retry-After 10 (kube's eviction.go).
    The eviction is undone at once and a later cycle tries again; it used to hold a writer for four waits of
    10 s while the victim counted as leaving."""
    api.put(node("n1", allocatable={"cpu": "2", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
             "value": 1000})
    api.put(running_pod("guarded", "n1", cpu="2", labels={"app": "guarded"}))
    api.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",  # fresh: no status yet
             "metadata": {"name": "guard", "namespace": "default"},
             "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    api.put(pending_pod("urgent", cpu="2", priority_class="high"))
    h = harness(GANG_CONFIG)
    began = time.monotonic()
    h.cycle()
    assert time.monotonic() - began < 5
    evictions = [c for c in api.calls if c.subresource == "eviction"]
    assert [c.status for c in evictions] == [429]
    wait_until(lambda: not h.cache.evicting)
    assert api.get("pods", "guarded", "default") is not None and h.node_of("urgent") is None
    api.sync_budgets()  # the controller catches up: one disruption allowed
    h.cycle()
    assert [c.status for c in api.calls if c.subresource == "eviction"] == [429, 201]


def test_leader_failover_hands_over_binding_without_a_double_bind(api) -> None:
    api.put(node("n1", allocatable={"cpu": "64", "memory": "64Gi", "pods": "110"}))
    clocks = {"a": [0.0], "b": [0.0]}
    a = LeaderElector(api.client(), name="scoria", namespace="kube-system", identity="a", lease_duration=3,
                      renew_deadline=2, retry_period=1, clock=lambda: clocks["a"][0])
    b = LeaderElector(api.client(), name="scoria", namespace="kube-system", identity="b", lease_duration=3,
                      renew_deadline=2, retry_period=1, clock=lambda: clocks["b"][0])
    assert a.step() and a.is_leader
    assert not b.step() and not b.is_leader  # a holds it
    for t in (1.0, 2.0):  # a stops renewing (as if partitioned); b sees the same record for 3s
        clocks["b"][0] = t
        assert not b.step()
    clocks["a"][0] = 2.5
    assert not a.is_leader  # past its renew deadline: a stopped leading before b may take over
    clocks["b"][0] = 3.5
    assert b.step() and b.is_leader
    lease = api.get("leases", "scoria", "kube-system")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    clocks["a"][0] = 3.0
    assert not a.step()  # a comes back: the lease is b's now


def test_only_the_leader_binds_and_a_pod_is_bound_once(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "64", "memory": "64Gi", "pods": "110"}))
    for i in range(3):
        api.put(pending_pod(f"p-{i}"))
    first = harness(leader_elect=True, lease_namespace="kube-system", lease_duration=3, renew_deadline=2,
                    retry_period=0.5)
    wait_until(first.kube.leading)
    second = harness(leader_elect=True, lease_namespace="kube-system", lease_duration=3, renew_deadline=2,
                     retry_period=0.5)
    time.sleep(1.0)
    assert not second.kube.leading() and second.kube.ready()  # synced: ready to take over
    first.cycle()
    assert api.count(verb="create", plural="pods", subresource="binding") == 3
    first.stop.set()  # the leader shuts down: it hands the lease back
    first.kube.close()
    wait_until(second.kube.leading, timeout=10)
    api.put(pending_pod("after"))
    wait_until(lambda: any(p.name == "after" for p in second.cache.pods.values()))
    second.cycle()
    assert second.node_of("after") == "n1"
    assert api.count(verb="create", plural="pods", subresource="binding") == 4  # nothing bound twice


def test_bind_refused_by_the_server_is_undone_in_the_cache(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    api.fail("POST", "/api/v1/namespaces/default/pods/p/binding", status=403)  # refused (a 5xx is retried first)
    h.cycle()
    pod = next(p for p in h.cache.pods.values() if p.name == "p")
    assert not pod.node_name  # pending again
    h.cycle()
    assert h.node_of("p") == "n1"


def test_a_404_from_binding_a_pod_that_is_gone_forgets_it(api, harness) -> None:
    """Issue 16 item 3: a 404 was read as "pod gone" but the pod stayed in the cache and was bound again every
    cycle, silently.  Now the pod is read back: gone (404 again) means forgotten, no further binds."""
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    api.fail("POST", "/api/v1/namespaces/default/pods/p/binding", status=404, times=None)
    api.fail("GET", "/api/v1/namespaces/default/pods/p", status=404, times=None, watch=False)
    for _ in range(3):
        h.cycle()
    assert api.count(plural="pods", verb="create", subresource="binding") == 1
    assert not [p for p in h.cache.pods.values() if p.name == "p"]


def _recreated_while_the_watch_is_away(api: FakeApiServer, harness, again: dict):
    """Pod ``p`` pending on a node with room and seen by a harness; then the pods watch goes away (every
    attempt refused) and ``p`` is deleted and ``again`` created under its name.  The harness, and ``p`` as its
    cache still holds it."""
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    (old,) = [p for p in h.cache.pods.values() if p.name == "p"]
    api.fail("GET", "/api/v1/pods", status=503, times=None, watch=True)  # the watch is away
    api.close_watches()
    core = api.core_v1()
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    core.create_namespaced_pod("default", again)
    return h, old


def test_a_409_for_a_pod_recreated_under_its_name_forgets_the_old_one(api, harness) -> None:
    """Issue 16: a stale uid (the pod deleted and recreated while the watch was away) gets 409 from binding;
    the pod is read back, the old uid forgotten, and the new pod, once the watch brings it, bound once."""
    h, old = _recreated_while_the_watch_is_away(api, harness, pending_pod("p"))
    h.cycle()  # binds the old uid: 409
    assert old.uid not in h.cache.pods
    api.clear_failures()
    wait_until(lambda: [p for p in h.cache.pods.values() if p.name == "p"])
    h.cycle()
    assert h.node_of("p") == "n1"
    refused = [c for c in api.calls if c.subresource == "binding" and c.status == 409]
    assert len(refused) == 1


def test_binding_a_pod_recreated_with_a_scheduling_gate_is_refused_once_and_not_retried(api, harness) -> None:
    """Issue 16: the one way a gated pod gets a bind on a real server (gates can only be removed once a pod
    exists) is a stale cache: the pod deleted and recreated gated under its name while the watch was away
    (a StatefulSet's pod, gated by a queueing controller).  The bind meets 409 once; the pod is read back and
    the old one forgotten, so no cycle binds it again while the watch is away; the gated pod, once seen, is
    never bound and is told why; with its gate removed it is bound once."""
    gated = pending_pod("p")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/admission"}]
    h, old = _recreated_while_the_watch_is_away(api, harness, gated)
    for _ in range(3):  # the old pod is bound once (409: the Binding's uid), then forgotten: no retry storm
        h.cycle()
    assert [c.status for c in api.calls if c.subresource == "binding"] == [409]
    assert old.uid not in h.cache.pods
    api.clear_failures()
    wait_until(lambda: [p for p in h.cache.pods.values() if p.name == "p" and p.scheduling_gates])
    for _ in range(3):
        h.cycle()
    assert [c.status for c in api.calls if c.subresource == "binding"] == [409]  # gated: never sent
    told = [e for e in api.objects("events") if e["reason"] == "FailedScheduling"
            and e["involvedObject"]["uid"] != old.uid]
    assert len(told) == 1 and "waiting for scheduling gates: [example.com/admission]" in told[0]["message"]
    api.core_v1().patch_namespaced_pod("p", "default", {"spec": {"schedulingGates": None}})  # admitted
    wait_until(lambda: [p for p in h.cache.pods.values() if p.name == "p" and not p.scheduling_gates])
    h.cycle()
    assert h.node_of("p") == "n1"
    assert [c.status for c in api.calls if c.subresource == "binding"] == [409, 201]


def test_a_404_from_binding_a_pod_still_there_is_said_and_retried(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    api.fail("POST", "/api/v1/namespaces/default/pods/p/binding", status=404)
    h.cycle()
    failed = [e for e in api.objects("events") if e["reason"] == "FailedScheduling"]
    assert failed and "404" in failed[0]["message"] and "still there" in failed[0]["message"]
    h.cycle()
    assert h.node_of("p") == "n1"


def test_agent_publishes_batch_resources_and_taints_its_node(api) -> None:
    from agent.kubernetes.node import NodeResources, NodeTaint

    api.put(node("n1", allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}))
    core = api.core_v1()
    publish = NodeResources(core, "n1")
    assert publish(3500, 8 * 2**30)
    status = api.get("nodes", "n1")["status"]
    assert status["allocatable"]["kubernetes.io/batch-cpu"] == "3500"
    assert status["capacity"]["kubernetes.io/batch-memory"] == str(8 * 2**30)
    assert status["allocatable"]["cpu"] == "8"  # the rest of the status is untouched
    patches = api.count(verb="patch", plural="nodes")
    assert publish(3500, 8 * 2**30) and api.count(verb="patch", plural="nodes") == patches  # unchanged: no write
    api.fail("PATCH", "/api/v1/nodes/n1/status", status=503)
    assert not publish(2000, 8 * 2**30)
    assert publish(2000, 8 * 2**30) and api.get("nodes", "n1")["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "2000"
    assert NodeTaint(core, "n1")(True)
    assert any(t["key"] == "volcano.sh/offline-job-evicting" for t in api.get("nodes", "n1")["spec"]["taints"])


def test_the_leader_labels_its_pod_so_the_agents_service_finds_it(api, harness, monkeypatch) -> None:
    api.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scheduler-0", "namespace": "kube-system"},
             "spec": {"containers": [{"name": "s", "image": "scoria"}]}, "status": {"phase": "Running"}})
    monkeypatch.setenv("POD_NAME", "scheduler-0")
    h = harness(leader_elect=True, lease_namespace="kube-system", lease_duration=3, renew_deadline=2,
                retry_period=0.5)
    wait_until(h.kube.leading)
    wait_until(lambda: (api.get("pods", "scheduler-0", "kube-system")["metadata"].get("labels") or {})
               .get("scoria.io/leader") == "true")
    assert h.kube.ready()
    h.stop.set()
    h.kube.close()  # shutting down: the lease is handed back and the label taken off
    labels = api.get("pods", "scheduler-0", "kube-system")["metadata"].get("labels") or {}
    assert "scoria.io/leader" not in labels
    lease = api.get("leases", "scoria-scheduler", "kube-system")
    assert lease["spec"]["holderIdentity"] in ("", None)


def test_load_history_survives_a_restart_on_the_nodes_themselves(api) -> None:
    from scheduler.history.learning import LoadHistory, unix_hour, week_of
    from scheduler.history.store import WeekRecord
    from scheduler.modes.kubernetes.history_store import ANNOTATION, NodeAnnotationHistoryStore, decode

    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi"}))
    api.put(node("n2", allocatable={"cpu": "4", "memory": "16Gi"}))
    week = week_of(unix_hour(time.time())) - 1
    cpu, memory = bytes(range(168)), bytes([255] * 168)
    store = NodeAnnotationHistoryStore(api.client())
    store.save([WeekRecord("n1", week, cpu, memory), WeekRecord("n1", week - 9, cpu, cpu)], forget_before=week - 4)
    annotation = api.get("nodes", "n1")["metadata"]["annotations"][ANNOTATION]
    assert len(annotation) < 1500  # a kilobyte or so per node
    assert api.get("nodes", "n1")["status"]["allocatable"]["cpu"] == "4"  # nothing else of the node touched
    api.put(node("n2", allocatable={"cpu": "4", "memory": "16Gi"}) | {
        "metadata": {"name": "n2", "labels": {}, "annotations": {ANNOTATION: "not a history"}}})
    fresh = NodeAnnotationHistoryStore(api.client())  # a restarted scheduler
    records = fresh.load()  # n2's unreadable annotation is skipped, not fatal
    assert records == [WeekRecord("n1", week, cpu, memory)]  # the old week was forgotten
    history = LoadHistory(weeks=4)
    assert history.restore(records, time.time()) == 1
    api.fail("PATCH", "/api/v1/nodes/n1", status=503)
    fresh.save([WeekRecord("n1", week, cpu, cpu), WeekRecord("gone", week, cpu, cpu)])  # no raise: kept for later
    assert fresh._unwritten == {"n1"}  # the deleted node is forgotten, the failed one kept
    patches = api.count(verb="patch", plural="nodes")
    fresh.save([])  # the next save writes it, and only it
    assert api.count(verb="patch", plural="nodes") == patches + 1 and not fresh._unwritten
    assert decode(api.get("nodes", "n1")["metadata"]["annotations"][ANNOTATION])[week] == (cpu, cpu)


def test_podgroups_of_operators_are_admitted_before_their_pods_exist(api, harness) -> None:
    """Kubeflow, KubeRay and Spark create the PodGroup and wait for Inqueue before creating pods."""
    api.put(node("n1", allocatable={"cpu": "8", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "tfjob", "namespace": "default"},
             "spec": {"minMember": 2, "minResources": {"cpu": "4"}}})
    h = harness("""
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: overcommit}, {name: predicates}, {name: proportion}, {name: nodeorder}]
""")
    assert h.kube.source.wait_synced(10)
    h.cycle()
    assert api.get("podgroups", "tfjob", "default")["status"]["phase"] == "Inqueue"
    for i in range(2):  # the operator sees Inqueue and creates the pods
        api.put(pending_pod(f"tfjob-{i}", cpu="2", group="tfjob"))
    wait_until(lambda: sum(1 for p in h.cache.pods.values() if p.name.startswith("tfjob-")) == 2)
    h.cycle()
    assert all(h.node_of(f"tfjob-{i}") == "n1" for i in range(2))


def test_serve_in_kubernetes_mode_binds_through_the_api_server(api, tmp_path) -> None:
    """The real command line, as the Deployment runs it, against the fake API server."""
    import signal

    from hack.lib.processes import wait_port

    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("web-0"))
    proc = serve_kubernetes(tmp_path, api.url)
    try:
        wait_port(tmp_path / "port", proc, 30)
        wait_until(lambda: (api.get("pods", "web-0", "default") or {}).get("spec", {}).get("nodeName") == "n1", 30)
        assert api.get("leases", "scoria-scheduler", "kube-system")["spec"]["holderIdentity"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert not api.get("leases", "scoria-scheduler", "kube-system")["spec"].get("holderIdentity")  # handed back


def test_kubernetes_mode_counts_what_it_writes(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("p"))
    api.put(pending_pod("huge", cpu="64"))
    h = harness()
    h.cycle()
    registry = h.kube.effects.metrics.registry
    sample = registry.get_sample_value
    assert sample("scoria_scheduler_kube_writes_total", {"kind": "bind", "result": "ok"}) == 1
    assert sample("scoria_scheduler_kube_writes_total", {"kind": "event", "result": "ok"}) >= 2  # Scheduled, Failed
    assert sample("scoria_scheduler_kube_lists_total", {"kind": "pods"}) == 1
    assert sample("scoria_scheduler_leader") == 1  # no election: this replica schedules


# -- found in review: each failed before its fix ----------------------------------------------------------------
def test_another_schedulers_pods_get_no_status_and_no_events_from_us(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    other = pending_pod("other")
    other["spec"]["schedulerName"] = "default-scheduler"
    api.put(other)
    h = harness()
    assert h.kube.source.wait_synced(10)
    h.cycle()
    assert not api.get("pods", "other", "default")["status"].get("conditions")
    assert not [e for e in api.objects("events") if e["involvedObject"]["name"] == "other"]
    assert api.count(verb="patch", plural="pods") == 0


def test_a_status_write_that_failed_is_written_later(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "8", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"},
             "spec": {"minMember": 1}})
    h = harness(GANG_CONFIG)
    assert h.kube.source.wait_synced(10)
    api.fail("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/g", status=500, times=1)
    h.cycle()
    assert h.kube.effects.backlog() == 1  # failed: queued again
    stop = threading.Event()  # the loop has nothing pending, but flushes what is left
    loop = threading.Thread(target=h.scheduler.run, kwargs={"interval": 0.05, "stop": stop, "active": h.kube.leading})
    loop.start()
    try:
        wait_until(lambda: (api.get("podgroups", "g", "default").get("status") or {}).get("phase") == "Inqueue")
        wait_until(lambda: h.kube.effects.backlog() == 0)  # a write still in its back-off goes out too
    finally:
        stop.set()
        loop.join()


def test_queue_allocation_drops_resources_no_longer_held(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "8", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"}))
    api.put({"apiVersion": PG, "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}})
    gpu = pending_pod("gpu", annotations={"scheduling.volcano.sh/queue-name": "q"})
    gpu["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    api.put(gpu)
    h = harness()
    h.cycle()
    wait_until(lambda: "nvidia.com/gpu" in (api.get("queues", "q").get("status") or {}).get("allocated", {}))
    api.remove("pods", "gpu", "default")
    wait_until(lambda: not any(p.name == "gpu" for p in h.cache.pods.values()))
    h.cycle()
    wait_until(lambda: "nvidia.com/gpu" not in api.get("queues", "q")["status"].get("allocated", {}))


def test_decisions_are_not_written_onto_a_pod_that_changed_meanwhile(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}))
    api.put(pending_pod("db", cpu="3", annotations={"volcano.sh/numa-topology-policy": "single-numa-node"}))
    h = numa_harness(harness)
    assert h.kube.source.wait_synced(10) and api.wait_watching("pods")
    api.fail("GET", "/api/v1/pods", status=503, times=None, watch=True)  # the cache misses what happens next
    api.close_watches()
    time.sleep(0.3)
    core = api.core_v1()  # a previous leader placed it a moment ago
    core.patch_namespaced_pod("db", "default", {"metadata": {"annotations": {"scoria.io/numa-nodes": "0,1"}}})
    core.create_namespaced_pod_binding("db", "default", {"apiVersion": "v1", "kind": "Binding", "metadata": {
        "name": "db"}, "target": {"kind": "Node", "name": "n1"}}, _preload_content=False)
    h.cycle()
    api.clear_failures()
    assert api.get("pods", "db", "default")["metadata"]["annotations"]["scoria.io/numa-nodes"] == "0,1"


def test_a_bind_whose_answer_was_lost_is_looked_up_not_undone(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("p", cpu="3"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    effects = h.kube.effects
    real = effects.core.create_namespaced_pod_binding

    def lost(*args, **kwargs):
        real(*args, **kwargs)  # the server binds it...
        raise ConnectionResetError("connection reset by peer")  # ...but the answer never comes

    effects.core.create_namespaced_pod_binding = lost
    h.cycle()
    effects.core.create_namespaced_pod_binding = real
    assert next(p for p in h.cache.pods.values() if p.name == "p").node_name == "n1"
    api.put(pending_pod("q", cpu="3"))
    wait_until(lambda: any(p.name == "q" for p in h.cache.pods.values()))
    h.cycle()
    assert h.node_of("q") is None  # n1 is full: p counts


def test_a_pod_deleted_while_the_cycle_runs_does_not_stop_it(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put(pending_pod("a"))
    api.put(pending_pod("b"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    gone = next(p for p in h.cache.pods.values() if p.name == "a")
    real_bind = h.cache.bind

    def delete_first(uid, *args, **kwargs):  # "a" is deleted between the snapshot and its bind
        if uid == gone.uid:
            h.cache.remove_pod(uid)
        return real_bind(uid, *args, **kwargs)

    h.cache.bind = delete_first
    h.cycle()
    assert h.node_of("b") == "n1" and h.node_of("a") is None


def test_a_bound_pod_with_unreadable_annotations_still_counts(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    bad = running_pod("old", "n1", cpu="3")
    bad["metadata"]["annotations"] = {"volcano.sh/preemptable": "yes"}
    api.put(bad)
    api.put(pending_pod("new", cpu="3"))
    h = harness()
    h.cycle()
    assert h.node_of("new") is None  # n1 has 1 CPU left: the running pod is counted


def test_shutdown_hands_the_lease_back_only_after_the_binds_went_out(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "64", "memory": "64Gi", "pods": "110"}))
    for i in range(10):
        api.put(pending_pod(f"p-{i}"))
    h = harness(leader_elect=True, lease_namespace="kube-system", lease_duration=3, renew_deadline=2,
                retry_period=0.5, qps=20, burst=1)
    wait_until(h.kube.leading)
    h.scheduler.run_once()  # ten binds queued behind the rate limiter
    h.stop.set()
    h.kube.close()
    calls = [(c.plural, c.verb, c.subresource) for c in api.calls if c.method != "GET"]
    released = max(i for i, c in enumerate(calls) if c[0] == "leases")
    assert calls.count(("pods", "create", "binding")) == 10
    assert max(i for i, c in enumerate(calls) if c == ("pods", "create", "binding")) < released


def test_shutdown_writes_the_statuses_of_the_last_cycle_before_handing_the_lease_back(api, harness) -> None:
    """SIGTERM right after a cycle: its status writes (here every pod's PodScheduled=False) go out, then the
    Lease is handed back."""
    api.put(node("n1", allocatable={"cpu": "1", "memory": "16Gi", "pods": "110"}))
    for i in range(5):
        api.put(pending_pod(f"big-{i}", cpu="4"))
    h = harness(leader_elect=True, lease_namespace="kube-system", lease_duration=3, renew_deadline=2,
                retry_period=0.5, qps=20, burst=1)
    wait_until(h.kube.leading)
    h.scheduler.run_once()  # no drain: the writes wait for the rate limiter
    h.stop.set()
    h.kube.close()
    for obj in api.objects("pods"):
        assert [c["reason"] for c in obj["status"].get("conditions") or [] if c["type"] == "PodScheduled"] == [
            "Unschedulable"], obj["metadata"]["name"]
    calls = [(c.plural, c.verb, c.subresource) for c in api.calls if c.method != "GET"]
    released = max(i for i, c in enumerate(calls) if c[0] == "leases")
    assert calls.count(("pods", "patch", "status")) == 5
    assert max(i for i, c in enumerate(calls) if c == ("pods", "patch", "status")) < released


def test_shutdown_does_not_wait_for_a_quiet_watch() -> None:
    """Issue 16 item 1: on a real cluster a watch of PriorityClasses or Queues stays silent for a minute
    or more; stopping must not wait for its next byte (it waited for the 330 s read timeout)."""
    with FakeApiServer(watch_cap=None) as quiet:  # watches stay open and silent until their timeout
        h = Harness(quiet)
        assert all(quiet.wait_watching(plural) for plural in ("pods", "nodes", "priorityclasses"))
        t0 = time.monotonic()
        h.close()
        took = time.monotonic() - t0
        assert took < 2, f"stopping took {took:.1f}s"
        wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("informer-")], 5)


def test_sigterm_exits_at_once_while_every_watch_is_quiet(tmp_path) -> None:
    """The Deployment's 30 s grace period must never run out: SIGTERM with every watch silent exits 0
    within 2 s, the lease handed back (issue 16 item 1)."""
    def quiet_watches(quiet: FakeApiServer) -> None:
        assert quiet.wait_watching("priorityclasses")
        time.sleep(0.5)  # the watches are open and nothing is happening

    with FakeApiServer(watch_cap=None) as quiet:
        _sigterm_once_leading(tmp_path, quiet, quiet_watches)


def _sigterm_once_leading(tmp_path, api: FakeApiServer, meanwhile) -> None:
    """``serve --kubernetes`` against ``api``; once it holds the lease, ``meanwhile(api)``; then SIGTERM: it
    exits 0 within 2 s and the lease is handed back."""
    from hack.lib.processes import sigterm_timed, wait_port

    proc = serve_kubernetes(tmp_path, api.url)
    try:
        wait_port(tmp_path / "port", proc, 30)
        wait_until(lambda: (api.get("leases", "scoria-scheduler", "kube-system") or {})
                   .get("spec", {}).get("holderIdentity"), 30)
        meanwhile(api)
        err, took = sigterm_timed(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert took < 2, f"SIGTERM took {took:.1f}s to exit"
    assert not api.get("leases", "scoria-scheduler", "kube-system")["spec"].get("holderIdentity")


INFORMED = ("/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces", "/apis/scheduling.volcano.sh/",
            "/apis/scheduling.k8s.io/", "/apis/policy/")  # what the informers list and watch (not the lease)


def _stall(api: FakeApiServer, requests: str) -> None:
    """The API server stops answering the informers' ``requests`` ("watches" or "lists") and every informer
    is made to ask again: each ends up inside a request that gets no answer for 30 s (the last of them may be
    slow to ask on a busy machine; the first must still be waiting then)."""
    for prefix in INFORMED:
        api.fail("GET", prefix, status=503, times=None, watch=requests == "watches", delay=30)
    asked = len(api.calls)
    if requests == "watches":
        api.close_watches()  # every informer watches again
    else:
        # a write none of them sees (no scheduler informer watches ConfigMaps), then the history gone: 410, list again
        api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "moved-on", "namespace": "default"}})
        api.expire_watches()
    scheduler_kinds = {"namespaces", "pods", "nodes", "podgroups", "queues", "priorityclasses",
                       "poddisruptionbudgets"}  # one per scheduler informer (the controllers' have their own)
    def asked_again() -> set[str]:
        return {c.plural for c in api.calls[asked:] if c.method == "GET"
                and c.verb == ("watch" if requests == "watches" else "list")}
    deadline = time.monotonic() + 25
    while not scheduler_kinds <= asked_again():
        assert time.monotonic() < deadline, f"not asked again: {sorted(scheduler_kinds - asked_again())}"
        time.sleep(0.02)


@pytest.mark.parametrize("requests", ["watches", "lists"])
def test_shutdown_does_not_wait_for_requests_the_server_does_not_answer(requests) -> None:
    """Whatever the watches are doing: with every informer inside a watch being opened, or a list, that the
    server does not answer, stopping takes under 2 s (it waited 2 s per informer: 12 s)."""
    with FakeApiServer() as slow:
        h = Harness(slow)
        assert all(slow.wait_watching(plural) for plural in ("pods", "nodes", "priorityclasses", "namespaces"))
        _stall(slow, requests)
        time.sleep(0.2)
        t0 = time.monotonic()
        h.close()
        took = time.monotonic() - t0
        assert took < 2, f"stopping took {took:.1f}s"


def test_sigterm_exits_at_once_while_the_server_does_not_answer_the_watches(tmp_path) -> None:
    """SIGTERM with every watch being opened and unanswered: exit 0 within 2 s, the lease handed back."""
    def unanswered_watches(slow: FakeApiServer) -> None:
        assert all(slow.wait_watching(plural) for plural in ("pods", "nodes", "priorityclasses", "namespaces"))
        _stall(slow, "watches")
        time.sleep(0.2)

    with FakeApiServer() as slow:
        _sigterm_once_leading(tmp_path, slow, unanswered_watches)


def test_a_renewal_counts_from_when_it_was_asked(api) -> None:
    now = [0.0]
    a = LeaderElector(api.client(), name="l", namespace="kube-system", identity="a", clock=lambda: now[0])
    assert a.step()
    real = a.api.replace_namespaced_lease

    def slow(*args, **kwargs):
        out = real(*args, **kwargs)
        now[0] += 20.0  # the answer took 20 s: others may have taken over meanwhile
        return out

    a.api.replace_namespaced_lease = slow
    now[0] = 1.0
    assert not a.step() and not a.is_leader


def test_the_leader_label_is_retried_and_a_stale_one_removed(api, harness, monkeypatch) -> None:
    api.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sched-0", "namespace": "kube-system",
                                                             "labels": {"scoria.io/leader": "true"}},
             "spec": {"containers": [{"name": "s", "image": "x"}]}, "status": {"phase": "Running"}})
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",  # another replica holds the lease
             "metadata": {"name": "scoria-scheduler", "namespace": "kube-system"},
             "spec": {"holderIdentity": "sched-1", "leaseDurationSeconds": 60, "renewTime": stamp,
                      "acquireTime": stamp}})
    monkeypatch.setenv("POD_NAME", "sched-0")
    h = harness(leader_elect=True, lease_namespace="kube-system", retry_period=0.2, renew_deadline=1,
                lease_duration=60)
    labels = lambda: api.get("pods", "sched-0", "kube-system")["metadata"].get("labels") or {}  # noqa: E731
    wait_until(lambda: "scoria.io/leader" not in labels())  # left over from an earlier life: taken off
    assert not h.kube.leading()
    api.remove("leases", "scoria-scheduler", "kube-system")
    api.fail("PATCH", "/api/v1/namespaces/kube-system/pods/sched-0", status=503, times=1)
    wait_until(h.kube.leading)
    wait_until(lambda: labels().get("scoria.io/leader") == "true")  # the first try failed; the next worked


def test_batch_resources_are_published_again_after_a_while(api) -> None:
    from agent.kubernetes.node import NodeResources

    api.put(node("n1", allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}))
    now = [0.0]
    publish = NodeResources(api.core_v1(), "n1", refresh=300, clock=lambda: now[0])
    assert publish(1000, 2**30)
    api.put(node("n1", allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}))  # the node registered again
    assert publish(1000, 2**30)
    assert "kubernetes.io/batch-cpu" not in api.get("nodes", "n1")["status"]["allocatable"]  # not yet
    now[0] = 301.0
    assert publish(1000, 2**30)
    assert api.get("nodes", "n1")["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "1000"


def test_cycles_do_not_wait_for_status_writes(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "1", "memory": "16Gi", "pods": "110"}))
    for i in range(20):
        api.put(pending_pod(f"big-{i}", cpu="4"))  # unschedulable: 20 conditions and 20 events to write
    h = harness(qps=5, burst=1)
    assert h.kube.source.wait_synced(10)
    began = time.monotonic()
    h.scheduler.run_once()
    assert time.monotonic() - began < 1.0  # the writes go on behind it, at 5 a second
    assert h.kube.effects.drain(30)


def test_a_preemptor_waits_for_its_terminating_victim_and_nothing_is_double_booked(api, harness) -> None:
    """Issue 16: on a real server an evicted pod stays, Terminating, until its kubelet removes it.  The
    preemptor must not be bound onto the node while the victim still holds it, and is bound once it is gone."""
    api.put(node("n1", allocatable={"cpu": "2", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
             "value": 1000})
    api.put(running_pod("victim", "n1", cpu="2"))
    api.put(pending_pod("urgent", cpu="2", priority_class="high"))
    h = harness(GANG_CONFIG)
    h.cycle()
    assert api.count(verb="create", plural="pods", subresource="eviction") == 1
    assert api.get("pods", "victim", "default")["metadata"]["deletionTimestamp"]  # Terminating, still there
    wait_until(lambda: any(p.name == "victim" and p.terminating for p in h.cache.pods.values()))
    for _ in range(3):
        h.cycle()
    assert h.node_of("urgent") is None  # the victim still holds n1: no double booking
    assert api.count(verb="create", plural="pods", subresource="eviction") == 1  # and no second eviction
    api.finish_terminating(everything=True)  # the kubelet is done with it
    wait_until(lambda: not any(p.name == "victim" for p in h.cache.pods.values()))
    h.cycle()
    assert h.node_of("urgent") == "n1"
