"""Volcano Jobs in Kubernetes mode: the real controllers, informers, scheduler and ``kubernetes`` client against
hack/lib/fake_apiserver.py (with its garbage collector).  The test plays the kubelet: it marks bound pods
Running, Succeeded or Failed, and finishes terminating ones."""

from __future__ import annotations

import copy
import time
from datetime import UTC, datetime

import pytest

from hack.lib.fake_apiserver import CRD_DIR, RESOURCES, FakeApiServer, load_crds, node
from scheduler.controllers.vcctl import RESUME, SUSPEND, job_command
from tests.support.kube_jobs import CONTAINER, VC_JOB, WRITES, Cluster, clusters, two_node_api, volcano_job, wait_until

api = pytest.fixture(two_node_api, name="api")
cluster = pytest.fixture(clusters, name="cluster")


def test_a_job_runs_to_completed_through_the_api_server(api, cluster) -> None:
    c = cluster()
    job = c.custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", volcano_job())
    uid = job["metadata"]["uid"]
    wait_until(lambda: api.get("podgroups", f"train-{uid}", "default") is not None)
    group = api.get("podgroups", f"train-{uid}", "default")
    assert group["metadata"]["ownerReferences"][0]["uid"] == uid and group["spec"]["minMember"] == 2
    assert c.pods() == {}  # the pods wait for the scheduler to admit the group
    c.drive(lambda: len(c.pods()) == 2 and all(p["spec"].get("nodeName") for p in c.pods().values()))
    for name, pod in c.pods().items():
        assert name in ("train-worker-0", "train-worker-1")
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == ("Job", uid, True, True)
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"train-{uid}"
    c.drive(lambda: c.phase() == "Running")
    status = c.job()["status"]
    assert status["running"] == 2 and status["minAvailable"] == 2
    for name in c.pods():
        c.set_phase(name, "Succeeded")
    wait_until(lambda: c.phase() == "Completed")
    assert c.job()["status"]["succeeded"] == 2
    assert c.quiet_writes() == 0  # settled: nothing more to write


def run_to(c: Cluster, phase: str) -> None:
    c.drive(lambda: c.phase() == phase and len(c.pods()) > 0
            and all(p["status"].get("phase") == "Running" for p in c.pods().values()),
            message=f"the Job did not get to {phase}")


def test_a_failing_pod_restarts_the_job_until_max_retry_then_it_failed(api, cluster) -> None:
    c = cluster()
    c.custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", volcano_job(
        maxRetry=2, policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    retries = []
    for _ in range(3):
        if c.phase() == "Failed":
            break
        run_to(c, "Running")
        retries.append(c.job()["status"].get("retryCount", 0))
        c.set_phase("train-worker-0", "Failed", exit_code=1)
        c.drive(lambda: c.phase() in ("Restarting", "Failed"))
        c.drive(lambda: c.phase() != "Restarting")
    assert retries == [0, 1] and c.phase() == "Failed"
    assert c.job()["status"]["retryCount"] == 2
    c.drive(lambda: sorted(c.pods()) == ["train-worker-0"])  # the running one is killed; a finished one is kept
    assert c.quiet_writes() == 0


def test_suspend_and_resume_through_commands(api, cluster) -> None:
    c = cluster()
    c.custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", volcano_job())
    run_to(c, "Running")
    command = c.custom.create_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "default", "commands",
                                                       job_command(c.job(), SUSPEND))
    c.drive(lambda: c.phase() == "Aborted", message="not suspended")
    assert c.pods() == {} and api.objects("commands.bus.volcano.sh") == []  # the Command is taken and deleted
    issued = [e for e in api.objects("events") if e["reason"] == "CommandIssued"]
    assert issued and issued[0]["involvedObject"]["uid"] == c.job()["metadata"]["uid"]
    assert issued[0]["involvedObject"]["kind"] == "Job" and issued[0]["source"]["component"] == "scoria"
    assert command["metadata"]["name"].startswith("train-abortjob-")
    c.custom.create_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "default", "commands",
                                             job_command(c.job(), RESUME))
    run_to(c, "Running")
    assert sorted(c.pods()) == ["train-worker-0", "train-worker-1"]


def test_a_replica_that_does_not_lead_never_writes(api, cluster) -> None:
    api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "scoria-scheduler", "namespace": "kube-system"},
             "spec": {"holderIdentity": "another-replica", "leaseDurationSeconds": 3,
                      "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}})
    api.put(volcano_job() | {"metadata": {"name": "train", "namespace": "default"}})
    c = cluster(leader_elect=True, lease_namespace="kube-system", lease_duration=3, renew_deadline=2,
                retry_period=0.2)
    assert c.kube.source.wait_synced(5)
    wait_until(c.controllers.synced)
    time.sleep(1.0)  # the other replica's lease holds for 3 s after this one first saw it
    assert not [c_ for c_ in api.calls if c_.verb in WRITES], "a follower wrote"
    assert c.controllers.reconciles == 0 and c.job().get("status") is None
    wait_until(lambda: c.controllers.reconciles > 0, timeout=10)  # the lease lapsed: this replica leads now
    uid = c.job()["metadata"]["uid"]
    wait_until(lambda: api.get("podgroups", f"train-{uid}", "default") is not None)


def test_of_two_replicas_only_the_leader_runs_the_controllers(api, cluster) -> None:
    lease = {"leader_elect": True, "lease_namespace": "kube-system", "lease_duration": 3, "renew_deadline": 2,
             "retry_period": 0.2}
    first = cluster(**lease)
    wait_until(first.kube.leading)
    second = cluster(**lease)
    assert second.kube.source.wait_synced(5)
    first.custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", volcano_job())
    run_to(first, "Running")
    assert not second.kube.leading() and second.controllers.reconciles == 0
    assert second.kube.effects.metrics.kube_writes.labels("controller", "ok")._value.get() == 0
    assert api.count(verb="create", plural="pods", subresource=None) == 2
    assert api.count(verb="create", plural="podgroups") == 1


def test_a_restarted_scheduler_re_derives_everything_and_creates_nothing_twice(api, cluster) -> None:
    first = cluster()
    first.custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", volcano_job(
        plugins={"svc": [], "env": []}))
    run_to(first, "Running")
    before = {kind: api.objects(kind) for kind in ("services", "configmaps", "networkpolicies", "podgroups")}
    first.close()
    api.reset_requests()
    second = cluster()
    wait_until(lambda: second.controllers.reconciles >= 1)
    assert second.quiet_writes(0.5) == 0
    assert api.count(verb="create") == 0 and api.count(verb="delete") == 0
    assert {kind: api.objects(kind) for kind in before} == before
    for name in second.pods():
        second.set_phase(name, "Succeeded")
    wait_until(lambda: second.phase() == "Completed")


def test_a_deployments_pods_get_one_podgroup_per_owner(api, cluster) -> None:
    labels = {"app": "web"}
    deployment = api.put({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                          "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                                   "template": {"metadata": {"labels": labels}}}})
    rs = api.put({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "web-5d8f", "ownerReferences": [
                      {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                       "uid": deployment["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
                      "annotations": {"scheduling.volcano.sh/queue-name": "default"}},
                  "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}}}})
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": rs["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}
    for i in range(2):
        api.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"web-5d8f-{i}", "namespace": "default", "labels": labels,
                              "ownerReferences": [owner]},
                 "spec": {"schedulerName": "scoria", "containers": [copy.deepcopy(CONTAINER)]},
                 "status": {"phase": "Pending"}})
    c = cluster()
    name = f"podgroup-{rs['metadata']['uid']}"
    wait_until(lambda: api.get("podgroups", name, "default") is not None)
    group = api.get("podgroups", name, "default")
    assert group["metadata"]["ownerReferences"] == [owner] and group["spec"]["minMember"] == 1
    wait_until(lambda: all(api.get("pods", f"web-5d8f-{i}", "default")["metadata"].get("annotations", {})
                           .get("scheduling.k8s.io/group-name") == name for i in range(2)))
    c.drive(lambda: all(api.get("pods", f"web-5d8f-{i}", "default")["spec"].get("nodeName") for i in range(2)))
    assert len(api.objects("podgroups")) == 1
    # the ReplicaSet goes: its pods and their PodGroup go with it (the garbage collector)
    api.remove("replicasets", "web-5d8f", "default")
    assert api.wait_collected()
    api.finish_terminating(everything=True)
    assert api.objects("podgroups") == [] and not api.pods



def owner_ref(obj: dict) -> dict:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def put_workload_pods(api: FakeApiServer) -> None:
    """A pod under each kind of owner the PodGroup controller reads."""
    labels = {"app": "w"}
    template = {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}}
    owners = [api.put({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": f"w-{kind.lower()}"},
                       "spec": dict(template)}) for kind in ("ReplicaSet", "StatefulSet", "DaemonSet")]
    owners.append(api.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w-job"},
                           "spec": {"template": {"spec": {"containers": [CONTAINER]}}}}))
    for owner in owners:
        api.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{owner['metadata']['name']}-0", "namespace": "default", "labels": labels,
                              "ownerReferences": [owner_ref(owner)]},
                 "spec": {"schedulerName": "scoria", "containers": [copy.deepcopy(CONTAINER)]},
                 "status": {"phase": "Pending"}})


def needed_rights(api: FakeApiServer) -> set[tuple[str, str, str, str]]:
    """(namespace or "cluster", group, resource, verb) of every request logged, and the ``<owner>/finalizers``
    update that setting blockOwnerDeletion on a reference asks for (OwnerReferencesPermissionEnforcement)."""
    out = set()
    for call in api.calls:
        if call.plural is None:
            continue
        resource = call.plural + (f"/{call.subresource}" if call.subresource else "")
        out.add((call.namespace or "cluster", call.group or "", resource, call.verb))
        if call.verb in ("create", "update") and isinstance(call.body, dict):
            for ref in (call.body.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("blockOwnerDeletion"):
                    group = ref["apiVersion"].rpartition("/")[0]
                    res = next(r for r in api.resources.values() if r.group == group and r.kind == ref["kind"])
                    out.add(("cluster", group, f"{res.plural}/finalizers", "update"))
    return out


def test_every_request_of_the_controllers_is_granted_and_every_right_they_add_is_used(api, cluster) -> None:
    from tests.test_daemonset import CONTROLLER_RIGHTS, granted

    api.put_namespace("scoria-system")
    put_workload_pods(api)
    # seeded, not sent: the requests logged are the scheduler's own
    api.put(volcano_job("mpi", plugins={"svc": [], "ssh": [], "env": []}, ttlSecondsAfterFinished=0,
                        policies=[{"event": "PodFailed", "action": "RestartJob"}],
                        volumes=[{"mountPath": "/data", "volumeClaim": {
                            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
            | {"metadata": {"name": "mpi", "namespace": "default"}})
    c = cluster(leader_elect=True, lease_namespace="scoria-system", lease_duration=3, renew_deadline=2,
                retry_period=0.2)
    run_to_ = lambda: c.drive(lambda: c.phase("mpi") == "Running" and all(  # noqa: E731
        p["status"].get("phase") == "Running" for p in c.pods("mpi").values()), message="mpi not running")
    run_to_()
    stored = c.job("mpi")
    stored["spec"]["tasks"][0]["replicas"] = 3  # the hosts ConfigMap is updated, the PodGroup too
    api.put(stored)
    c.drive(lambda: len(c.pods("mpi")) == 3)
    run_to_()
    c.set_phase("mpi-worker-0", "Failed", exit_code=1)  # RestartJob: pods and PodGroup deleted, made again
    c.drive(lambda: c.phase("mpi") == "Restarting")
    run_to_()
    api.put(job_command(c.job("mpi"), SUSPEND))
    c.drive(lambda: c.phase("mpi") == "Aborted")
    api.put(job_command(c.job("mpi"), RESUME))
    run_to_()
    for name in c.pods("mpi"):
        c.set_phase(name, "Succeeded")
    wait_until(lambda: not c.job("mpi"))  # ttlSecondsAfterFinished: 0
    assert api.wait_collected()
    assert not [o for kind in ("services", "configmaps", "secrets", "networkpolicies", "persistentvolumeclaims")
                for o in api.objects(kind) if o["metadata"].get("ownerReferences")]
    c.drive(lambda: all(p["spec"].get("nodeName") for p in api.pods.values()))  # the workloads' pods

    rights = granted("scoria-scheduler")
    needed = needed_rights(api)
    refused = {n for n in needed
               if not any(n[3] in rights.get((scope, n[1], n[2], name), set())
                          for scope in {"cluster", n[0]} for name in ("*", "scoria-scheduler"))}
    assert not refused, f"requests the scheduler's RBAC does not grant: {sorted(refused)}"
    # ssh replaces a key Secret only when one of an earlier life differs: not met here
    not_met = {("cluster", "", "secrets", "update")}
    unused = {(k[0], k[1], k[2], verb) for k, verbs in CONTROLLER_RIGHTS.items() for verb in verbs
              if (k[0], k[1], k[2], verb) not in not_met
              and not any((scope, k[1], k[2], verb) in needed for scope in ("cluster", "default"))}
    assert not unused, f"rights granted to the controllers that nothing used: {sorted(unused)}"


def test_a_job_admission_refuses_gets_one_warning_event_and_is_left_alone(api, cluster) -> None:
    bad = volcano_job("dup")
    bad["spec"]["tasks"].append(copy.deepcopy(bad["spec"]["tasks"][0]))  # two tasks named "worker"
    api.put(bad | {"metadata": {"name": "dup", "namespace": "default"}})
    c = cluster()
    wait_until(lambda: [e for e in api.objects("events") if e["reason"] == "FailedAdmission"])
    (event,) = [e for e in api.objects("events") if e["reason"] == "FailedAdmission"]
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "dup" and "worker" in event["message"]
    assert c.quiet_writes(0.5) == 0 and not api.pods and not api.objects("podgroups")


def test_without_volcanos_job_crds_the_scheduler_and_the_podgroup_controller_still_work(cluster) -> None:
    kept = tuple(r for r in load_crds(CRD_DIR) if r.group == "scheduling.volcano.sh")
    with FakeApiServer(crds=None, resources=(*RESOURCES, *kept)) as api:
        assert ("batch.volcano.sh", "v1alpha1", "jobs") not in api.resources
        api.put(node("n1", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
        put_workload_pods(api)
        c = Cluster(api)
        try:
            # the scheduler may bind a pod before the controller has made its PodGroup (one of its own, then):
            # the controller makes it all the same, bound or not
            c.drive(lambda: all(p["spec"].get("nodeName") for p in api.pods.values())
                    and len(api.objects("podgroups")) == 4, message="not bound, or without PodGroups")
            assert len(api.objects("podgroups")) == 4
            jobs = next(i for i in c.controllers.informers if i.kind.startswith("jobs.batch.volcano.sh"))
            assert jobs.missing and c.kube.ready()
        finally:
            c.close()


def test_the_host_writes_only_onto_the_object_it_read(api, cluster) -> None:
    """uid preconditions: a status, an annotation or a delete meant for an object that was replaced under its
    name by another is refused by the server, and the host says so as the loop expects."""
    from scheduler.controllers.host import AlreadyExists, HostError, NotFound
    from scheduler.controllers.kinds import JOB, POD
    from scheduler.modes.kubernetes.controllers import KubeHost
    from scheduler.modes.kubernetes.informer import Informer

    c = cluster()
    first = api.put(volcano_job() | {"metadata": {"name": "train", "namespace": "default"}})
    api.remove("jobs.batch.volcano.sh", "train", "default")
    api.put(volcano_job() | {"metadata": {"name": "train", "namespace": "default"}})  # another uid
    pod = api.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                   "spec": {"containers": [CONTAINER]}})
    stale = Informer("jobs", lambda **kw: None, on_upsert=lambda o: None, on_delete=lambda o: None)
    stale.known["default/train"] = first  # what this host read before the Job was replaced
    pods = Informer("pods", lambda **kw: None, on_upsert=lambda o: None, on_delete=lambda o: None)
    pods.known["default/p"] = pod | {"metadata": {**pod["metadata"], "uid": "an-older-pod"}}
    host = KubeHost(api.client(), c.kube.effects, {JOB: stale, POD: pods})
    with pytest.raises(HostError):
        host.write_status(JOB, "default", "train", {"state": {"phase": "Running"}})
    assert api.get("jobs.batch.volcano.sh", "train", "default").get("status") is None
    with pytest.raises(HostError):
        host.annotate(POD, "default", "p", {"volcano.sh/controller-out-of-sync": "true"})
    with pytest.raises(NotFound):
        host.delete(JOB, "default", "train", uid=first["metadata"]["uid"])
    assert api.get("jobs.batch.volcano.sh", "train", "default") is not None
    with pytest.raises(AlreadyExists):
        host.create(volcano_job() | {"metadata": {"name": "train", "namespace": "default"}})
    with pytest.raises(NotFound):
        host.delete(JOB, "default", "nothing")


def test_without_the_controllers_jobs_are_left_to_volcano(api, cluster, tmp_path) -> None:
    """``serve --kubernetes --no-job-controllers``: beside Volcano's own controller-manager, nothing of a Job is
    touched, and Jobs are not even watched."""
    from scheduler.cli import build_parser, select_mode
    from tests.support.kube_harness import write_kubeconfig

    kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", api.url))
    for flags, wanted in (([], True), (["--no-job-controllers"], False)):
        args = build_parser().parse_args(["serve", "--kubernetes", "--kubeconfig", kubeconfig, *flags])
        assert select_mode(args).settings["controllers"] is wanted
    c = cluster(controllers=False)
    assert c.kube.controllers is None
    api.put(volcano_job() | {"metadata": {"name": "train", "namespace": "default"}})
    c.cycle()
    time.sleep(0.3)
    assert not api.objects("podgroups") and not [x for x in api.calls if x.group == "batch.volcano.sh"]


def test_the_controllers_keep_only_what_a_job_owns_and_every_object_names_its_kind(api, cluster) -> None:
    """The plugin kinds are watched cluster-wide, but only a Job's own objects are held (and handed to the
    controllers): a ConfigMap of someone else's is never in their view; one that a Job comes to own enters it,
    and one that stops being owned leaves it.  List items (which carry no kind) get theirs back."""
    from scheduler.controllers.kinds import CONFIGMAP, POD

    api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "someone-elses", "namespace": "default"}})
    api.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "listed", "namespace": "default"},
             "spec": {"containers": [CONTAINER]}})
    c = cluster()
    wait_until(c.controllers.synced)
    host = c.controllers.host
    assert host.list(CONFIGMAP) == []
    (pod,) = host.list(POD)
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")  # it came from a list, which drops them
    job = c.custom.create_namespaced_custom_object(*VC_JOB, "default", "jobs", volcano_job())
    owned = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "someone-elses", "namespace": "default",
             "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                                  "uid": job["metadata"]["uid"], "controller": True}]}}
    api.put(owned)
    wait_until(lambda: [o["metadata"]["name"] for o in host.list(CONFIGMAP)] == ["someone-elses"])
    api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "someone-elses", "namespace": "default"}})
    wait_until(lambda: host.list(CONFIGMAP) == [])
