"""The fake API server (hack/lib/fake_apiserver.py) driven by the REAL ``kubernetes`` client over HTTP: each verb,
selectors, watches (replay, live, 410 and relist, early close, bookmarks), binding, eviction with disruption
budgets, the three patch types, status subresources, custom resources as our CRDs define them, leases,
failure injection and the request log."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from hack.lib.fake_apiserver import CRD_DIR, SYSTEM_NAMESPACES, FakeApiServer, load_crds, pod
from tests.support.waiting import wait_until

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
CRDS = {r.plural: r for r in load_crds(CRD_DIR)}
needs_crds = pytest.mark.skipif(not {"podgroups", "queues"} <= set(CRDS), reason="no daemonset/crds here")


def body_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def new_pod(name: str, *, labels: dict | None = None, resources: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources or {}}], **spec}}


def running(api: FakeApiServer, uid: str, name: str, *, labels: dict, phase: str = "Running",
            namespace: str = "default") -> None:
    api.put_pod(pod(uid, name, "node-a", namespace=namespace, labels=labels, phase=phase))


def events_in_thread(stream_fn, *args, **kwargs) -> tuple[list, threading.Thread]:
    events: list = []

    def run():
        for event in watch.Watch().stream(stream_fn, *args, **kwargs):
            events.append((event["type"], event["raw_object"]))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return events, t


# -- the registry ---------------------------------------------------------------------------------------
@needs_crds
def test_custom_resources_are_served_as_our_crds_define_them() -> None:
    crds = CRDS
    with FakeApiServer() as api:
        for plural in ("podgroups", "queues"):
            res = api.resource(plural)
            assert (res.namespaced, res.status, res.kind) == (crds[plural].namespaced, crds[plural].status,
                                                              crds[plural].kind)
        assert api.resource("podgroups").namespaced and not api.resource("queues").namespaced
        with urllib.request.urlopen(api.url + "/apis/scheduling.volcano.sh/v1beta1") as resp:
            names = {r["name"] for r in json.load(resp)["resources"]}
        assert {"podgroups", "queues"} <= names
        assert ("queues/status" in names) == crds["queues"].status
        assert ("podgroups/status" in names) == crds["podgroups"].status
    with FakeApiServer(status_subresource={"podgroups": True}) as api:
        assert api.resource("podgroups").status


def test_every_registered_resource_is_reachable_by_its_url() -> None:
    with FakeApiServer() as api:
        for res in api.resources.values():
            if res.virtual:
                continue
            for path in ([res.path(), res.path("default")] if res.namespaced else [res.path()]):
                with urllib.request.urlopen(api.url + path) as resp:
                    listed = json.load(resp)
                names = [i["metadata"]["name"] for i in listed["items"]]
                assert listed["kind"] == f"{res.kind}List", path
                assert names == (sorted(SYSTEM_NAMESPACES) if res.plural == "namespaces" else []), path
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(api.url + "/apis/nope.io/v1/things")
        assert err.value.code == 404


def test_seeding_replaces_in_place_unless_the_uid_differs() -> None:
    with FakeApiServer() as api:
        api.put_node("n", {"a": "1"})
        uid = api.nodes["n"]["metadata"]["uid"]
        api.put_node("n", {"a": "2"})
        assert api.nodes["n"]["metadata"]["uid"] == uid and api.changes[-1].type == "MODIFIED"
        api.put_pod(pod("u1", "p", "n"))
        api.put_pod(pod("u2", "p", "n"))  # deleted and created again under the same name
        assert [c.type for c in api.changes[-2:]] == ["DELETED", "ADDED"]
        assert api.get("pods", "p")["metadata"]["uid"] == "u2"
        api.delete_pod("default", "p")
        assert api.get("pods", "p") is None and api.objects("pods") == []


# -- create, get, list ----------------------------------------------------------------------------------
@pytest.mark.parametrize("resources, qos", [
    ({}, "BestEffort"),
    ({"requests": {"cpu": "100m"}}, "Burstable"),
    ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),  # requests default to limits
    ({"requests": {"cpu": "1000m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1024Mi"}}, "Guaranteed"),
    ({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}, "Burstable"),
])
def test_created_pod_gets_server_fields_defaults_and_its_qos_class(resources, qos) -> None:
    with FakeApiServer() as api:
        api.put_namespace("ml")
        core = api.core_v1()
        created = core.create_namespaced_pod("ml", new_pod("p", resources=resources) | {"status": {"phase": "Running"}})
        assert api.calls[-1].status == 201
        meta = created.metadata
        assert meta.namespace == "ml" and meta.uid and meta.resource_version == str(api.rv) and meta.generation == 1
        assert meta.creation_timestamp is not None
        assert created.status.phase == "Pending" and created.status.qos_class == qos  # status is the server's
        assert created.spec.scheduler_name == "default-scheduler" and created.spec.priority == 0
        assert core.read_namespaced_pod("p", "ml").metadata.uid == meta.uid


def test_priority_comes_from_the_priority_class_and_an_unknown_class_is_forbidden() -> None:
    with FakeApiServer() as api:
        client.SchedulingV1Api(api.client()).create_priority_class(
            {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"})
        core = api.core_v1()
        created = core.create_namespaced_pod("default", new_pod("p", priorityClassName="high"))
        assert (created.spec.priority, created.spec.preemption_policy) == (1000, "Never")
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod("default", new_pod("q", priorityClassName="nope"))
        assert err.value.status == 403 and "no PriorityClass with name nope" in body_of(err.value)["message"]
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod("default", new_pod("r", priorityClassName="high", priority=5))
        assert err.value.status == 403


def test_get_of_a_missing_object_is_a_404_status_and_a_second_create_a_409() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        with pytest.raises(ApiException) as err:
            core.read_namespaced_pod("nope", "default")
        assert err.value.status == 404
        assert body_of(err.value) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": 'pods "nope" not found', "reason": "NotFound",
                                      "details": {"name": "nope", "kind": "pods"}, "code": 404}
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
        assert err.value.status == 409 and body_of(err.value)["reason"] == "AlreadyExists"
        made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "cfg-"}})
        assert made.metadata.name.startswith("cfg-") and len(made.metadata.name) == 9
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map("other", {"metadata": {"name": "d", "namespace": "default"}})
        assert err.value.status == 400


SELECTED = [
    ({"label_selector": "app=web"}, {"web-0", "web-1"}),
    ({"label_selector": "app==web,tier=front"}, {"web-0"}),
    ({"label_selector": "app!=web"}, {"db-0", "bare", "gone"}),
    ({"label_selector": "app in (web, db)"}, {"web-0", "web-1", "db-0"}),
    ({"label_selector": "app notin (web)"}, {"db-0", "bare", "gone"}),
    ({"label_selector": "tier"}, {"web-0", "db-0"}),
    ({"label_selector": "!tier"}, {"web-1", "bare", "gone"}),
    ({"label_selector": "app in (web,db),!tier"}, {"web-1"}),
    ({"field_selector": "spec.nodeName=node-b"}, {"db-0"}),
    ({"field_selector": "spec.nodeName="}, {"bare"}),
    ({"field_selector": "status.phase!=Running"}, {"gone"}),
    ({"field_selector": "metadata.name==web-1"}, {"web-1"}),
    ({"field_selector": "metadata.namespace=ml,spec.nodeName!=node-b"}, {"gone"}),
    ({"field_selector": "spec.schedulerName=scoria"}, {"bare"}),
    ({"field_selector": "spec.nodeName=node-a", "label_selector": "tier=front"}, {"web-0"}),
]


@pytest.mark.parametrize("kwargs, names", SELECTED, ids=[str(k) for k, _ in SELECTED])
def test_list_selects_by_labels_and_fields(kwargs, names) -> None:
    with FakeApiServer() as api:
        api.put_pod(pod("1", "web-0", "node-a", labels={"app": "web", "tier": "front"}))
        api.put_pod(pod("2", "web-1", "node-a", labels={"app": "web"}))
        api.put_pod(pod("3", "db-0", "node-b", labels={"app": "db", "tier": "back"}))
        bare = pod("4", "bare", "")
        bare["spec"]["schedulerName"] = "scoria"
        api.put_pod(bare)
        api.put_pod(pod("5", "gone", "node-a", namespace="ml", phase="Succeeded"))
        listed = api.core_v1().list_pod_for_all_namespaces(**kwargs)
        assert {p.metadata.name for p in listed.items} == names
        assert listed.metadata.resource_version == str(api.rv)


def test_list_shapes_namespaces_paging_and_bad_selectors() -> None:
    with FakeApiServer() as api:
        for i, ns in enumerate(["a", "b", "a"]):
            api.put_pod(pod(f"u{i}", f"p{i}", "n", namespace=ns))
        core, api_client = api.core_v1(), api.client()
        assert [p.metadata.name for p in core.list_namespaced_pod("a").items] == ["p0", "p2"]
        raw = json.loads(core.list_namespaced_pod("a", _preload_content=False).data)
        assert raw["kind"] == "PodList" and "kind" not in raw["items"][0]  # built-in list items carry no kind
        first = core.list_pod_for_all_namespaces(limit=2)
        assert len(first.items) == 2 and first.metadata.remaining_item_count == 1
        rest = core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
        assert [p.metadata.name for p in first.items + rest.items] == ["p0", "p2", "p1"]
        for kwargs in ({"field_selector": "spec.bogus=1"}, {"label_selector": "a in b"}):
            with pytest.raises(ApiException) as err:
                core.list_pod_for_all_namespaces(**kwargs)
            assert err.value.status == 400
        custom = client.CustomObjectsApi(api_client)
        custom.create_cluster_custom_object(*VOLCANO, "queues", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                                                 "kind": "Queue", "metadata": {"name": "q"}})
        listed = custom.list_cluster_custom_object(*VOLCANO, "queues")
        assert listed["kind"] == "QueueList" and listed["items"][0]["kind"] == "Queue"  # custom items do


# -- watch ----------------------------------------------------------------------------------------------
def test_watch_replays_changes_since_a_resource_version() -> None:
    with FakeApiServer(watch_cap=0.3) as api:
        core = api.core_v1()
        rv = core.list_namespaced_pod("default").metadata.resource_version
        core.create_namespaced_pod("default", new_pod("p"))
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"x": "1"}}})
        core.delete_namespaced_pod("p", "default")
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})  # another kind: not seen
        events = [(e["type"], e["object"].metadata.name, e["object"].metadata.resource_version)
                  for e in watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=rv,
                                                timeout_seconds=1)]
        assert [e[:2] for e in events] == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]
        assert [int(e[2]) for e in events] == sorted(int(e[2]) for e in events)


def test_watch_without_a_resource_version_starts_with_the_current_objects() -> None:
    with FakeApiServer(watch_cap=0.3) as api:
        api.put_pod(pod("u1", "a", "n"))
        api.put_pod(pod("u2", "b", "n"))
        seen = [(e["type"], e["object"].metadata.name) for e in
                watch.Watch().stream(api.core_v1().list_pod_for_all_namespaces, timeout_seconds=1)]
        assert seen == [("ADDED", "a"), ("ADDED", "b")]


def test_a_selected_watch_sees_objects_enter_and_leave_its_selection() -> None:
    with FakeApiServer(watch_cap=None) as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("p"))
        rv = core.list_pod_for_all_namespaces().metadata.resource_version
        events, t = events_in_thread(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=node-a",
                                     resource_version=rv, timeout_seconds=30)
        assert api.wait_watching("pods")
        core.create_namespaced_pod_binding("p", "default", {"metadata": {"name": "p"},
                                                             "target": {"kind": "Node", "name": "node-a"}},
                                           _preload_content=False)
        core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
        core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
        wait_until(lambda: len(events) == 3, timeout=5.0, poll=0.01)
        assert [(k, o["spec"]["nodeName"]) for k, o in events] == [("ADDED", "node-a"), ("MODIFIED", "node-a"),
                                                                   ("DELETED", "node-a")]
        api.close_watches()
        t.join(5)
        assert not t.is_alive()


def test_an_expired_resource_version_gets_410_and_a_relist_recovers() -> None:
    with FakeApiServer(watch_cap=0.3) as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("a"))
        old = core.list_pod_for_all_namespaces().metadata.resource_version
        core.create_namespaced_pod("default", new_pod("b"))
        api.compact()
        with pytest.raises(ApiException) as err:
            list(watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=old, timeout_seconds=1))
        assert err.value.status == 410 and "Expired" in err.value.reason
        fresh = core.list_pod_for_all_namespaces()
        core.create_namespaced_pod("default", new_pod("c"))
        seen = [e["object"].metadata.name for e in watch.Watch().stream(
            core.list_pod_for_all_namespaces, resource_version=fresh.metadata.resource_version, timeout_seconds=1)]
        assert seen == ["c"]


def test_history_is_bounded() -> None:
    with FakeApiServer(history=3) as api:
        core = api.core_v1()
        start = core.list_namespaced_config_map("default").metadata.resource_version
        for i in range(5):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        with pytest.raises(ApiException) as err:
            list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start,
                                      timeout_seconds=1))
        assert err.value.status == 410


def test_closed_watches_end_at_once_and_expired_ones_come_back_with_410() -> None:
    with FakeApiServer(watch_cap=None) as api:
        core = api.core_v1()
        rv = core.list_node().metadata.resource_version
        events, t = events_in_thread(core.list_node, resource_version=rv, timeout_seconds=60)
        assert api.wait_watching("nodes")
        api.put_node("n1", {})
        wait_until(lambda: len(events) == 1, timeout=5.0, poll=0.01)
        started = time.monotonic()
        api.expire_watches()
        t.join(5)
        assert not t.is_alive() and time.monotonic() - started < 2
        last = events[-1][1]["metadata"]["resourceVersion"]
        api.put_node("n2", {})
        with pytest.raises(ApiException) as err:  # history before the compaction is gone
            list(watch.Watch().stream(core.list_node, resource_version=str(int(last) - 1), timeout_seconds=1))
        assert err.value.status == 410


def test_a_watch_that_times_out_ends_with_a_bookmark_when_asked() -> None:
    with FakeApiServer(watch_cap=0.2) as api:
        core = api.core_v1()
        rv = core.list_node().metadata.resource_version
        api.put(  # another kind moves the resourceVersion on
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}})
        events = list(watch.Watch().stream(core.list_node, resource_version=rv, allow_watch_bookmarks=True,
                                           timeout_seconds=1))
        assert [e["type"] for e in events] == ["BOOKMARK"]
        assert events[0]["raw_object"]["metadata"]["resourceVersion"] == str(api.rv)


# -- binding --------------------------------------------------------------------------------------------
def test_binding_sets_the_node_once_and_answers_with_a_success_status() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("p", labels={"app": "x"}))
        binding = client.V1Binding(metadata=client.V1ObjectMeta(name="p", annotations={"scoria.io/placed": "yes"}),
                                   target=client.V1ObjectReference(kind="Node", name="node-a"))
        resp = core.create_namespaced_binding("default", binding, _preload_content=False)
        assert resp.status == 201
        assert json.loads(resp.data) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                         "code": 201}
        bound = api.get("pods", "p")
        assert bound["spec"]["nodeName"] == "node-a" and bound["metadata"]["annotations"] == {"scoria.io/placed": "yes"}
        assert [(c["type"], c["status"]) for c in bound["status"]["conditions"]] == [("PodScheduled", "True")]
        with pytest.raises(ApiException) as err:  # already bound
            core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
        assert err.value.status == 409
        assert body_of(err.value)["message"] == ('Operation cannot be fulfilled on pods/binding "p": pod p is already '
                                                 'assigned to node "node-a"')
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_binding("nope", "default", {"metadata": {"name": "nope"},
                                                                   "target": {"name": "node-a"}})
        assert err.value.status == 404


def test_the_clients_binding_model_cannot_read_the_servers_answer() -> None:
    """Why callers pass _preload_content=False: the API server answers a Binding with a Status, which the
    client's V1Binding (target required) refuses (kubernetes-client/python#825, #547) after the bind is done."""
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("p"))
        with pytest.raises(Exception) as err:
            core.create_namespaced_binding("default", {"metadata": {"name": "p"}, "target": {"name": "node-a"}})
        assert "target" in str(err.value) and not isinstance(err.value, ApiException)
        assert api.get("pods", "p")["spec"]["nodeName"] == "node-a"


# -- eviction -------------------------------------------------------------------------------------------
def pdb(name: str, selector: dict, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"selector": selector, **spec}}


BUDGETS = [
    ({"minAvailable": 2}, 3, True),
    ({"minAvailable": 3}, 3, False),
    ({"minAvailable": "50%"}, 2, True),
    ({"minAvailable": "100%"}, 3, False),
    ({"maxUnavailable": 0}, 3, False),
    ({"maxUnavailable": 1}, 3, True),
    ({"maxUnavailable": "10%"}, 3, True),  # rounds up to 1
    ({"maxUnavailable": 1}, 1, True),
    ({"minAvailable": 1}, 1, False),
]


@pytest.mark.parametrize("spec, pods, allowed", BUDGETS, ids=[f"{s}-{n}" for s, n, _ in BUDGETS])
def test_eviction_honours_the_disruption_budget(spec, pods, allowed) -> None:
    with FakeApiServer() as api:
        for i in range(pods):
            running(api, f"u{i}", f"web-{i}", labels={"app": "web"})
        client.PolicyV1Api(api.client()).create_namespaced_pod_disruption_budget(
            "default", pdb("web", {"matchLabels": {"app": "web"}}, **spec))
        api.sync_budgets()  # the disruption controller's turn: the eviction reads the budget's status
        core = api.core_v1()
        eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="web-0", namespace="default"))
        if allowed:
            core.create_namespaced_pod_eviction("web-0", "default", eviction)
            assert api.calls[-1].status == 201 and api.pods[("default", "web-0")]["metadata"]["deletionTimestamp"]
        else:
            with pytest.raises(ApiException) as err:
                core.create_namespaced_pod_eviction("web-0", "default", eviction)
            assert err.value.status == 429
            status = body_of(err.value)
            assert status["reason"] == "TooManyRequests"
            assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
            assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"
            assert ("default", "web-0") in api.pods


def test_eviction_counts_only_running_pods_not_being_deleted_and_skips_the_budget_for_unstarted_ones() -> None:
    with FakeApiServer() as api:
        running(api, "u0", "web-0", labels={"app": "web"})
        running(api, "u1", "web-1", labels={"app": "web"})
        running(api, "u2", "web-2", labels={"app": "web"}, phase="Pending")
        client.PolicyV1Api(api.client()).create_namespaced_pod_disruption_budget(
            "default", pdb("web", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                           minAvailable=1))
        api.sync_budgets()
        core = api.core_v1()

        def evict(name: str) -> int:
            try:
                core.create_namespaced_pod_eviction(name, "default", {"metadata": {"name": name}})
                return 201
            except ApiException as exc:
                return exc.status

        assert evict("web-2") == 201  # Pending: no budget to consult
        assert evict("web-0") == 201  # graceful: marked deleting, no longer counted
        assert api.pods[("default", "web-0")]["metadata"]["deletionTimestamp"]
        assert any(c["type"] == "DisruptionTarget" for c in api.pods[("default", "web-0")]["status"]["conditions"])
        assert evict("web-1") == 429  # the budget's one disruption is spent (the server decremented it)
        api.sync_budgets()  # the controller recounts: web-0 is terminating, web-1 the only healthy one
        assert api.get("poddisruptionbudgets", "web")["status"]["currentHealthy"] == 1
        assert evict("web-1") == 429  # the last healthy one
        assert evict("web-0") == 201  # already being deleted: allowed again, nothing more happens
        assert evict("nope") == 404
        running(api, "u3", "web-3", labels={"app": "web"})
        api.blocked.add(("default", "web-3"))
        assert evict("web-3") == 429  # the old knob still works


def test_eviction_uid_precondition_and_more_than_one_budget() -> None:
    with FakeApiServer() as api:
        running(api, "u0", "web-0", labels={"app": "web", "tier": "front"})
        running(api, "u1", "web-1", labels={"app": "web"})
        policy, core = client.PolicyV1Api(api.client()), api.core_v1()
        policy.create_namespaced_pod_disruption_budget("default", pdb("a", {"matchLabels": {"app": "web"}},
                                                                      maxUnavailable=1))
        api.sync_budgets()
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name="web-1"),
                                 delete_options=client.V1DeleteOptions(preconditions={"uid": "someone-else"}))
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_eviction("web-1", "default", body)
        assert err.value.status == 409 and "does not match the UID in record" in body_of(err.value)["message"]
        policy.create_namespaced_pod_disruption_budget("default", pdb("b", {"matchLabels": {"tier": "front"}},
                                                                      maxUnavailable=1))
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_eviction("web-0", "default", {"metadata": {"name": "web-0"}})
        assert err.value.status == 500 and "more than one PodDisruptionBudget" in body_of(err.value)["message"]


def test_an_eviction_is_seen_as_a_disruption_mark_then_a_delete() -> None:
    with FakeApiServer() as api:
        running(api, "u0", "web-0", labels={"app": "web"})
        before = api.rv
        api.core_v1().create_namespaced_pod_eviction("web-0", "default", {"metadata": {"name": "web-0"}})
        changes = [(c.type, c.obj["metadata"]["name"]) for c in api.changes if c.rv > before]
        assert changes == [("MODIFIED", "web-0"), ("MODIFIED", "web-0")]  # marked, then terminating
        assert api.pods[("default", "web-0")]["metadata"]["deletionGracePeriodSeconds"] == 30
        assert api.finish_terminating(everything=True) == [("default", "web-0")]  # the kubelet finishes it
        assert api.changes[-1].type == "DELETED"


# -- patches, updates, status ---------------------------------------------------------------------------
def test_patch_types_merge_as_the_api_server_does() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        seeded = pod("u", "p", "node-a", labels={"a": "1", "b": "2"})
        seeded["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        api.put_pod(seeded)
        api.put_node("node-a", {}, [{"key": "x", "effect": "NoSchedule"}])
        # strategic merge (the client's default for a dict): conditions merge by type, null deletes
        core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": [
            {"type": "PodScheduled", "status": "True"}]}})
        assert [c["type"] for c in api.get("pods", "p")["status"]["conditions"]] == ["Ready", "PodScheduled"]
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": None, "c": "3"}}})
        assert api.get("pods", "p")["metadata"]["labels"] == {"b": "2", "c": "3"}
        # ...but lists without a merge key (taints) are replaced whole
        core.patch_node("node-a", {"spec": {"taints": [{"key": "y", "effect": "NoExecute"}]}})
        assert [t["key"] for t in api.nodes["node-a"]["spec"]["taints"]] == ["y"]
        # a merge patch replaces every list
        ready_false = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        core.patch_namespaced_pod_status("p", "default", ready_false, _content_type="application/merge-patch+json")
        assert api.get("pods", "p")["status"]["conditions"] == [{"type": "Ready", "status": "False"}]
        # a JSON patch (a list body): add, replace, remove, test
        core.patch_namespaced_pod("p", "default", [
            {"op": "test", "path": "/metadata/labels/b", "value": "2"},
            {"op": "add", "path": "/metadata/annotations/x~1y", "value": "z"},
            {"op": "replace", "path": "/metadata/labels/b", "value": "20"},
            {"op": "remove", "path": "/metadata/labels/c"}])
        got = api.get("pods", "p")["metadata"]
        assert got["labels"] == {"b": "20"} and got["annotations"]["x/y"] == "z"
        for ops in ([{"op": "test", "path": "/metadata/labels/b", "value": "2"}],
                    [{"op": "remove", "path": "/metadata/labels/missing"}]):
            with pytest.raises(ApiException) as err:
                core.patch_namespaced_pod("p", "default", ops)
            assert err.value.status == 422


def test_stale_resource_versions_conflict_and_pod_specs_are_immutable() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        created = core.create_namespaced_pod("default", new_pod("p"))
        rv = created.metadata.resource_version
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}, "resourceVersion": rv}})
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "2"}, "resourceVersion": rv}})
        assert err.value.status == 409 and body_of(err.value)["reason"] == "Conflict"
        with pytest.raises(ApiException) as err:
            core.replace_namespaced_pod("p", "default", created)  # the stale copy
        assert err.value.status == 409
        with pytest.raises(ApiException) as err:  # a binding is the way to set the node
            core.patch_namespaced_pod("p", "default", {"spec": {"nodeName": "node-a"}})
        assert err.value.status == 422 and "Forbidden" in body_of(err.value)["message"]
        current = core.read_namespaced_pod("p", "default")
        current.spec.containers[0].image = "busybox:2"  # the image may change
        assert core.replace_namespaced_pod("p", "default", current).spec.containers[0].image == "busybox:2"


def test_status_subresource_rules_for_pods() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("p"))
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}}, "status": {"phase": "Failed"}})
        assert api.get("pods", "p")["status"]["phase"] == "Pending"  # the main resource does not change status
        core.patch_namespaced_pod_status("p", "default", {"metadata": {"labels": {"a": "2"}},
                                                          "status": {"phase": "Running"}})
        got = api.get("pods", "p")
        assert got["status"]["phase"] == "Running" and got["metadata"]["labels"] == {"a": "1"}  # nor status the rest


def test_an_update_that_changes_nothing_writes_nothing() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
        rv, writes = api.rv, len(api.changes)
        same = core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
        assert same.metadata.resource_version == str(rv) and api.rv == rv and len(api.changes) == writes
        assert core.patch_namespaced_config_map("c", "default", {"data": {"a": "2"}}).metadata.resource_version \
            == str(rv + 1)


def test_custom_resources_status_subresource_rules() -> None:
    """Queues have a status subresource, PodGroups none (as in Volcano's CRDs): the static registry."""
    with FakeApiServer(crds=None) as api:
        api.put_namespace("ml")
        custom = client.CustomObjectsApi(api.client())
        queue = custom.create_cluster_custom_object(*VOLCANO, "queues", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
            "spec": {"weight": 2}, "status": {"state": "Open", "allocated": {}}})
        assert "status" not in queue  # a create does not set status
        custom.patch_cluster_custom_object(*VOLCANO, "queues", "q", {"spec": {"weight": 3},
                                                                     "status": {"allocated": {"cpu": "1"}}})
        assert "status" not in api.get("queues", "q") and api.get("queues", "q")["spec"]["weight"] == 3
        done = custom.patch_cluster_custom_object_status(*VOLCANO, "queues", "q", {
            "spec": {"weight": 9}, "status": {"allocated": {"cpu": "2"}}})
        assert done["status"] == {"allocated": {"cpu": "2"}} and done["spec"]["weight"] == 3
        assert done["metadata"]["generation"] == 2  # spec changed once, status does not count

        custom.create_namespaced_custom_object(*VOLCANO, "ml", "podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"minMember": 2}, "status": {"phase": "Pending"}})
        with pytest.raises(ApiException) as err:  # no podgroups/status: it is written through podgroups itself
            custom.patch_namespaced_custom_object_status(*VOLCANO, "ml", "podgroups", "g",
                                                         {"status": {"phase": "Running"}})
        assert err.value.status == 404
        custom.patch_namespaced_custom_object(*VOLCANO, "ml", "podgroups", "g", {"status": {"phase": "Running"}})
        got = api.get("podgroups", "g", "ml")
        assert got["status"]["phase"] == "Running" and got["metadata"]["generation"] == 2  # status counts here
        with pytest.raises(ApiException) as err:  # a custom resource takes no strategic merge patch
            custom.patch_namespaced_custom_object(*VOLCANO, "ml", "podgroups", "g", {"spec": {"minMember": 3}},
                                                  _content_type="application/strategic-merge-patch+json")
        assert err.value.status == 415
        current = custom.get_namespaced_custom_object(*VOLCANO, "ml", "podgroups", "g")
        del current["metadata"]["resourceVersion"]
        with pytest.raises(ApiException) as err:  # an update of a custom resource must name its version
            custom.replace_namespaced_custom_object(*VOLCANO, "ml", "podgroups", "g", current)
        assert err.value.status == 422
    with FakeApiServer(crds=None, status_subresource={"podgroups": True}) as api:
        api.put_namespace("ml")
        custom = client.CustomObjectsApi(api.client())
        custom.create_namespaced_custom_object(*VOLCANO, "ml", "podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"}})
        custom.patch_namespaced_custom_object_status(*VOLCANO, "ml", "podgroups", "g", {"status": {"phase": "Inqueue"}})
        assert api.get("podgroups", "g", "ml")["status"] == {"phase": "Inqueue"}


@needs_crds
def test_custom_resources_follow_their_crd_schema() -> None:
    with FakeApiServer() as api:
        api.put_namespace("ml")
        custom = client.CustomObjectsApi(api.client())
        queue = custom.create_cluster_custom_object(*VOLCANO, "queues", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
            "spec": {"weight": 2, "unknownField": 1}})
        assert queue["spec"] == {"weight": 2}  # unknown fields pruned
        with pytest.raises(ApiException) as err:  # the schema requires status.allocated
            custom.patch_cluster_custom_object_status(*VOLCANO, "queues", "q", {"status": {"pending": 1}})
        assert err.value.status == 422 and "status.allocated: Required value" in body_of(err.value)["message"]
        group = custom.create_namespaced_custom_object(*VOLCANO, "ml", "podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"minMember": 2}})
        assert group["spec"]["queue"] == "default"  # the CRD's default
        with pytest.raises(ApiException) as err:
            custom.patch_namespaced_custom_object(*VOLCANO, "ml", "podgroups", "g", {"spec": {"minMember": "two"}})
        assert err.value.status == 422 and "spec.minMember" in body_of(err.value)["message"]


def test_podgroups_list_and_watch_across_namespaces() -> None:
    with FakeApiServer(watch_cap=0.3) as api:
        api.put_namespace("a")
        api.put_namespace("b")
        custom = client.CustomObjectsApi(api.client())
        rv = custom.list_cluster_custom_object(*VOLCANO, "podgroups")["metadata"]["resourceVersion"]
        for ns, name, queue in [("a", "g1", "gold"), ("b", "g2", "gold"), ("b", "g3", "iron")]:
            custom.create_namespaced_custom_object(*VOLCANO, ns, "podgroups", {
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": name, "labels": {"queue": queue}}, "spec": {"minMember": 1, "queue": queue}})
        listed = custom.list_cluster_custom_object(*VOLCANO, "podgroups", label_selector="queue=gold")
        assert [i["metadata"]["name"] for i in listed["items"]] == ["g1", "g2"]
        in_b = custom.list_namespaced_custom_object(*VOLCANO, "b", "podgroups")
        assert [i["metadata"]["name"] for i in in_b["items"]] == ["g2", "g3"]
        seen = [(e["type"], e["object"]["metadata"]["name"]) for e in watch.Watch().stream(
            custom.list_cluster_custom_object, *VOLCANO, "podgroups", resource_version=rv, timeout_seconds=1)]
        assert seen == [("ADDED", "g1"), ("ADDED", "g2"), ("ADDED", "g3")]
        seen = [e["object"]["metadata"]["name"] for e in watch.Watch().stream(
            custom.list_namespaced_custom_object, *VOLCANO, "b", "podgroups", resource_version=rv, timeout_seconds=1)]
        assert seen == ["g2", "g3"]


def test_leases_conflict_on_a_stale_update() -> None:
    with FakeApiServer() as api:
        leases = client.CoordinationV1Api(api.client())
        mine = leases.create_namespaced_lease("kube-system", {"metadata": {"name": "scoria"},
                                                              "spec": {"holderIdentity": "a",
                                                                       "leaseDurationSeconds": 15}})
        theirs = leases.read_namespaced_lease("scoria", "kube-system")
        theirs.spec.holder_identity = "b"
        leases.replace_namespaced_lease("scoria", "kube-system", theirs)
        mine.spec.holder_identity = "a-again"
        with pytest.raises(ApiException) as err:
            leases.replace_namespaced_lease("scoria", "kube-system", mine)
        assert err.value.status == 409
        assert leases.read_namespaced_lease("scoria", "kube-system").spec.holder_identity == "b"


def test_concurrent_optimistic_updates_lose_nothing() -> None:
    with FakeApiServer() as api:
        api.core_v1().create_namespaced_config_map("default", {"metadata": {"name": "n"}, "data": {"n": "0"}})
        conflicts = []

        def bump(times: int) -> None:
            core = api.core_v1()
            for _ in range(times):
                while True:
                    current = core.read_namespaced_config_map("n", "default")
                    current.data["n"] = str(int(current.data["n"]) + 1)
                    try:
                        core.replace_namespaced_config_map("n", "default", current)
                        break
                    except ApiException as exc:
                        assert exc.status == 409
                        conflicts.append(1)

        threads = [threading.Thread(target=bump, args=(10,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert api.get("configmaps", "n")["data"]["n"] == "40"
        assert api.count(verb="update", status=200) == 40 and api.count(verb="update", status=409) == len(conflicts)


# -- delete ---------------------------------------------------------------------------------------------
def test_delete_shapes_preconditions_and_finalizers() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        created = core.create_namespaced_pod("default", new_pod("p"))
        with pytest.raises(ApiException) as err:
            core.delete_namespaced_pod("p", "default", body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid="other")))
        assert err.value.status == 409
        gone = core.delete_namespaced_pod("p", "default")  # a pod's delete answers with the pod
        assert gone.metadata.uid == created.metadata.uid and ("default", "p") not in api.pods
        with pytest.raises(ApiException) as err:
            core.delete_namespaced_pod("p", "default")
        assert err.value.status == 404
        core.create_namespaced_config_map("default", {"metadata": {"name": "c", "finalizers": ["scoria.io/keep"]}})
        answer = json.loads(core.delete_namespaced_config_map("c", "default", _preload_content=False).data)
        assert answer["metadata"]["deletionTimestamp"]  # held by its finalizer
        core.patch_namespaced_config_map("c", "default", {"metadata": {"finalizers": None}})
        assert api.get("configmaps", "c") is None and api.changes[-1].type == "DELETED"
        core.create_namespaced_config_map("default", {"metadata": {"name": "d"}})
        answer = json.loads(core.delete_namespaced_config_map("d", "default", _preload_content=False).data)
        assert answer["kind"] == "Status" and answer["status"] == "Success" and answer["details"]["name"] == "d"


def test_graceful_pod_deletion_and_namespace_deletion() -> None:
    now = [1_000_000.0]
    with FakeApiServer(clock=lambda: now[0]) as api:  # graceful by default
        core = api.core_v1()
        running(api, "u", "p", labels={}, namespace="ml")
        core.delete_namespaced_pod("p", "ml")
        assert api.pods[("ml", "p")]["metadata"]["deletionGracePeriodSeconds"] == 30  # the kubelet's turn
        assert api.finish_terminating() == []  # its grace period is not over
        core.delete_namespaced_pod("p", "ml", grace_period_seconds=0)
        assert ("ml", "p") not in api.pods
        running(api, "u2", "q", labels={}, namespace="ml")
        core.delete_namespaced_pod("q", "ml", grace_period_seconds=5)
        now[0] += 5
        assert api.finish_terminating() == [("ml", "q")] and ("ml", "q") not in api.pods
        core.create_namespace({"metadata": {"name": "ns2"}})
        core.create_namespaced_config_map("ns2", {"metadata": {"name": "c"}})
        core.delete_namespace("ns2")
        assert api.objects("configmaps", "ns2") == [] and api.get("namespaces", "ns2") is None


# -- failure injection and the request log -------------------------------------------------------------
def test_injected_failures_hit_the_next_matching_requests_only() -> None:
    with FakeApiServer(watch_cap=0.3) as api:
        core = api.core_v1()
        rule = api.fail("GET", "/api/v1/nodes", status=500, times=2)
        for _ in range(2):
            with pytest.raises(ApiException) as err:
                core.list_node()
            assert err.value.status == 500 and body_of(err.value)["reason"] == "InternalError"
        core.list_node()
        assert rule.hits == 2 and rule.times == 0
        api.fail("PATCH", "/api/v1/namespaces/default/pods/", status=409, reason="Conflict", message="raced")
        api.put_pod(pod("u", "p", "n"))
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}}})
        assert err.value.status == 409 and body_of(err.value)["message"] == "raced"
        api.fail(None, "/api/v1/pods", status=500, watch=True)  # the watch fails, the list does not
        core.list_pod_for_all_namespaces()
        with pytest.raises(ApiException) as err:
            list(watch.Watch().stream(core.list_pod_for_all_namespaces, timeout_seconds=1))
        assert err.value.status == 500
        api.fail("POST", "/api/v1/namespaces/default/configmaps", status=0)  # the connection drops
        with pytest.raises(Exception) as err:
            core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
        assert not isinstance(err.value, ApiException) and api.get("configmaps", "c") is None
        api.fail("GET", "/api/v1/nodes", status=429, retry_after=1)  # urllib3 honours Retry-After on a GET
        assert core.list_node().items == [] and api.calls[-2].status == 429


def test_the_request_log_counts_by_method_and_path_pattern() -> None:
    with FakeApiServer() as api:
        custom = client.CustomObjectsApi(api.client())
        custom.create_cluster_custom_object(*VOLCANO, "queues", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                                                 "kind": "Queue", "metadata": {"name": "q"}})
        api.reset_requests()
        for _ in range(2):
            custom.patch_cluster_custom_object_status(*VOLCANO, "queues", "q", {"status": {"allocated": {"cpu": "1"}}})
        custom.get_cluster_custom_object(*VOLCANO, "queues", "q")
        assert api.counts[("PATCH", "/apis/scheduling.volcano.sh/v1beta1/queues/{name}/status")] == 2
        assert api.count(verb="patch", plural="queues", subresource="status") == 2
        assert api.count(method="GET", plural="queues") == 1
        assert api.requests == [("PATCH", "/apis/scheduling.volcano.sh/v1beta1/queues/q/status")] * 2 + [
            ("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/q")]
        assert api.calls[0].body == {"status": {"allocated": {"cpu": "1"}}}
        api.core_v1().list_namespaced_pod("ml", watch=False)
        assert api.counts[("GET", "/api/v1/namespaces/{namespace}/pods")] == 1


# -- as kube-apiserver does it (issue 16 item 2); each names the kube source it follows ------------------------
def evict_status(core, name: str, namespace: str = "default") -> int:
    try:
        core.create_namespaced_pod_eviction(name, namespace, {"metadata": {"name": name}})
        return 201
    except ApiException as exc:
        return exc.status


def test_eviction_reads_the_budgets_status_and_the_server_decrements_it() -> None:
    """pkg/registry/core/pod/storage/eviction.go, checkAndDecrement: a budget whose status lags its spec
    (observedGeneration < generation: fresh, the controller has not seen it) refuses with 429 and Retry-After;
    disruptionsAllowed 0 refuses; otherwise the server decrements it, so two evictions back to back with one
    disruption allowed are 201 then 429, however many pods are healthy."""
    with FakeApiServer() as api:
        for i in range(4):
            running(api, f"u{i}", f"web-{i}", labels={"app": "web"})
        client.PolicyV1Api(api.client()).create_namespaced_pod_disruption_budget(
            "default", pdb("web", {"matchLabels": {"app": "web"}}, minAvailable=2))
        core = api.core_v1()
        with pytest.raises(ApiException) as err:  # fresh: no status yet, though 2 of 4 may go
            core.create_namespaced_pod_eviction("web-0", "default", {"metadata": {"name": "web-0"}})
        assert err.value.status == 429 and err.value.headers["Retry-After"] == "10"
        assert "still being processed" in body_of(err.value)["details"]["causes"][0]["message"]
        api.put({**api.get("poddisruptionbudgets", "web"), "status": {  # as a controller wrote it
            "observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 4, "desiredHealthy": 2,
            "expectedPods": 4}})
        assert evict_status(core, "web-0") == 201
        status = api.get("poddisruptionbudgets", "web")["status"]
        assert status["disruptionsAllowed"] == 0 and set(status["disruptedPods"]) == {"web-0"}
        assert evict_status(core, "web-1") == 429  # a live count (3 healthy, 2 needed) would have allowed it
        api.sync_budgets()  # the controller recounts: web-0 is terminating
        status = api.get("poddisruptionbudgets", "web")["status"]
        assert (status["currentHealthy"], status["disruptionsAllowed"]) == (3, 1)
        assert evict_status(core, "web-1") == 201


def test_a_budget_with_an_empty_selector_selects_nothing() -> None:
    """eviction.go, getPodDisruptionBudgets: a nil or empty selector matches no pod."""
    with FakeApiServer() as api:
        running(api, "u0", "web-0", labels={"app": "web"})
        api.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "all", "namespace": "default"}, "spec": {"selector": {}, "minAvailable": 1}})
        assert evict_status(api.core_v1(), "web-0") == 201


def test_binding_refuses_gated_pods_and_a_stale_uid() -> None:
    """pkg/registry/core/pod/storage/storage.go (setPodNodeAndMetadata; storage_test.go
    TestEtcdCreateWithSchedulingGates): a gated pod -> 409 'pod foo has non-empty .spec.schedulingGates'; the
    Binding's uid is a storage precondition -> 409 for a pod recreated under the name."""
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("foo", schedulingGates=[{"name": "wait"}]))
        target = {"kind": "Node", "name": "node-a"}
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_binding("foo", "default", {"metadata": {"name": "foo"}, "target": target},
                                               _preload_content=False)
        assert err.value.status == 409
        assert body_of(err.value)["message"] == ('Operation cannot be fulfilled on pods/binding "foo": pod foo has '
                                                 'non-empty .spec.schedulingGates')
        old = core.create_namespaced_pod("default", new_pod("p")).metadata.uid
        core.delete_namespaced_pod("p", "default")  # unbound: gone at once
        core.create_namespaced_pod("default", new_pod("p"))  # recreated under the same name
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_binding("p", "default", {"metadata": {"name": "p", "uid": old},
                                                                "target": target}, _preload_content=False)
        assert err.value.status == 409 and "Precondition failed: UID in precondition" in body_of(err.value)["message"]
        assert not api.get("pods", "p")["spec"].get("nodeName")
        uid = api.get("pods", "p")["metadata"]["uid"]
        core.create_namespaced_pod_binding("p", "default", {"metadata": {"name": "p", "uid": uid}, "target": target},
                                           _preload_content=False)
        assert api.get("pods", "p")["spec"]["nodeName"] == "node-a"


def test_bound_pods_terminate_gracefully_by_default() -> None:
    """pkg/registry/core/pod/strategy.go, CheckGracefulDelete: a bound, unfinished pod gets a deletionTimestamp
    (its terminationGracePeriodSeconds) and stays until the kubelet removes it; an unbound or finished pod goes at
    once.  It cannot be bound while terminating."""
    now = [1_000_000.0]
    with FakeApiServer(clock=lambda: now[0]) as api:
        core = api.core_v1()
        running(api, "u0", "web-0", labels={})
        running(api, "u1", "done", labels={}, phase="Succeeded")
        core.create_namespaced_pod("default", new_pod("pending"))
        for name in ("web-0", "done", "pending"):
            core.delete_namespaced_pod(name, "default")
        assert set(api.pods) == {("default", "web-0")}
        terminating = core.read_namespaced_pod("web-0", "default")
        assert terminating.metadata.deletion_grace_period_seconds == 30 and terminating.metadata.deletion_timestamp
        now[0] += 29
        assert api.finish_terminating() == []
        now[0] += 1
        assert api.finish_terminating() == [("default", "web-0")] and not api.pods


def test_creates_in_a_namespace_that_does_not_exist_get_404() -> None:
    """plugin/pkg/admission/namespace/lifecycle (NamespaceLifecycle): a create in a missing namespace is
    NotFound for the namespace; a fresh cluster has default, kube-system, kube-public and kube-node-lease."""
    with FakeApiServer() as api:
        core = api.core_v1()
        assert {n.metadata.name for n in core.list_namespace().items} == set(SYSTEM_NAMESPACES)
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod("ml", new_pod("p"))
        assert err.value.status == 404 and body_of(err.value)["message"] == 'namespaces "ml" not found'
        assert body_of(err.value)["details"] == {"name": "ml", "kind": "namespaces"}
        core.create_namespace({"metadata": {"name": "ml"}})
        assert core.create_namespaced_pod("ml", new_pod("p")).metadata.namespace == "ml"
        api.put_pod(pod("u", "seeded", "n", namespace="team"))  # seeding: its namespace is made
        assert api.get("namespaces", "team")["status"]["phase"] == "Active"


@pytest.mark.parametrize("create, where", [
    (lambda core: core.create_namespaced_pod("default", new_pod("Web")), "metadata.name"),
    (lambda core: core.create_namespaced_config_map("default", {"metadata": {"name": "a_b"}}), "metadata.name"),
    (lambda core: core.create_namespace({"metadata": {"name": "a.b"}}), "RFC 1123 label"),
    (lambda core: core.create_namespaced_pod("default", new_pod("p", resources={"requests": {"cpu": "-1"}})),
     "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"),
    (lambda core: core.create_namespaced_pod("default", new_pod("p", resources={"requests": {"cpu": "2"},
                                                                                 "limits": {"cpu": "1"}})),
     "must be less than or equal to cpu limit of 1"),
    (lambda core: core.create_namespaced_event("default", {
        "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ml"}}),
     "involvedObject.namespace: Invalid value: \"ml\": does not match event.namespace"),
    (lambda core: core.create_namespaced_event("ml2", {
        "metadata": {"name": "e"}, "involvedObject": {"kind": "Node", "name": "n"}}), "does not match event.namespace"),
], ids=["pod-upper-case", "underscore", "namespace-dot", "negative-quantity", "request-over-limit",
        "event-other-namespace", "event-cluster-object"])
def test_invalid_objects_are_422(create, where) -> None:
    """k8s.io/apimachinery/pkg/util/validation (IsDNS1123Subdomain, IsDNS1123Label), pkg/apis/core/validation
    (ValidateResourceRequirements; events.go legacyValidateEvent)."""
    with FakeApiServer() as api:
        api.put_namespace("ml2")
        with pytest.raises(ApiException) as err:
            create(api.core_v1())
        assert err.value.status == 422 and body_of(err.value)["reason"] == "Invalid"
        assert where in body_of(err.value)["message"]


def test_events_in_their_objects_namespace_and_cluster_objects_in_default_are_valid() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_event("default", {"metadata": {"name": "e1"},
                                                 "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}})
        core.create_namespaced_event("default", {"metadata": {"name": "e2"},
                                                 "involvedObject": {"kind": "Node", "name": "n"}})
        assert len(api.objects("events")) == 2


def test_a_quantity_that_does_not_parse_cannot_be_decoded() -> None:
    """apimachinery's resource.Quantity UnmarshalJSON fails the decode: 400 '... cannot be handled as a Pod',
    not 422."""
    with FakeApiServer() as api:
        with pytest.raises(ApiException) as err:
            api.core_v1().create_namespaced_pod("default", new_pod("p", resources={"requests": {"cpu": "lots"}}))
        assert err.value.status == 400
        assert body_of(err.value)["message"].startswith('Pod in version "v1" cannot be handled as a Pod: quantities')


def test_pod_conditions_need_a_type_but_podgroup_conditions_follow_the_crd() -> None:
    """pkg/apis/core/validation validatePodConditions: a non-system condition type is a qualified name (empty ->
    422).  PodGroup conditions are checked by the CRD's schema, which (Volcano's
    config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml, and ours) requires no type: accepted."""
    with FakeApiServer() as api:
        core = api.core_v1()
        core.create_namespaced_pod("default", new_pod("p"))
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": [{"status": "True"}]}})
        assert err.value.status == 422 and "status.conditions[0].Type" in body_of(err.value)["message"]
        core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": [
            {"type": "scoria.io/placed", "status": "True"}]}})
        custom = client.CustomObjectsApi(api.client())
        custom.create_namespaced_custom_object(*VOLCANO, "default", "podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"minMember": 1}, "status": {"conditions": [{"status": "True"}]}})
        assert api.get("podgroups", "g")["status"]["conditions"] == [{"status": "True"}]


def test_watches_stay_open_and_silent_until_their_timeout_with_bookmarks_only_when_asked() -> None:
    """kube's watch cache (staging/src/k8s.io/apiserver/pkg/storage/cacher): a watch lasts timeoutSeconds, says
    nothing while nothing changes, and sends bookmarks only with allowWatchBookmarks, about once a minute
    (``bookmark_interval`` here, shortened)."""
    with FakeApiServer(bookmark_interval=0.4) as api:
        core = api.core_v1()
        rv = core.list_node().metadata.resource_version
        started = time.monotonic()
        quiet = list(watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=2))
        assert quiet == [] and time.monotonic() - started >= 1.9  # not ended early, nothing said
        started = time.monotonic()
        marks = [e["type"] for e in watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=2,
                                                         allow_watch_bookmarks=True)]
        assert set(marks) == {"BOOKMARK"} and 4 <= len(marks) <= 6 and time.monotonic() - started >= 1.9


# -- the kinds Volcano's Job controller creates, and garbage collection ---------------------------------------
VC_JOB = ("batch.volcano.sh", "v1alpha1")
needs_job_crds = pytest.mark.skipif(not {"jobs", "commands"} <= set(CRDS), reason="no Volcano Job CRDs here")


def raw(fn, *args, **kwargs) -> dict:
    """A call's answer as the server sent it (no client models in the way)."""
    return json.loads(fn(*args, _preload_content=False, **kwargs).data)


def vc_job(name: str = "train", **status) -> dict:
    task = {"name": "worker", "replicas": 2,
            "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
           "spec": {"minAvailable": 2, "tasks": [task]}}
    if status:
        doc["status"] = status
    return doc


def owned_by(owner: dict, *, block: bool = True) -> list[dict]:
    meta = owner["metadata"]
    return [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": block}]


@needs_job_crds
def test_a_volcano_job_has_a_status_subresource() -> None:
    with FakeApiServer() as api:
        custom = client.CustomObjectsApi(api.client())
        made = custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs",
                                                      vc_job(state={"phase": "Running"}, running=3))
        assert "status" not in made  # a create never sets the status of a kind with a status subresource
        generation = made["metadata"]["generation"]
        made["status"] = {"state": {"phase": "Completed"}}
        made["spec"]["minAvailable"] = 1
        updated = custom.replace_namespaced_custom_object(*VC_JOB, "default", "jobs", "train", made)
        assert "status" not in updated and updated["spec"]["minAvailable"] == 1  # the main resource: spec only
        assert updated["metadata"]["generation"] == generation + 1
        status = custom.patch_namespaced_custom_object_status(
            *VC_JOB, "default", "jobs", "train",
            [{"op": "add", "path": "/status", "value": {"state": {"phase": "Pending"}, "pending": 2}},
             {"op": "add", "path": "/metadata/labels", "value": {"through": "status"}},
             {"op": "replace", "path": "/spec/minAvailable", "value": 2}],
            _content_type="application/json-patch+json")
        # through /status only the status changes (kube's status strategy), and the generation stays
        assert status["status"] == {"state": {"phase": "Pending"}, "pending": 2}
        assert status["spec"]["minAvailable"] == 1 and "labels" not in status["metadata"]
        assert status["metadata"]["generation"] == generation + 1
        with pytest.raises(ApiException) as err:  # a JSON patch's test: a status for another Job under the name
            custom.patch_namespaced_custom_object_status(
                *VC_JOB, "default", "jobs", "train",
                [{"op": "test", "path": "/metadata/uid", "value": "another"},
                 {"op": "add", "path": "/status", "value": {}}], _content_type="application/json-patch+json")
        assert err.value.status == 422
        assert api.get("jobs.batch.volcano.sh", "train")["status"]["pending"] == 2


@needs_job_crds
def test_generate_name_and_uid_preconditions_on_custom_resources() -> None:
    with FakeApiServer() as api:
        custom = client.CustomObjectsApi(api.client())
        job = custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", vc_job())
        command = custom.create_namespaced_custom_object(
            "bus.volcano.sh", "v1alpha1", "default", "commands",
            {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
             "metadata": {"generateName": "train-abortjob-"}, "action": "AbortJob",
             "target": owned_by(job)[0]})
        name = command["metadata"]["name"]
        assert name.startswith("train-abortjob-") and len(name) == len("train-abortjob-") + 5
        with pytest.raises(ApiException) as err:
            custom.delete_namespaced_custom_object(*VC_JOB, "default", "jobs", "train",
                                                   body={"preconditions": {"uid": "not-this-one"}})
        assert err.value.status == 409 and "Precondition failed: UID in precondition" in body_of(err.value)["message"]
        assert api.get("jobs.batch.volcano.sh", "train") is not None
        custom.delete_namespaced_custom_object(*VC_JOB, "default", "jobs", "train",
                                               body={"preconditions": {"uid": job["metadata"]["uid"]}})
        assert api.get("jobs.batch.volcano.sh", "train") is None


@needs_job_crds
def test_background_deletion_collects_what_the_owner_owned_after_it_is_gone() -> None:
    with FakeApiServer(gc_delay=0.5) as api:
        custom, core = client.CustomObjectsApi(api.client()), api.core_v1()
        job = custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", vc_job())
        unbound = new_pod("train-worker-0")
        unbound["metadata"]["ownerReferences"] = owned_by(job)
        core.create_namespaced_pod("default", unbound)
        bound = pod("u1", "train-worker-1", "node-a")
        bound["metadata"]["ownerReferences"] = owned_by(job)
        api.put(bound)
        core.create_namespaced_service("default", {"metadata": {"name": "train", "ownerReferences": owned_by(job)},
                                                   "spec": {"clusterIP": "None"}})
        custom.create_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "train-pg", "ownerReferences": owned_by(job)}, "spec": {"minMember": 2}})
        core.create_namespaced_config_map("default", {"metadata": {"name": "mine"}})  # owned by nobody
        answer = custom.delete_namespaced_custom_object(*VC_JOB, "default", "jobs", "train")
        assert answer["status"] == "Success" and api.get("jobs.batch.volcano.sh", "train") is None
        assert api.get("services", "train") is not None  # the collector runs a moment later, as kube's does
        assert api.wait_collected()
        assert api.get("services", "train") is None and api.get("podgroups", "train-pg") is None
        assert api.get("pods", "train-worker-0") is None
        assert api.pods[("default", "train-worker-1")]["metadata"]["deletionTimestamp"]  # graceful: a kubelet's turn
        assert api.get("configmaps", "mine") is not None
        # the collector deletes through the API's rules, with the dependent's uid as precondition, and is no client
        assert api.count(verb="delete", plural="pods") == 0


def test_foreground_deletion_waits_for_the_dependents_that_block_it() -> None:
    with FakeApiServer(garbage_collector=False) as api:
        apps = client.AppsV1Api(api.client())
        rs = raw(apps.create_namespaced_replica_set, "default", {
            "metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
                                                  "template": {"metadata": {"labels": {"app": "web"}}}}})
        for i, block in enumerate((True, False)):
            p = pod(f"u{i}", f"web-{i}", "", phase="Pending", labels={"app": "web"})
            p["metadata"]["ownerReferences"] = owned_by(rs, block=block)
            api.put(p)
        answer = raw(apps.delete_namespaced_replica_set, "web", "default", body={"propagationPolicy": "Foreground"})
        assert answer["metadata"]["finalizers"] == ["foregroundDeletion"] and answer["metadata"]["deletionTimestamp"]
        assert api.get("replicasets", "web") is not None and len(api.pods) == 2  # nothing ran yet
        api.collect_garbage()
        assert api.pods == {} and api.get("replicasets", "web") is None


def test_orphan_deletion_and_batch_jobs_orphan_by_default() -> None:
    with FakeApiServer(garbage_collector=False) as api:
        batch = client.BatchV1Api(api.client())
        job = raw(batch.create_namespaced_job, "default", {
            "metadata": {"name": "once"}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
        assert job["status"] == {}
        p = pod("u", "once-x", "node-a")
        p["metadata"]["ownerReferences"] = owned_by(job)
        api.put(p)
        answer = raw(batch.delete_namespaced_job, "once", "default")  # no propagationPolicy: kube orphans
        assert answer["metadata"]["finalizers"] == ["orphan"]
        api.collect_garbage()
        assert api.get("jobs.batch", "once") is None
        assert "ownerReferences" not in api.pods[("default", "once-x")]["metadata"]  # the pod stays, orphaned
        api.put(job | {"metadata": {"name": "twice", "namespace": "default"}})
        with pytest.raises(ApiException) as err:
            raw(batch.delete_namespaced_job, "twice", "default", body={"propagationPolicy": "Sideways"})
        assert err.value.status == 422 and 'Unsupported value: "Sideways"' in body_of(err.value)["message"]
        with pytest.raises(ApiException) as err:
            raw(batch.delete_namespaced_job, "twice", "default", body={"propagationPolicy": "Orphan",
                                                                        "orphanDependents": True})
        assert err.value.status == 422


def test_an_object_owned_by_nothing_that_exists_is_collected_and_one_with_an_owner_left_keeps_it() -> None:
    with FakeApiServer(garbage_collector=False) as api:
        core = api.core_v1()
        owner = raw(core.create_namespaced_config_map, "default", {"metadata": {"name": "owner"}})
        ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "not-the-owners-uid"}
        core.create_namespaced_secret("default", {"metadata": {"name": "orphan", "ownerReferences": [ghost]}})
        two = [ghost, {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]
        core.create_namespaced_secret("default", {"metadata": {"name": "kept", "ownerReferences": two}})
        unknown = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "w1"}]
        core.create_namespaced_secret("default", {"metadata": {"name": "unknowable", "ownerReferences": unknown}})
        api.collect_garbage()
        assert api.get("secrets", "orphan") is None  # same name, another uid: not its owner
        kept = api.get("secrets", "kept")
        assert [r["uid"] for r in kept["metadata"]["ownerReferences"]] == [owner["metadata"]["uid"]]
        assert api.get("secrets", "unknowable") is not None  # a kind it does not serve: left alone
        # the owner recreated under its name is another object: what the first owned goes
        api.remove("configmaps", "owner")
        core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
        api.collect_garbage()
        assert api.get("secrets", "kept") is None


def test_without_the_collector_thread_nothing_goes_until_it_is_run() -> None:
    with FakeApiServer(garbage_collector=False) as api:
        core = api.core_v1()
        owner = raw(core.create_namespaced_config_map, "default", {"metadata": {"name": "owner"}})
        core.create_namespaced_secret("default", {"metadata": {"name": "s", "ownerReferences": owned_by(owner)}})
        core.delete_namespaced_config_map("owner", "default")
        time.sleep(0.1)
        assert api.get("secrets", "s") is not None
        assert api.collect_garbage() >= 1 and api.get("secrets", "s") is None


def test_services_get_a_cluster_ip_that_stays() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        svc = raw(core.create_namespaced_service, "default", {
            "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})
        ip = svc["spec"]["clusterIP"]
        assert ip.startswith("10.96.") and svc["spec"]["clusterIPs"] == [ip] and svc["spec"]["type"] == "ClusterIP"
        assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
        assert svc["status"] == {"loadBalancer": {}}  # the client's status is not taken on create
        headless = raw(core.create_namespaced_service, "default", {"metadata": {"name": "job"},
                                                                    "spec": {"clusterIP": "None"}})
        assert headless["spec"]["clusterIP"] == "None"
        other = raw(core.create_namespaced_service, "default", {"metadata": {"name": "db"},
                                                                 "spec": {"ports": [{"port": 5432}]}})
        assert other["spec"]["clusterIP"] != ip
        replaced = raw(core.replace_namespaced_service, "web", "default", {
            "metadata": {"name": "web", "resourceVersion": svc["metadata"]["resourceVersion"]},
            "spec": {"selector": {"app": "web2"}, "ports": [{"port": 81}]}})  # no clusterIP: the allocated one stays
        assert replaced["spec"]["clusterIP"] == ip and replaced["spec"]["selector"] == {"app": "web2"}
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_service("web", "default", {"spec": {"clusterIP": "10.96.9.9"}})
        assert err.value.status == 422 and "may not change once set" in body_of(err.value)["message"]
        for bad in ({}, {"ports": [{"port": 70000}]}, {"ports": [{"port": 1}, {"port": 2}]}):
            with pytest.raises(ApiException) as err:
                core.create_namespaced_service("default", {"metadata": {"name": "bad"}, "spec": bad})
            assert err.value.status == 422


def test_secrets_are_base64_and_string_data_is_folded_in() -> None:
    with FakeApiServer() as api:
        core = api.core_v1()
        made = raw(core.create_namespaced_secret, "default", {
            "metadata": {"name": "ssh"}, "data": {"id_rsa": "a2V5"}, "stringData": {"config": "Host *"}})
        assert made["data"] == {"id_rsa": "a2V5", "config": "SG9zdCAq"} and "stringData" not in made
        assert made["type"] == "Opaque"
        assert raw(core.list_namespaced_secret, "default", field_selector="type=Opaque")["items"]
        with pytest.raises(ApiException) as err:
            core.create_namespaced_secret("default", {"metadata": {"name": "b"}, "data": {"k": "not base64!"}})
        assert err.value.status == 400
        with pytest.raises(ApiException) as err:
            core.create_namespaced_secret("default", {"metadata": {"name": "b"}, "data": {"a key": "a2V5"}})
        assert err.value.status == 422 and "valid config key" in body_of(err.value)["message"]
        core.create_namespaced_config_map("default", {"metadata": {"name": "fixed"}, "data": {"a": "1"},
                                                      "immutable": True})
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_config_map("fixed", "default", {"data": {"a": "2"}})
        assert err.value.status == 422


def test_claims_network_policies_and_workloads_follow_their_rules() -> None:
    with FakeApiServer() as api:
        core, apps = api.core_v1(), client.AppsV1Api(api.client())
        net = client.NetworkingV1Api(api.client())
        claim = raw(core.create_namespaced_persistent_volume_claim, "default", {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}})
        assert claim["status"] == {"phase": "Pending"} and claim["spec"]["volumeMode"] == "Filesystem"
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_persistent_volume_claim("data", "default", {"spec": {"accessModes": ["ReadOnlyMany"]}})
        assert err.value.status == 422
        with pytest.raises(ApiException) as err:
            core.create_namespaced_persistent_volume_claim("default", {"metadata": {"name": "x"}, "spec": {}})
        assert err.value.status == 422 and len(body_of(err.value)["details"]["causes"]) == 2
        policy = raw(net.create_namespaced_network_policy, "default", {"metadata": {"name": "job"}, "spec": {
            "podSelector": {"matchLabels": {"job": "x"}}, "ingress": [{}]}})
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        with pytest.raises(ApiException) as err:
            apps.create_namespaced_deployment("default", {"metadata": {"name": "d"}, "spec": {
                "selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "b"}}}}})
        assert err.value.status == 422 and "does not match" in body_of(err.value)["message"]
        made = raw(apps.create_namespaced_stateful_set, "default", {"metadata": {"name": "s"}, "spec": {
            "selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}}}},
            "status": {"replicas": 9}})
        assert made["status"] == {} and made["spec"]["replicas"] == 1
