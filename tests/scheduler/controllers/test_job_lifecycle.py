"""The Job controller over time, through the loop and a MemoryHost: what it creates, how a Job moves through its
phases on pod events, policies, Commands, dependsOn, scaling and ttl, and that it writes only what changed."""

from __future__ import annotations

import base64

from scheduler.controllers.jobs import keys
from scheduler.controllers.kinds import CONFIGMAP, NETWORK_POLICY, PODGROUP, SECRET, SERVICE, annotations_of, labels_of
from tests.support.jobcluster import JobCluster, job_manifest


def started(job: dict, *, graceful: bool = False) -> JobCluster:
    """The Job applied, its PodGroup admitted and its pods created."""
    cluster = JobCluster(graceful_pods=graceful)
    cluster.host.create(job)
    cluster.settle()
    cluster.admit()
    cluster.settle()
    return cluster


# == what a Job makes ============================================================================================
def test_a_new_job_gets_its_podgroup_and_plugin_objects_and_waits_for_admission() -> None:
    cluster = JobCluster()
    cluster.host.create(job_manifest(plugins={"pytorch": [], "ssh": []}))
    cluster.settle()
    job = cluster.job()
    uid = job["metadata"]["uid"]
    (group,) = cluster.podgroups()
    assert group["metadata"]["name"] == f"train-{uid}"
    assert group["metadata"]["ownerReferences"] == [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                                      "name": "train", "uid": uid, "controller": True,
                                                      "blockOwnerDeletion": True}]
    assert group["spec"]["minMember"] == 3 and group["spec"]["minTaskMember"] == {"master": 1, "worker": 2}
    assert group["spec"]["minResources"]["cpu"] == "3" and group["spec"]["queue"] == "default"
    assert cluster.pods() == {}  # not before the scheduler admits the group
    assert cluster.phase() == "Pending"
    assert cluster.status()["controlledResources"] == {"plugin-pytorch": "pytorch", "plugin-ssh": "ssh",
                                                        "plugin-svc": "svc"}
    assert cluster.host.get(SERVICE, "default", "train") and cluster.host.get(CONFIGMAP, "default", "train-svc")
    assert cluster.host.get(NETWORK_POLICY, "default", "train") and cluster.host.get(SECRET, "default", "train-ssh")


def test_pods_carry_volcanos_names_labels_and_annotations() -> None:
    cluster = started(job_manifest(queue="default", plugins={"svc": []}, priorityClassName="high"))
    assert cluster.pod_names() == ["train-master-0", "train-worker-0", "train-worker-1"]
    pod = cluster.pods()["train-worker-1"]
    uid = cluster.job()["metadata"]["uid"]
    assert annotations_of(pod) == {
        keys.TASK_INDEX: "1", keys.TASK_SPEC: "worker", keys.GROUP_NAME: f"train-{uid}", keys.JOB_NAME: "train",
        keys.QUEUE_NAME: "default", keys.JOB_VERSION: "0", keys.TEMPLATE_UID: "train-worker",
        keys.JOB_RETRY_COUNT: "0"}
    assert labels_of(pod) == {keys.TASK_INDEX: "1", keys.JOB_NAME: "train", keys.TASK_SPEC: "worker",
                              keys.JOB_NAMESPACE: "default", keys.QUEUE_NAME: "default"}
    assert pod["metadata"]["ownerReferences"][0]["uid"] == uid
    spec = pod["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("train-worker-1", "train")
    assert spec["schedulerName"] == "scoria" and spec["priorityClassName"] == "high"


def test_a_second_reconcile_with_nothing_changed_writes_nothing() -> None:
    cluster = started(job_manifest(plugins={"mpi": []}, tasks=[{"name": "master", "replicas": 1},
                                                              {"name": "worker", "replicas": 2}]))
    before = cluster.host.writes
    assert cluster.reconcile().writes == 0 and cluster.host.writes == before


def test_status_follows_the_pods_and_is_written_only_when_it_changes() -> None:
    cluster = started(job_manifest())
    status = cluster.status()
    assert (status["pending"], status.get("running", 0)) == (3, 0)
    cluster.set_phase("Running")
    writes = cluster.settle()
    assert writes == 1  # one status write for three pods' changes
    status = cluster.status()
    assert cluster.phase() == "Running" and status["running"] == 3 and "pending" not in status
    assert status["taskStatusCount"] == {"master": {"phase": {"Running": 1}}, "worker": {"phase": {"Running": 2}}}
    assert [c["status"] for c in status["conditions"]] == ["Pending", "Running"]


def test_job_completes_when_every_pod_succeeded() -> None:
    cluster = started(job_manifest())
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Succeeded")
    cluster.settle()
    assert cluster.phase() == "Completed" and cluster.status()["succeeded"] == 3


def test_a_failed_task_minimum_fails_the_job() -> None:
    cluster = started(job_manifest())
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Succeeded", "train-master-0", "train-worker-0")
    cluster.set_phase("Failed", "train-worker-1", exit_code=1)
    cluster.settle()
    assert cluster.phase() == "Failed"


def test_min_success_completes_early() -> None:
    cluster = started(job_manifest(minSuccess=1))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Succeeded", "train-master-0")
    cluster.settle()
    assert cluster.phase() == "Completed"


# == policies ==================================================================================================
def test_pod_failed_restarts_the_job_until_max_retry() -> None:
    cluster = started(job_manifest(maxRetry=2, policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    for attempt in (1, 2):
        cluster.set_phase("Running")
        cluster.settle()
        cluster.set_phase("Failed", "train-worker-0", exit_code=1)
        cluster.settle()
        status = cluster.status()
        assert status["retryCount"] == attempt and status["version"] >= attempt
        if attempt == 2:  # (a finished job's version keeps growing with every kill, as in Volcano)
            break
        # every pod killed; the job waits, Restarting, until the scheduler admits its new group (as in Volcano)
        assert cluster.phase() == "Restarting" and cluster.pods() == {}
        assert [(g.get("status") or {}).get("phase", "Pending") for g in cluster.podgroups()] == ["Pending"]
        cluster.admit()
        cluster.settle()
        assert cluster.phase() == "Pending"
        assert set(cluster.versions().values()) == {str(attempt)}
        assert annotations_of(cluster.pods()["train-master-0"])[keys.JOB_RETRY_COUNT] == str(attempt)
    assert cluster.phase() == "Failed"
    assert "train-worker-0" in cluster.pods()  # the last retry keeps the failed pod
    assert "Start to execute action RestartJob " in cluster.events(keys.REASON_EXECUTE_ACTION)


def test_killed_pods_are_marked_out_of_sync_before_they_go() -> None:
    cluster = started(job_manifest(policies=[{"event": "PodFailed", "action": "RestartJob"}]), graceful=True)
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Failed", "train-master-0", exit_code=2)
    cluster.reconcile()
    pods = cluster.pods()
    assert all(annotations_of(p).get(keys.OUT_OF_SYNC) == "true" for p in pods.values())
    assert all(p["metadata"].get("deletionTimestamp") for p in pods.values())
    assert cluster.phase() == "Restarting" and cluster.status()["terminating"] == 3
    cluster.settle()
    assert cluster.phase() == "Restarting"  # the pods are still terminating
    cluster.host.finish_terminating()
    cluster.settle()
    cluster.admit()
    cluster.settle()
    assert cluster.phase() == "Pending" and cluster.status()["retryCount"] == 1 and len(cluster.pods()) == 3


def test_pod_evicted_restarts_the_job() -> None:
    cluster = started(job_manifest(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.evict("train-worker-1")
    cluster.settle()
    assert cluster.status()["retryCount"] == 1 and cluster.phase() == "Restarting"


def test_a_pod_deleted_without_a_policy_is_made_again() -> None:
    cluster = started(job_manifest())
    cluster.set_phase("Running")
    cluster.settle()
    old = cluster.pods()["train-worker-1"]["metadata"]["uid"]
    cluster.evict("train-worker-1")
    cluster.settle()
    new = cluster.pods()["train-worker-1"]
    assert new["metadata"]["uid"] != old and annotations_of(new)[keys.JOB_VERSION] == "0"
    assert cluster.status().get("retryCount", 0) == 0


def test_exit_code_policy_aborts() -> None:
    cluster = started(job_manifest(policies=[{"exitCode": 3, "action": "AbortJob"}]))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Failed", "train-worker-0", exit_code=1)  # another exit code: no policy
    cluster.settle()
    assert cluster.phase() == "Running"
    cluster.set_phase("Failed", "train-worker-1", exit_code=3)
    cluster.settle()
    assert cluster.phase() == "Aborted"
    assert sorted(cluster.pods()) == ["train-worker-0", "train-worker-1"]  # finished pods are kept
    assert cluster.podgroups() == []


def test_task_completed_completes_the_job() -> None:
    tasks = [{"name": "master", "replicas": 1, "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}]},
             {"name": "worker", "replicas": 2}]
    cluster = started(job_manifest(tasks=tasks))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Succeeded", "train-master-0")
    cluster.settle()
    assert cluster.phase() == "Completed"
    assert cluster.pod_names() == ["train-master-0"]  # the running workers were killed


def test_restart_task_restarts_only_that_task() -> None:
    tasks = [{"name": "master", "replicas": 1},
             {"name": "worker", "replicas": 2, "policies": [{"event": "PodFailed", "action": "RestartTask"}]}]
    cluster = started(job_manifest(tasks=tasks))
    cluster.set_phase("Running")
    cluster.settle()
    master = cluster.pods()["train-master-0"]["metadata"]["uid"]
    cluster.set_phase("Failed", "train-worker-0", exit_code=1)
    cluster.settle()
    assert cluster.pods()["train-master-0"]["metadata"]["uid"] == master
    assert cluster.status()["retryCount"] == 1
    assert sorted(cluster.pods()) == ["train-master-0", "train-worker-0", "train-worker-1"]


def test_pending_timeout_restarts_the_pod_unless_it_runs_first() -> None:
    policies = [{"event": "PodPending", "action": "RestartPod", "timeout": "1m"}]
    cluster = started(job_manifest(policies=policies))
    result = cluster.reconcile()
    assert "Execute action RestartPod after 1m0s" in cluster.events(keys.REASON_EXECUTE_ACTION)
    due = cluster.reconcile().wake_at
    assert due is not None and abs(due - (cluster.now.timestamp() + 60)) < 1
    cluster.set_phase("Running", "train-master-0")
    cluster.settle()
    cluster.advance(61)
    uids = {n: p["metadata"]["uid"] for n, p in cluster.pods().items()}
    cluster.settle()
    after = {n: p["metadata"]["uid"] for n, p in cluster.pods().items()}
    assert after["train-master-0"] == uids["train-master-0"]  # it ran in time: its wait was cancelled
    assert after["train-worker-0"] != uids["train-worker-0"] and after["train-worker-1"] != uids["train-worker-1"]
    assert result.writes >= 0


def test_task_failed_from_restart_counts() -> None:
    tasks = [{"name": "master", "replicas": 1},
             {"name": "worker", "replicas": 1, "maxRetry": 2, "policies": [{"event": "TaskFailed", "action": "AbortJob"}]}]
    cluster = started(job_manifest(tasks=tasks))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Running", "train-worker-0", restarts=2)
    cluster.settle()
    assert cluster.phase() == "Aborted"


def test_podgroup_unknown_event_policy() -> None:
    cluster = started(job_manifest(policies=[{"event": "Unknown", "action": "TerminateJob"}]))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_group_phase("Unknown")
    cluster.settle()
    assert cluster.phase() == "Terminated"


# == Commands ==================================================================================================
def test_suspend_and_resume_through_commands() -> None:
    cluster = started(job_manifest())
    cluster.set_phase("Running")
    cluster.settle()
    cluster.command("AbortJob")
    cluster.settle()
    assert cluster.phase() == "Aborted" and cluster.pods() == {} and cluster.commands() == []
    assert any("Start to execute command AbortJob" in m for m in cluster.events(keys.REASON_COMMAND_ISSUED))
    cluster.command("ResumeJob")
    cluster.settle()
    assert cluster.phase() == "Pending" and cluster.status()["retryCount"] == 1
    cluster.admit()
    cluster.settle()
    assert cluster.pod_names() == ["train-master-0", "train-worker-0", "train-worker-1"]


def test_a_command_for_a_missing_job_is_dropped() -> None:
    cluster = started(job_manifest())
    cluster.command("AbortJob")
    cluster.host.delete(*_job_key(cluster))
    cluster.settle()
    assert cluster.commands() == []


def _job_key(cluster: JobCluster) -> tuple:
    from scheduler.controllers.kinds import JOB
    return JOB, "default", "train"


# == dependsOn, scaling, ttl ===================================================================================
def test_depends_on_waits_for_the_master_to_run_and_be_ready() -> None:
    tasks = [{"name": "master", "replicas": 1},
             {"name": "worker", "replicas": 2, "minAvailable": 0, "dependsOn": {"name": ["master"]}}]
    cluster = started(job_manifest(tasks=tasks, minAvailable=1))
    assert cluster.pod_names() == ["train-master-0"]
    cluster.set_phase("Running", "train-master-0", ready=False)
    cluster.settle()
    assert cluster.pod_names() == ["train-master-0"]
    cluster.set_phase("Running", "train-master-0", ready=True)
    cluster.settle()
    assert cluster.pod_names() == ["train-master-0", "train-worker-0", "train-worker-1"]


def test_depends_on_any_needs_one_of_them() -> None:
    tasks = [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1},
             {"name": "c", "replicas": 1, "minAvailable": 0, "dependsOn": {"name": ["a", "b"], "iteration": "any"}}]
    cluster = started(job_manifest(tasks=tasks, minAvailable=2))
    assert cluster.pod_names() == ["train-a-0", "train-b-0"]
    cluster.set_phase("Running", "train-b-0")
    cluster.settle()
    assert "train-c-0" in cluster.pods()


def test_elastic_job_scales_up_and_down() -> None:
    cluster = started(job_manifest(tasks=[{"name": "worker", "replicas": 4, "minAvailable": 2}], minAvailable=2))
    assert cluster.podgroups()[0]["spec"]["minMember"] == 2
    assert len(cluster.pods()) == 4
    job = cluster.job()
    job["spec"]["tasks"][0]["replicas"] = 6
    cluster.host.update(job)
    cluster.settle()
    assert cluster.pod_names() == [f"train-worker-{i}" for i in range(6)]
    assert cluster.host.get(CONFIGMAP, "default", "train-svc") is None  # no svc plugin: nothing else
    job = cluster.job()
    job["spec"]["tasks"][0]["replicas"] = 3
    job["spec"]["minAvailable"] = 3
    cluster.host.update(job)
    cluster.settle()
    assert cluster.pod_names() == [f"train-worker-{i}" for i in range(3)]
    assert cluster.podgroups()[0]["spec"]["minMember"] == 3


def test_scaling_rewrites_the_svc_hosts() -> None:
    cluster = started(job_manifest(tasks=[{"name": "worker", "replicas": 2}], plugins={"svc": []}))
    cluster.set_phase("Running")
    cluster.settle()  # a running job's plugins follow its spec (a pending one's are set when it starts, as in Volcano)
    job = cluster.job()
    job["spec"]["tasks"][0]["replicas"] = 3
    cluster.host.update(job)
    cluster.settle()
    data = cluster.host.get(CONFIGMAP, "default", "train-svc")["data"]
    assert data["VC_WORKER_NUM"] == "3" and data["worker.host"].count("\n") == 2


def test_ttl_deletes_a_finished_job_and_what_it_owns() -> None:
    cluster = started(job_manifest(ttlSecondsAfterFinished=30, plugins={"svc": []}))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Succeeded")
    cluster.settle()
    assert cluster.phase() == "Completed"
    wake = cluster.reconcile().wake_at
    assert wake is not None and abs(wake - (cluster.now.timestamp() + 30)) < 1
    cluster.advance(31)
    cluster.settle()
    assert cluster.host.list(PODGROUP) == [] and cluster.pods() == {}
    assert cluster.host.get(SERVICE, "default", "train") is None
    from scheduler.controllers.kinds import JOB
    assert cluster.host.get(JOB, "default", "train") is None


def test_a_job_refused_by_admission_is_reported_once_and_left_alone() -> None:
    cluster = JobCluster()
    bad = job_manifest(tasks=[{"name": "worker", "replicas": 1, "minAvailable": 2}])
    cluster.host.create(bad)
    cluster.settle()
    assert cluster.podgroups() == [] and cluster.pods() == {}
    (message,) = cluster.events(keys.REASON_FAILED_ADMISSION)
    assert message.startswith("spec.tasks[0].minAvailable:")
    assert cluster.reconcile().writes == 0


def test_without_waiting_for_admission_pods_come_at_once() -> None:
    cluster = JobCluster(wait_for_admission=False)
    cluster.host.create(job_manifest())
    cluster.settle()
    assert len(cluster.pods()) == 3


def test_ssh_secret_keys_and_config() -> None:
    cluster = started(job_manifest(plugins={"ssh": []}))
    secret = cluster.host.get(SECRET, "default", "train-ssh")
    config = base64.b64decode(secret["data"]["config"]).decode()
    assert "Host train-worker-1\n  HostName train-worker-1.train\n  Port 22" in config
    assert base64.b64decode(secret["data"]["authorized_keys"]).decode() == "ssh-rsa PUBLIC"


def test_a_plugin_the_host_cannot_serve_is_reported_once_and_retried() -> None:
    from proto.errors import InputError

    cluster = JobCluster()
    calls = []

    def no_keygen() -> tuple[str, str]:
        calls.append(1)
        raise InputError("the ssh Job plugin needs ssh-keygen")

    cluster.loop.settings.key_pair = no_keygen
    cluster.host.create(job_manifest(plugins={"ssh": []}))
    wake = cluster.reconcile().wake_at
    assert cluster.reconcile().writes == 0 and len(calls) == 1  # nothing changed: not tried again at once
    assert wake is not None and wake > cluster.now.timestamp()
    cluster.advance(wake - cluster.now.timestamp())
    cluster.reconcile()
    assert cluster.events(keys.REASON_PLUGIN_ERROR) == ["the ssh Job plugin needs ssh-keygen"]
    assert cluster.podgroups() == [] and len(calls) == 2  # nothing half made; tried again when due
    cluster.loop.settings.key_pair = lambda: ("PRIVATE", "ssh-rsa PUBLIC")
    cluster.advance(10)
    cluster.settle()
    assert cluster.host.get(SECRET, "default", "train-ssh") is not None and cluster.phase() == "Pending"


def test_a_job_status_that_does_not_read_is_read_as_unset_and_stops_no_reconcile() -> None:
    """A Job's status is anybody's to write (kubectl --subresource status): a lastTransitionTime that is not a
    time raised ValueError out of the controller's decision, failing every reconcile of every Job; a
    taskStatusCount or conditions of another shape did the same. They read as unset, as other wrong types do."""
    from scheduler.controllers.kinds import JOB

    cluster = started(job_manifest(ttlSecondsAfterFinished=30))
    cluster.set_phase("Running")
    cluster.settle()
    cluster.set_phase("Succeeded")
    cluster.settle()
    assert cluster.phase() == "Completed"
    status = dict(cluster.host.get(JOB, "default", "train")["status"])
    status["state"] = {**status["state"], "lastTransitionTime": "yesterday"}
    status["taskStatusCount"], status["conditions"] = ["not", "a", "map"], 7
    cluster.host.write_status(JOB, "default", "train", status)
    cluster.advance(31)
    cluster.settle()
    assert cluster.phase() == "Completed"
