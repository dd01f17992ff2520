"""Kubernetes mode under API faults, through the real client against hack/lib/fake_apiserver.py.

The API server restarting (every watch broken at once, requests refused, then 410s), writes meeting
5xx, timeouts and 429 with ``Retry-After``, and leader election through failed renewals: nothing is
lost or doubled in the cache, no write is dropped, and no two replicas bind at once.  Namespaces that
cannot be listed hold back only the pods whose affinity terms select namespaces by label.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from hack.lib.fake_apiserver import FakeApiServer, node
from scheduler.modes.kubernetes import apieffects
from scheduler.modes.kubernetes.leader import LeaderElector
from scheduler.modes.kubernetes.ratelimit import RateLimiter
from tests.scheduler.modes.test_kubernetes import GANG_CONFIG, PG, pending_pod, running_pod
from tests.support.kube_harness import Harness
from tests.support.waiting import wait_until

BIND = "/api/v1/namespaces/default/pods/{}/binding"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/scoria"


def big_node(name: str, cpu: str = "64") -> dict:
    return node(name, allocatable={"cpu": cpu, "memory": "64Gi", "pods": "110"})


def binds_of(api: FakeApiServer, name: str) -> list[int]:
    """The status of every binding request for pod ``name`` (0: dropped without an answer)."""
    return [c.status for c in api.calls if c.subresource == "binding" and c.name == name]


def server_view(api: FakeApiServer) -> dict[str, set]:
    return {"pods": {(o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["uid"],
                      o["spec"].get("nodeName") or "") for o in api.objects("pods")},
            "nodes": {o["metadata"]["name"] for o in api.objects("nodes")},
            "podgroups": {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in api.objects("podgroups")},
            "queues": {o["metadata"]["name"] for o in api.objects("queues")}}


def cache_view(h: Harness) -> dict[str, set]:
    with h.cache.lock:
        return {"pods": {(p.namespace, p.name, p.uid, p.node_name or "") for p in h.cache.pods.values()},
                "nodes": set(h.cache.nodes),
                "podgroups": set(h.cache.podgroups),
                "queues": {k for k, q in h.cache.queues.items() if not q.implicit}}


def restart(api: FakeApiServer) -> None:
    """The API server goes away: every request is refused (dropped), every open connection breaks."""
    api.fail(None, "/", status=0, times=None)
    for sock in list(api._sockets):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    api.close_watches()


# -- namespaces that cannot be listed ------------------------------------------------------------------------
def _zone_node(name: str, zone: str) -> dict:
    return node(name, allocatable={"cpu": "8", "memory": "16Gi", "pods": "110"}, labels={"zone": zone})


def _with_term(obj: dict, kind: str, app: str, namespace_selector: dict) -> dict:
    obj["spec"]["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "zone",
         "namespaceSelector": {"matchLabels": namespace_selector}}]}}
    return obj


def condition(api: FakeApiServer, name: str) -> dict:
    """The PodScheduled condition of pod default/``name`` as the API server holds it."""
    pod = api.get("pods", name, "default") or {}
    return next(c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled")


def test_namespaces_not_listed_hold_back_only_the_pods_that_select_them(api, harness) -> None:
    """The namespaces list fails: scheduling starts anyway (ready at once, not after the sync timeout); a pod
    whose term selects namespaces by label waits with the reason in its condition and event, a placed pod's
    required anti-affinity doing so blocks, other pods bind; once the list succeeds, the waiting pods bind."""
    api.put(_zone_node("n1", "a"))
    api.put(_zone_node("n2", "b"))
    api.put_namespace("team-b", {"team": "blue"})
    db = running_pod("db", "n1", labels={"app": "db"})
    db["metadata"]["namespace"] = "team-b"
    api.put(db)
    api.put(_with_term(running_pod("guard", "n1"), "podAntiAffinity", "lonely", {"team": "red"}))
    api.put(_with_term(pending_pod("web"), "podAffinity", "db", {"team": "blue"}))
    lonely = pending_pod("lonely")
    lonely["metadata"]["labels"] = {"app": "lonely"}
    lonely["spec"]["nodeSelector"] = {"zone": "a"}
    api.put(lonely)
    api.put(pending_pod("plain"))
    # every list of namespaces fails (GETs under /api/v1/namespaces/... are not asked for here)
    api.fail("GET", "/api/v1/namespaces", status=500, times=None, watch=False)
    h = harness(namespaces=False, sync_timeout=30)
    assert h.kube.ready() and not h.cache.namespaces_known  # started without them
    h.cycle()
    assert h.node_of("plain") in ("n1", "n2")
    assert h.node_of("web") is None and h.node_of("lonely") is None
    scheduled = condition(api, "web")
    assert scheduled["status"] == "False" and "namespaces are not listed yet" in scheduled["message"], scheduled
    assert any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "web"
               and "namespaces are not listed yet" in e["message"] for e in api.objects("events"))
    assert "didn't satisfy existing pods anti-affinity rules" in condition(api, "lonely")["message"]
    assert api.count(verb="list", plural="namespaces") >= 1
    api.clear_failures()
    wait_until(lambda: h.cache.namespaces_known, timeout=40)  # the informer's backoff, then its list
    assert h.cache.namespaces["team-b"].labels["team"] == "blue"
    h.cycle()
    assert h.node_of("web") == "n1"  # with the db of a team=blue namespace
    assert h.node_of("lonely") == "n1"  # default is not team=red: the guard's term does not select it


# -- the API server restarting ------------------------------------------------------------------------------
def test_an_api_server_restart_relists_with_nothing_lost_or_doubled(api, harness) -> None:
    api.put(big_node("n1"))
    api.put(big_node("n2"))
    api.put({"apiVersion": PG, "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}})
    api.put({"apiVersion": PG, "kind": "Queue", "metadata": {"name": "old"}, "spec": {"weight": 1}})
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"},
             "spec": {"minMember": 1}})
    api.put(running_pod("kept", "n1"))
    api.put(running_pod("goes", "n1"))
    api.put(running_pod("renamed", "n2"))
    api.put(pending_pod("early"))
    h = harness(GANG_CONFIG)
    assert h.kube.source.wait_synced(10)
    for kind in ("pods", "nodes", "queues", "podgroups"):
        assert api.wait_watching(kind)
    lists = {inf.kind: inf.lists for inf in h.kube.source.informers}
    restart(api)
    # while it is away: a cycle binds "early" (no answer: retried, then looked up, then undone), and the
    # world changes behind the informers' backs
    h.cycle()
    assert next(p for p in h.cache.pods.values() if p.name == "early").node_name == ""  # undone, not lost
    api.remove("pods", "goes", "default")
    api.remove("pods", "renamed", "default")
    api.put(running_pod("renamed", "n1"))  # the same name, another uid
    api.put(pending_pod("late"))
    api.remove("nodes", "n2")
    api.put(big_node("n3"))
    api.remove("queues", "old")
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "h", "namespace": "default"},
             "spec": {"minMember": 1}})
    api.compact()  # it comes back with its watch history gone: every watch gets 410
    api.clear_failures()
    wait_until(lambda: all(inf.lists > lists[inf.kind] for inf in h.kube.source.informers), timeout=20)
    wait_until(lambda: cache_view(h) == server_view(api), timeout=10)
    for inf in h.kube.source.informers:  # each informer's own map: the server's objects, each version once
        if inf.kind in ("pods", "nodes", "queues", "podgroups"):
            assert {k: v["metadata"]["resourceVersion"] for k, v in inf.known.items()} == {
                (f"{o['metadata']['namespace']}/{o['metadata']['name']}" if o["metadata"].get("namespace")
                 else o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in api.objects(inf.kind)}
    h.cycle()
    h.cycle()
    assert h.node_of("early") in ("n1", "n3") and h.node_of("late") in ("n1", "n3")
    for name in ("early", "late"):
        assert binds_of(api, name).count(201) == 1 and 409 not in binds_of(api, name)  # bound once
    assert cache_view(h) == server_view(api) or (wait_until(lambda: cache_view(h) == server_view(api)) is None)


# -- writes through 5xx, timeouts and 429 --------------------------------------------------------------------
def test_a_bind_that_meets_5xx_is_retried_with_backoff_not_dropped(api, harness) -> None:
    api.put(big_node("n1"))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    api.fail("POST", BIND.format("p"), status=503, times=2)
    api.fail("POST", BIND.format("p"), status=500, times=1)
    began = time.monotonic()
    h.cycle()
    assert h.node_of("p") == "n1"
    assert binds_of(api, "p") == [503, 503, 500, 201]
    # backoff: at least 0.1 + 0.2 + 0.4 s (half of 0.2, 0.4, 0.8 at the least jitter) between the four tries
    assert time.monotonic() - began >= 0.7
    assert not [e for e in api.objects("events") if e["reason"] == "FailedScheduling"]


def test_a_bind_that_times_out_is_retried_and_bound_once(api, harness, monkeypatch) -> None:
    monkeypatch.setattr(apieffects, "TIMEOUT", (2.0, 0.5))
    api.put(big_node("n1"))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    api.fail("POST", BIND.format("p"), status=503, times=1, delay=1.5)  # no answer within the read timeout
    h.cycle()
    assert h.node_of("p") == "n1"
    assert binds_of(api, "p") == [503, 201]
    assert next(p for p in h.cache.pods.values() if p.name == "p").node_name == "n1"


def test_an_eviction_that_meets_5xx_is_retried(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "2", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
             "value": 1000})
    api.put(running_pod("victim", "n1", cpu="2"))
    api.put(pending_pod("urgent", cpu="2", priority_class="high"))
    h = harness(GANG_CONFIG)
    assert h.kube.source.wait_synced(10)
    api.fail("POST", "/api/v1/namespaces/default/pods/victim/eviction", status=502, times=2)
    h.cycle()
    statuses = [c.status for c in api.calls if c.subresource == "eviction"]
    assert statuses == [502, 502, 201]
    assert api.get("pods", "victim", "default")["metadata"].get("deletionTimestamp")  # evicted: terminating


def test_a_429_bind_waits_out_its_retry_after_then_succeeds(api, harness) -> None:
    api.put(big_node("n1"))
    api.put(pending_pod("p"))
    h = harness()
    assert h.kube.source.wait_synced(10)
    api.fail("POST", BIND.format("p"), status=429, times=1, retry_after=1)
    began = time.monotonic()
    h.cycle()
    assert h.node_of("p") == "n1"  # never dropped
    assert binds_of(api, "p") == [429, 201]
    assert time.monotonic() - began >= 1.0  # the second try waited at least Retry-After


def test_a_429_status_write_waits_out_its_retry_after(api, harness) -> None:
    api.put(big_node("n1"))
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"},
             "spec": {"minMember": 1}})
    h = harness(GANG_CONFIG)
    assert h.kube.source.wait_synced(10)
    api.fail("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/g", status=429, times=1,
             retry_after=1)
    began = time.monotonic()
    h.cycle()
    stop = threading.Event()  # the loop flushes what is left every 50 ms: a retry must still wait
    loop = threading.Thread(target=h.scheduler.run, kwargs={"interval": 0.05, "stop": stop, "active": h.kube.leading})
    loop.start()
    try:
        wait_until(lambda: (api.get("podgroups", "g", "default").get("status") or {}).get("phase") == "Inqueue")
        waited = time.monotonic() - began
    finally:
        stop.set()
        loop.join()
    assert waited >= 1.0
    patches = [c.status for c in api.calls if c.plural == "podgroups" and c.verb == "patch"]
    assert patches == [429, 200]  # one retry, after Retry-After: no storm meanwhile
    assert h.kube.effects.backlog() == 0


def test_a_status_write_for_an_object_gone_is_dropped_not_retried(api, harness) -> None:
    """A PodGroup deleted while its status is on the way (the Job controller deletes a restarted Job's group):
    the 404 ends the write; retrying it would retry it for ever."""
    api.put(big_node("n1"))
    api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"},
             "spec": {"minMember": 1}})
    h = harness(GANG_CONFIG)
    assert h.kube.source.wait_synced(10)
    api.fail("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/g", status=404, times=None)
    h.cycle()
    wait_until(lambda: h.kube.effects.backlog() == 0)
    time.sleep(0.6)  # longer than the first retry's backoff
    h.kube.effects.flush()
    assert h.kube.effects.drain(5)
    patches = [c.status for c in api.calls if c.plural == "podgroups" and c.verb == "patch"]
    assert patches == [404] and h.kube.effects.backlog() == 0


def _podgroup(uid: str, min_member: int) -> dict:
    return {"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "default", "uid": uid},
            "spec": {"minMember": min_member}}


def _pod(uid: str) -> dict:
    doc = pending_pod("p", cpu="64")  # never fits: its status says so
    doc["metadata"]["uid"] = uid
    return doc


@pytest.mark.parametrize(("plural", "name", "listing", "old", "new", "kept"), [
    ("podgroups", "g", "/apis/scheduling.volcano.sh/v1beta1/podgroups", _podgroup("old", 1), _podgroup("new", 5),
     None),
    ("pods", "p", "/api/v1/pods", _pod("old"), _pod("new"), {"phase": "Pending"}),
], ids=["podgroup", "pod"])
def test_a_status_write_does_not_land_on_another_object_of_the_same_name(api, harness, plural, name, listing, old,
                                                                          new, kept) -> None:
    """An object deleted and made again under its name while the watch is away: the status the scheduler worked
    out for the old one (a PodGroup's phase; an unfit pod's PodScheduled=False) carries its uid, the API server
    refuses it (409), and the new one keeps its own status; the write is dropped, not retried."""
    api.put(big_node("n1", cpu="4"))
    api.put(old)
    h = harness(GANG_CONFIG)
    assert h.kube.source.wait_synced(10) and api.wait_watching(plural)
    cached = h.cache.podgroups["default/g"] if plural == "podgroups" else h.cache.pods["old"]
    assert cached.uid == "old"
    api.fail("GET", listing, status=503, times=None)  # no list, no watch
    api.close_watches()
    api.put(new)
    h.cycle()
    wait_until(lambda: h.kube.effects.backlog() == 0)
    time.sleep(0.6)  # longer than the first retry's backoff
    h.kube.effects.flush()
    assert h.kube.effects.drain(5)
    patches = [c for c in api.calls if c.plural == plural and c.verb == "patch"]
    assert [c.status for c in patches] == [409] and h.kube.effects.backlog() == 0
    stored = api.get(plural, name, "default")
    assert stored["metadata"]["uid"] == "new" and stored.get("status") == kept, stored
    api.clear_failures()


# -- leader election through API errors --------------------------------------------------------------------
def test_a_leader_whose_renewals_fail_stops_binding_before_another_can_take_over(api, harness) -> None:
    api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    api.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
             "value": 1000})
    api.put(pending_pod("p-0", cpu="1"))
    now = [0.0]
    a = LeaderElector(api.client(), name="scoria", namespace="kube-system", identity="a", lease_duration=3,
                      renew_deadline=2, retry_period=0.5, clock=lambda: now[0])
    b = LeaderElector(api.client(), name="scoria", namespace="kube-system", identity="b", lease_duration=3,
                      renew_deadline=2, retry_period=0.5, clock=lambda: now[0])
    ha, hb = harness(GANG_CONFIG), harness(GANG_CONFIG)
    ha.kube.effects.leading = lambda: a.is_leader
    hb.kube.effects.leading = lambda: b.is_leader
    assert ha.kube.source.wait_synced(10) and hb.kube.source.wait_synced(10)
    assert a.step() and not b.step()
    api.fail("PUT", LEASE, status=500, times=3)  # a's renewals fail...
    for t in (0.5, 1.0):
        now[0] = t
        a.step()
        assert a.is_leader  # ...a few times, inside the renew deadline: a still leads, and binds
        assert not b.step()
    ha.cycle()
    assert ha.node_of("p-0") == "n1"
    wait_until(lambda: all(p.node_name for h in (ha, hb) for p in h.cache.pods.values()))
    api.put(pending_pod("p-1", cpu="3"))
    wait_until(lambda: any(p.name == "p-1" for p in ha.cache.pods.values()))
    # a's cycle starts while it leads; its bind of p-1 then waits (rate limiter) while a's last renewal fails too
    gate = threading.Event()
    limiter = RateLimiter(qps=1000, burst=1, clock=lambda: 0.0, sleep=lambda dt: gate.wait(10))
    limiter._tokens = 0.0
    ha.kube.effects.limiter = limiter
    now[0] = 1.5
    a.step()
    ha.scheduler.run_once()
    assert next(p for p in ha.cache.pods.values() if p.name == "p-1").node_name == "n1"  # assumed, not yet sent
    now[0] = 3.5  # b has seen a's record unchanged for a whole lease: it takes over and binds a higher-priority pod
    api.put(pending_pod("p-2", cpu="3", priority_class="high"))
    wait_until(lambda: {p.name for p in hb.cache.pods.values()} >= {"p-0", "p-1", "p-2"})
    assert not a.is_leader
    assert b.step() and b.is_leader
    hb.cycle()
    assert hb.node_of("p-2") == "n1"
    gate.set()  # a's bind is let go: it must not go out now
    assert ha.kube.effects.drain(10)
    assert binds_of(api, "p-1") == []
    assert ha.node_of("p-1") is None
    assert next(p for p in ha.cache.pods.values() if p.name == "p-1").node_name == ""  # undone in a's cache
    bound = [o for o in api.objects("pods") if o["spec"].get("nodeName") == "n1"]
    assert sum(int(o["spec"]["containers"][0]["resources"]["requests"]["cpu"]) for o in bound) <= 4  # not overbooked
