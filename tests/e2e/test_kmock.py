"""Kubernetes mode against kmock, an API server emulator this project did not write (issue 16).

The real command line (``python -m scheduler serve --kubernetes --kubeconfig ... --leader-elect``) runs
against ``kmock.KubernetesEmulator`` (PyPI ``kmock`` 0.8, by kopf's author) exactly as it ships: no reaction
of ours is added to it and none of its handlers is patched (tests/support/kmock_support.py only serves it
over HTTP, declares the resources, seeds objects and reads back what it stored and received).  The smoke
scenario: two nodes, a queue, a PodGroup of three, a pod that cannot fit, another scheduler's pod, a pod
whose anti-affinity selects namespaces by label, SIGTERM.  The nodes, the queue and the group are there
before the scheduler starts; the pods are POSTed while it runs, the third member of the gang a few cycles
after the first two.  The Job and PodGroup controllers run as shipped; their kinds are not declared to
kmock (tests/support/kmock_support.py), so it answers 404 for them, as a cluster without them would.

Checks that run here (CHECKS_RUN; one ``test_runs_<check>`` each, on one run of the scenario):

- ``informers``: every kind is listed, then watched from what the list answered.
- ``watch_delivers``: pods created after the start reach the scheduler by the watch alone.
- ``gang_whole``: nothing of the gang is bound before its third member exists; then all three at once,
  never more than a node holds.
- ``podgroup_status``: the PodGroup's phase and conditions are written onto the object.
- ``queue_status``: the Queue's ``status.allocated`` is written through its status subresource.
- ``unfit_pod``: the pod that cannot fit gets no bind, a PodScheduled=False condition and an event.
- ``other_scheduler``: another scheduler's pod gets no request at all.
- ``bind_404_reread``: a bind refused with 404 is followed by a read of the pod, not a silent retry.
- ``lease_taken``: the leader creates the Lease, holding it.
- ``sigterm_quiet``: SIGTERM while every watch is open and silent exits 0 within 2 s.
- ``unserved_kinds``: kinds refused (Namespaces, 500; the controllers' kinds, 404) hold nothing else back.
- ``namespaces_unlisted``: a pod whose terms select namespaces by label waits, saying namespaces are not
  listed yet.

Checks that cannot run against kmock 0.8 (CHECKS_NOT_RUN, with why; each reason is verified against kmock
as shipped by a ``test_kmock_lacks_<check>`` probe, which fails the day kmock grows the call, so the check
can move up):

- ``pods_binding``: no ``pods/binding`` (404), so no pod is ever bound here.
- ``pods_eviction``: no ``pods/eviction`` (404): preemption and PodDisruptionBudgets cannot be exercised.
- ``uid``: no ``metadata.uid`` on anything: uid preconditions and recreated pods cannot be checked.
- ``resource_version``: no resourceVersion semantics: no 409 on a stale one, no 410, watches replay all.
- ``lease_renewal``: no PUT, so the Lease is never renewed nor handed back on SIGTERM.
- ``event_objects``: ``generateName`` is ignored: only the first event is stored.
- ``watch_expiry``: ``timeoutSeconds`` is ignored: a watch never ends, so re-watching is not exercised.
- ``namespaces``: kmock 0.8 answers 500 to a namespaces list, so namespaceSelectors are never matched here.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

pytest.importorskip("kmock", reason="kmock is not installed (a test extra: pip install -e '.[test]')")

from hack.lib.processes import sigterm_timed, wait_port  # noqa: E402
from tests.support.kmock_support import KmockApiServer, Seen  # noqa: E402  (imports kmock: after the skip)
from tests.support.kube_harness import serve_kubernetes  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

CHECKS_RUN = {
    "informers": "pods, nodes, queues, podgroups, priorityclasses and PDBs each listed, then watched",
    "watch_delivers": "pods POSTed after the start bound from the watch alone (one list of pods)",
    "gang_whole": "no bind before the third member exists; then all three, at most two 2-cpu pods per 4-cpu node",
    "podgroup_status": "NotEnoughTasks while waiting, then phase Running with Scheduled, merged onto the PodGroup",
    "queue_status": "status.allocated (cpu 6 while the gang is assumed) PATCHed to queues/q/status",
    "unfit_pod": "no bind request, PodScheduled=False Unschedulable stored via pods/status, FailedScheduling sent",
    "other_scheduler": "no request names the default-scheduler's pod, no event involves it, it is never changed",
    "bind_404_reread": "each 404 from binding is followed by a GET of that pod (issue 16, item 3)",
    "lease_taken": "--leader-elect creates the Lease with this replica as holder",
    "sigterm_quiet": "SIGTERM with kmock's watches open and silent (no bookmarks, no timeout): exit 0 within 2 s",
    "unserved_kinds": "Namespaces (500) and the controllers' kinds (404) listed and refused, again and again, "
                      "while the port was written, the Lease taken and the gang bound: none of them gates "
                      "scheduling",
    "namespaces_unlisted": "the pod whose anti-affinity term has a namespaceSelector gets no bind and a "
                           "PodScheduled=False condition saying namespaces are not listed yet",
}

CHECKS_NOT_RUN = {
    "pods_binding": "kmock routes a POST on a named object (pods/NAME/binding) to no action: 404 Endpoint Not "
                    "Found.  No pod ever gets spec.nodeName, so bound pods, the Scheduled event, a bound pod's "
                    "accounting and 409 on binding a gated or bound pod cannot be checked; the binds sent are.",
    "pods_eviction": "pods/NAME/eviction is a POST on a named object too: 404.  Preemption, the 429 of a "
                     "PodDisruptionBudget and Terminating victims cannot be exercised.",
    "uid": "kmock stores objects as sent and assigns no metadata.uid (nor creationTimestamp).  The Binding's uid "
           "precondition, a pod recreated under its name, and the scheduler's uid-keyed cache meet only its "
           "namespace/name fallback; a pod read back after a bind 404 has no uid, so it reads as gone.",
    "resource_version": "a list answers resourceVersion '...', objects carry none, a PATCH carrying a stale "
                        "metadata.resourceVersion is merged in (200) instead of refused (409), and a watch ignores "
                        "its resourceVersion and replays every object as ADDED: no 410, no relist, no precondition.",
    "lease_renewal": "kmock routes PUT to no action (404), and the Lease is renewed and handed back with a "
                     "replace (PUT): here it is never renewed, and after SIGTERM it is still held.",
    "event_objects": "kmock ignores metadata.generateName and stores an object under metadata.name, so every "
                     "event lands under the name None: the second is refused 409.  Events are checked by what "
                     "was sent, not by what was stored.",
    "watch_expiry": "kmock ignores timeoutSeconds and never ends a watch nor sends a bookmark: the re-watch after "
                    "a server-side timeout cannot be exercised (SIGTERM on quiet watches can, and is).",
    "namespaces": "kmock 0.8 answers 500 to a namespaces list (declared or not, with Namespaces stored or not: it "
                  "reads /api/v1/namespaces as the prefix of a namespaced path and fails to split it), and 404 to "
                  "a Namespace by name.  The Namespace informer never lists, so a namespaceSelector is never "
                  "matched against labels here; only the wait while namespaces are not listed is checked.",
}

PG = "scheduling.volcano.sh/v1beta1"
KINDS = {  # informer -> the path it lists and watches
    "pods": "/api/v1/pods", "nodes": "/api/v1/nodes", "queues": f"/apis/{PG}/queues",
    "podgroups": f"/apis/{PG}/podgroups", "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
}
PODS = "/api/v1/namespaces/default/pods"
GANG = ("g-0", "g-1", "g-2")
NAMESPACES = "/api/v1/namespaces"
#: the controllers' informers (scheduler/modes/kubernetes/controllers.py, WATCHED): kinds kmock is not told of
CONTROLLER_KINDS = ("/apis/batch.volcano.sh/v1alpha1/jobs", "/apis/bus.volcano.sh/v1alpha1/commands",
                    "/api/v1/services", "/api/v1/configmaps", "/api/v1/secrets",
                    "/apis/networking.k8s.io/v1/networkpolicies", "/api/v1/persistentvolumeclaims",
                    "/apis/apps/v1/replicasets", "/apis/apps/v1/statefulsets", "/apis/apps/v1/daemonsets",
                    "/apis/batch/v1/jobs")


WAIT = 20.0  # seconds: the longest the scenario waits for one thing


def node(name: str, cpu: str = "4") -> dict:
    amounts = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": amounts, "capacity": dict(amounts)}}


def pod(name: str, cpu: str, *, group: str | None = None, scheduler: str = "scoria") -> dict:
    annotations = {"scheduling.volcano.sh/queue-name": "q"} if scheduler == "scoria" else {}
    if group:
        annotations["scheduling.k8s.io/group-name"] = group
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"}}


def picky(name: str) -> dict:
    """A pod kept off nodes holding pods of app=db in namespaces labelled team=red (a namespaceSelector)."""
    obj = pod(name, "1")
    obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
         "namespaceSelector": {"matchLabels": {"team": "red"}}}]}}
    return obj


def scheduled_condition(api: KmockApiServer, name: str) -> dict | None:
    conditions = ((api.get("v1/pods", name, "default") or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), None)


@dataclass
class Run:
    api: KmockApiServer
    seen: list[Seen]  # every request kmock received, in order
    created: dict[str, int]  # pod name -> the id of the request that created it
    returncode: int
    took: float  # seconds from SIGTERM to exit
    stderr: str

    def binds(self) -> list[Seen]:
        return [r for r in self.seen if r.method == "POST" and r.subresource == "binding"]

    def events_sent(self, name: str) -> list[dict]:
        return [r.data for r in self.seen if r.method == "POST" and r.path == "/api/v1/namespaces/default/events"
                and r.data["involvedObject"]["name"] == name]


def _watching(api: KmockApiServer) -> bool:
    paths = {r.path for r in api.requests() if r.action == "WATCH"}
    return all(path in paths for path in KINDS.values())


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("kmock")
    with KmockApiServer() as api:
        api.seed("v1/nodes", node("n1"))
        api.seed("v1/nodes", node("n2"))
        api.seed(f"{PG}/queues", {"apiVersion": PG, "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}})
        api.seed(f"{PG}/podgroups", {"apiVersion": PG, "kind": "PodGroup",
                                     "metadata": {"name": "gang", "namespace": "default"},
                                     "spec": {"minMember": 3, "queue": "q"}})
        # renewals fail here (lease_renewal), so the first term is made long enough for the whole scenario
        proc = serve_kubernetes(tmp, api.url, "--lease-duration", "120", "--renew-deadline", "100",
                                "--retry-period", "5", name="kmock")
        try:
            wait_port(tmp / "port", proc, 30)
            wait_until(lambda: _watching(api), WAIT, f"every kind watched: not reached in {WAIT:g} s", poll=0.05)
            wait_until(lambda: api.get("coordination.k8s.io/v1/leases", "scoria-scheduler", "kube-system"), WAIT,
                       f"the lease taken: not reached in {WAIT:g} s", poll=0.05)
            for obj in (pod("other", "1", scheduler="default-scheduler"), pod("huge", "64"), picky("picky"),
                        pod("g-0", "2", group="gang"), pod("g-1", "2", group="gang"), None, pod("g-2", "2", group="gang")):
                if obj is None:
                    time.sleep(1.0)  # five cycles with two of three members: a gang must not move
                    continue
                status, _ = api.create(PODS, obj)
                assert status in (200, 201), status

            def done() -> bool:
                seen = api.requests()
                huge = api.get("v1/pods", "huge", "default") or {}
                return (len([r for r in seen if r.subresource == "binding"]) >= 3
                        and any(r.action == "FETCH" and r.name == "g-2" for r in seen)
                        and bool((huge.get("status") or {}).get("conditions"))
                        and scheduled_condition(api, "picky") is not None
                        and any(r.path.endswith("/events") and r.data["involvedObject"]["name"] == "huge"
                                for r in seen if r.method == "POST"))
            wait_until(done, WAIT, f"the gang's binds, their read-backs and the unfit pod's condition and event: not reached "
                                 f"in {WAIT:g} s", poll=0.05)
            err, took = sigterm_timed(proc, 30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        seen = api.requests()
        created = {r.data["metadata"]["name"]: r.id for r in seen if r.action == "CREATE" and r.path == PODS}
        yield Run(api, seen, created, proc.returncode, took, err)


# -- what runs ---------------------------------------------------------------------------------------------
def test_runs_informers(run: Run) -> None:
    for kind, path in KINDS.items():
        lists = [r for r in run.seen if r.path == path and r.action == "LIST"]
        watches = [r for r in run.seen if r.path == path and r.action == "WATCH"]
        assert lists and watches, f"{kind}: listed {len(lists)}, watched {len(watches)}"
        assert lists[0].id < watches[0].id, f"{kind}: watched before listing"
        # the watch starts from what the list answered (kmock's opaque '...'), with bookmarks asked for
        assert watches[0].params.get("resourceVersion") == "...", watches[0].params
        assert watches[0].params.get("allowWatchBookmarks") == "true", watches[0].params


def test_runs_watch_delivers(run: Run) -> None:
    pod_lists = [r for r in run.seen if r.path == KINDS["pods"] and r.action == "LIST"]
    assert len(pod_lists) == 1, "pods were listed again: the watch alone must bring them"
    assert pod_lists[0].id < min(run.created.values())
    assert {r.name for r in run.binds()} == set(GANG)  # they were seen, so they came by the watch


def test_runs_gang_whole(run: Run) -> None:
    binds = run.binds()
    assert sorted(r.name for r in binds) == list(GANG), [r.name for r in binds]
    assert all(r.id > run.created["g-2"] for r in binds), "a member was bound before the gang was complete"
    per_node = Counter(r.data["target"]["name"] for r in binds)
    assert set(per_node) <= {"n1", "n2"} and max(per_node.values()) <= 2, per_node  # 2 cpu each, 4 cpu a node
    for r in binds:
        assert r.data["kind"] == "Binding" and r.data["target"]["kind"] == "Node"
        assert r.data["metadata"]["name"] == r.name and r.data["metadata"]["namespace"] == "default"


def test_runs_podgroup_status(run: Run) -> None:
    versions = [v for v in run.api.history(f"{PG}/podgroups", "gang", "default") if v]
    statuses = [v.get("status") or {} for v in versions]
    waiting = [i for i, s in enumerate(statuses)
               if any(c.get("reason") == "NotEnoughTasks" for c in s.get("conditions") or [])]
    running = [i for i, s in enumerate(statuses) if s.get("phase") == "Running"
               and any(c.get("type") == "Scheduled" and c.get("status") == "True" for c in s.get("conditions") or [])]
    assert waiting and running and waiting[0] < running[0], statuses
    assert all(v["spec"] == {"minMember": 3, "queue": "q"} for v in versions)  # only the status was written
    writes = [r for r in run.seen if r.method == "PATCH" and r.path.endswith("/podgroups/gang")]
    assert writes and all(set(r.data) == {"status"} for r in writes)


def test_runs_queue_status(run: Run) -> None:
    writes = [r for r in run.seen if r.method == "PATCH" and r.path.startswith(f"/apis/{PG}/queues/")]
    assert writes and all(r.path == f"/apis/{PG}/queues/q/status" for r in writes)
    allocated = [(v.get("status") or {}).get("allocated") for v in run.api.history(f"{PG}/queues", "q") if v]
    assert any(a and a.get("cpu") == "6" for a in allocated), allocated  # the whole gang, while assumed


def test_runs_unfit_pod(run: Run) -> None:
    assert not [r for r in run.binds() if r.name == "huge"]
    conditions = run.api.get("v1/pods", "huge", "default")["status"]["conditions"]
    scheduled = [c for c in conditions if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "False" and scheduled[0]["reason"] == "Unschedulable"
    assert "Insufficient cpu" in scheduled[0]["message"], scheduled
    assert [r for r in run.seen if r.method == "PATCH" and r.path == f"{PODS}/huge/status"]
    events = run.events_sent("huge")
    assert events and events[0]["reason"] == "FailedScheduling" and events[0]["type"] == "Warning"
    assert "Insufficient cpu" in events[0]["message"]


def test_runs_other_scheduler(run: Run) -> None:
    assert run.created["other"] < run.created["g-0"]  # it was there, in the cache, in every cycle that bound
    assert not [r for r in run.seen if r.name == "other"], "a request was addressed to the other scheduler's pod"
    assert not run.events_sent("other")
    assert len(run.api.history("v1/pods", "other", "default")) == 1  # stored once, never changed


def test_runs_bind_404_reread(run: Run) -> None:
    for r in run.binds():
        reads = [s for s in run.seen if s.id > r.id and s.action == "FETCH" and s.path == f"{PODS}/{r.name}"]
        assert reads, f"the 404 from binding {r.name} was not followed by reading the pod"
        assert f"bind default/{r.name} -> {r.data['target']['name']} refused: 404" in run.stderr


def test_runs_lease_taken(run: Run) -> None:
    lease = run.api.history("coordination.k8s.io/v1/leases", "scoria-scheduler", "kube-system")[0]
    assert lease and lease["spec"]["holderIdentity"], lease
    assert [r for r in run.seen if r.method == "POST" and r.path.endswith("/namespaces/kube-system/leases")]


def test_runs_sigterm_quiet(run: Run) -> None:
    # nothing exists of these kinds, and kmock sends no bookmarks: those watches said nothing, and were open
    assert not run.api.history("scheduling.k8s.io/v1/priorityclasses", "any")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.took < 2, f"SIGTERM took {run.took:.1f} s to exit"


def test_runs_unserved_kinds(run: Run) -> None:
    first_bind = min(r.id for r in run.binds())
    for path in CONTROLLER_KINDS:
        lists = [r for r in run.seen if r.path == path and r.action == "LIST"]
        assert len(lists) >= 2 and lists[0].id < first_bind, f"{path}: asked {len(lists)} times"  # refused, retried
        assert not [r for r in run.seen if r.path == path and r.action == "WATCH"], path  # never listed
    # kmock keeps no record of a request it fails with 500: serve's log says it was asked, and refused, again
    assert run.stderr.count("namespaces: API error 500") >= 2, run.stderr[-3000:]
    assert "jobs.batch.volcano.sh: API error 404 Not Found" in run.stderr
    # a kind not served is said once; its retries are not news
    assert run.stderr.count("jobs.batch.volcano.sh: API error 404") == 1, run.stderr[-3000:]


def test_runs_namespaces_unlisted(run: Run) -> None:
    assert not [r for r in run.binds() if r.name == "picky"]
    condition = scheduled_condition(run.api, "picky")
    assert condition and condition["status"] == "False" and condition["reason"] == "Unschedulable", condition
    assert "namespaces are not listed yet" in condition["message"], condition
    events = run.events_sent("picky")
    assert events and "namespaces are not listed yet" in events[0]["message"]


# -- what cannot run, and kmock as shipped says why ---------------------------------------------------------
@pytest.fixture(scope="module")
def probe() -> Iterator[KmockApiServer]:
    with KmockApiServer() as api:
        api.seed("v1/nodes", node("n1"))
        assert api.create(PODS, pod("p", "1"))[0] in (200, 201)
        yield api


def _ask(api: KmockApiServer, method: str, path: str, body: object = None,
         content_type: str = "application/json") -> tuple[int, dict]:
    url = urlsplit(api.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": content_type})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def test_kmock_lacks_pods_binding(probe: KmockApiServer) -> None:
    status, body = _ask(probe, "POST", f"{PODS}/p/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
    assert (status, body["reason"]) == (404, "Endpoint Not Found")
    assert "nodeName" not in probe.get("v1/pods", "p", "default")["spec"]


def test_kmock_lacks_pods_eviction(probe: KmockApiServer) -> None:
    status, body = _ask(probe, "POST", f"{PODS}/p/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}})
    assert (status, body["reason"]) == (404, "Endpoint Not Found")
    assert probe.get("v1/pods", "p", "default") is not None


def test_kmock_lacks_uid(probe: KmockApiServer) -> None:
    status, created = _ask(probe, "POST", PODS, pod("u", "1"))
    assert status in (200, 201)
    for obj in (created, probe.get("v1/pods", "u", "default"), _ask(probe, "GET", f"{PODS}/u")[1]):
        assert "uid" not in obj["metadata"] and "creationTimestamp" not in obj["metadata"], obj["metadata"]


def test_kmock_lacks_resource_version(probe: KmockApiServer) -> None:
    status, listed = _ask(probe, "GET", "/api/v1/pods")
    assert status == 200 and listed["metadata"]["resourceVersion"] == "..."
    assert all("resourceVersion" not in obj["metadata"] for obj in listed["items"])
    # a write with a stale resourceVersion is merged in, not refused 409
    status, patched = _ask(probe, "PATCH", f"{PODS}/p", {"metadata": {"resourceVersion": "stale-1"}},
                           "application/merge-patch+json")
    assert status == 200 and patched["metadata"]["resourceVersion"] == "stale-1"
    # a watch from a resourceVersion replays what exists, as ADDED: no 410, nothing skipped
    url = urlsplit(probe.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    try:
        conn.request("GET", "/api/v1/pods?watch=true&resourceVersion=999999999")
        resp = conn.getresponse()
        assert resp.status == 200
        first = json.loads(resp.readline())
    finally:
        conn.close()
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] in ("p", "u")


def test_kmock_lacks_lease_renewal(probe: KmockApiServer) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"holderIdentity": "a"}}
    assert _ask(probe, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease)[0] in (200, 201)
    lease["spec"]["holderIdentity"] = None
    status, body = _ask(probe, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", lease)
    assert (status, body["reason"]) == (404, "Endpoint Not Found")
    assert probe.get("coordination.k8s.io/v1/leases", "l", "kube-system")["spec"]["holderIdentity"] == "a"


def test_kmock_lacks_event_objects(probe: KmockApiServer) -> None:
    def event(reason: str) -> dict:
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "p.", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": reason}
    first, _ = _ask(probe, "POST", "/api/v1/namespaces/default/events", event("A"))
    second, _ = _ask(probe, "POST", "/api/v1/namespaces/default/events", event("B"))
    assert first in (200, 201) and second == 409
    assert probe.get("v1/events", None, "default")["reason"] == "A"


def test_kmock_lacks_namespaces(probe: KmockApiServer) -> None:
    probe.seed("v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for path in (NAMESPACES, f"{NAMESPACES}?limit=500", f"{NAMESPACES}?watch=true"):
        status, body = _ask(probe, "GET", path)
        assert status == 500 and "not enough values to unpack" in body["message"], (path, status, body)
    status, body = _ask(probe, "GET", f"{NAMESPACES}/default")
    assert status == 404, (status, body)


def test_kmock_lacks_watch_expiry(probe: KmockApiServer) -> None:
    url = urlsplit(probe.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=2.5)
    try:
        conn.request("GET", "/apis/scheduling.k8s.io/v1/priorityclasses?watch=true&timeoutSeconds=1"
                            "&allowWatchBookmarks=true")
        resp = conn.getresponse()
        assert resp.status == 200
        with pytest.raises((TimeoutError, socket.timeout)):  # open and silent past its timeout: no end, no bookmark
            resp.read(1)
    finally:
        conn.close()


# -- the lists above are what this module says ---------------------------------------------------------------
def test_the_docstring_lists_the_checks_that_run_and_those_that_cannot() -> None:
    doc = __doc__ or ""
    runs, lacks = doc.split("Checks that run here")[1].split("Checks that cannot run")
    named = re.compile(r"^- ``(\w+)``:", re.M)
    assert named.findall(runs) == list(CHECKS_RUN)
    assert named.findall(lacks) == list(CHECKS_NOT_RUN)
    assert not set(CHECKS_RUN) & set(CHECKS_NOT_RUN)
    tests = {name for name in globals() if name.startswith("test_")}
    assert {f"test_runs_{check}" for check in CHECKS_RUN} <= tests
    assert {f"test_kmock_lacks_{check}" for check in CHECKS_NOT_RUN} <= tests
    assert {t for t in tests if t.startswith(("test_runs_", "test_kmock_lacks_"))} == (
        {f"test_runs_{c}" for c in CHECKS_RUN} | {f"test_kmock_lacks_{c}" for c in CHECKS_NOT_RUN})
    assert all(why.strip() for why in CHECKS_NOT_RUN.values())
