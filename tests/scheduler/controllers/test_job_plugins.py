"""The Job plugins: Volcano's plugin tests as data (tests/fixtures/volcano-jobs/job_plugins_test.yaml), then each
plugin's output (pods, Services, ConfigMaps, Secrets) and the Go-style flag parsing."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
import yaml

from scheduler.controllers.jobplugins.base import ArgumentError, Flag, parse_flags
from scheduler.controllers.jobplugins.registry import PLUGINS, build, register
from scheduler.controllers.jobplugins.svc import SvcPlugin
from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Job, parse_job
from scheduler.controllers.kinds import Kind, kind_of, name_of

FIXTURE = yaml.safe_load((Path(__file__).resolve().parents[2] / "fixtures" / "volcano-jobs" / "job_plugins_test.yaml")
                         .read_text())
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}


class Objects:
    """A plugin's view of its Job's objects, in memory (base.JobObjects)."""

    def __init__(self, namespace: str = "default") -> None:
        self.namespace = namespace
        self.store: dict[tuple[Kind, str], dict] = {}
        self.keys_made = 0

    def get(self, kind: Kind, name: str) -> dict | None:
        return self.store.get((kind, name))

    def create(self, obj: dict) -> None:
        self.store.setdefault((kind_of(obj), name_of(obj)), copy.deepcopy(obj))

    def create_or_update(self, obj: dict, same) -> None:
        old = self.get(kind_of(obj), name_of(obj))
        if old is None or not same(old, obj):
            self.store[(kind_of(obj), name_of(obj))] = copy.deepcopy(obj)

    def delete(self, kind: Kind, name: str) -> None:
        self.store.pop((kind, name), None)

    def key_pair(self) -> tuple[str, str]:
        self.keys_made += 1
        return f"PRIVATE-{self.keys_made}", f"ssh-rsa PUBLIC-{self.keys_made}"


def make_job(name: str, tasks: list[dict], plugins: dict | None = None, namespace: str = "default") -> Job:
    spec: dict = {"tasks": [{"template": copy.deepcopy(TEMPLATE), **t} for t in tasks]}
    if plugins:
        spec["plugins"] = plugins
    return parse_job({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                      "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"}, "spec": spec}, "test")


def make_pod(name: str, containers: list[dict], task: str | None = None, initContainers: list | None = None) -> dict:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": {}},
           "spec": {"containers": copy.deepcopy(containers)}}
    if task:
        pod["metadata"]["annotations"][keys.TASK_SPEC] = task
    if initContainers:
        pod["spec"]["initContainers"] = copy.deepcopy(initContainers)
    return pod


def envs(container: dict) -> list[list[str]]:
    return [[e["name"], e.get("value")] for e in container.get("env", [])]


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["case"])
def test_volcano_plugin_case(case: dict) -> None:
    job = make_job(case["job"]["name"], case["job"]["tasks"])
    plugin = build(case["plugin"], tuple(case.get("args") or ()))
    pod = make_pod(**case["pod"])
    plugin.on_pod_create(pod, job)
    container, want = pod["spec"]["containers"][0], case["expect"]
    if "env" in want:
        assert envs(container) == want["env"]
    for name in want.get("absent", ()):
        assert name not in {e["name"] for e in container.get("env", [])}
    if "initEnv" in want:
        assert envs(pod["spec"]["initContainers"][0]) == want["initEnv"]
    if "ports" in want:
        assert [[p["name"], p["containerPort"]] for p in container.get("ports", [])] == want["ports"]
    if "command" in want:
        assert container["command"] == want["command"]
    if "initContainers" in want:
        inits = pod["spec"].get("initContainers", [])
        assert [c["name"] for c in inits] == want["initContainers"]
        if want.get("initImage"):
            assert inits[0]["image"] == want["initImage"] and want["initScriptHas"] in inits[0]["command"][2]
    objects = Objects()
    plugin.add_objects(job, objects)
    if "service" in want:
        svc = objects.get(Kind("v1", "Service"), want["service"]["name"])
        assert svc is not None and len(svc["spec"]["ports"]) == want["service"]["ports"]
        plugin.delete_objects(job, objects)
        assert objects.get(Kind("v1", "Service"), want["service"]["name"]) is None
    if "secretConfigHas" in want:
        secret = objects.get(Kind("v1", "Secret"), f"{job.name}-ssh")
        assert secret is not None and want["secretConfigHas"] in base64.b64decode(secret["data"]["config"]).decode()
    if "mount" in want:
        (mount,) = container["volumeMounts"]
        assert (mount["mountPath"], mount["subPath"]) == (want["mount"], ".ssh")
        (volume,) = pod["spec"]["volumes"]
        assert volume["secret"]["defaultMode"] == want.get("mode", 0o600)


def test_the_plugin_fixture_names_its_source() -> None:
    assert FIXTURE["source"].endswith("pkg/controllers/job/plugins") and FIXTURE["commit"]
    assert all(c["why"] for c in FIXTURE["left_out"])


# -- env --------------------------------------------------------------------------------------------------------
def test_env_sets_the_task_index_in_every_container() -> None:
    job = make_job("j", [{"name": "w", "replicas": 3}])
    pod = make_pod("j-w-2", [{"name": "a"}, {"name": "b"}], task="w", initContainers=[{"name": "i"}])
    build("env", ()).on_pod_create(pod, job)
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert envs(c) == [["VK_TASK_INDEX", "2"], ["VC_TASK_INDEX", "2"]]


# -- svc --------------------------------------------------------------------------------------------------------
def test_svc_objects_and_pod_wiring() -> None:
    job = make_job("mpi-job", [{"name": "mpi-master", "replicas": 1}, {"name": "worker", "replicas": 2}],
                   namespace="team")
    objects = Objects("team")
    plugin = build("svc", ())
    plugin.add_objects(job, objects)
    cm = objects.get(Kind("v1", "ConfigMap"), "mpi-job-svc")
    assert cm["data"] == {
        "mpi_master.host": "mpi-job-mpi-master-0.mpi-job", "VC_MPI_MASTER_HOSTS": "mpi-job-mpi-master-0.mpi-job",
        "VC_MPI_MASTER_NUM": "1", "worker.host": "mpi-job-worker-0.mpi-job\nmpi-job-worker-1.mpi-job",
        "VC_WORKER_HOSTS": "mpi-job-worker-0.mpi-job,mpi-job-worker-1.mpi-job", "VC_WORKER_NUM": "2"}
    svc = objects.get(Kind("v1", "Service"), "mpi-job")
    assert svc["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": False,
                           "selector": {keys.JOB_NAME: "mpi-job", keys.JOB_NAMESPACE: "team"}}
    policy = objects.get(Kind("networking.k8s.io/v1", "NetworkPolicy"), "mpi-job")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    pod = make_pod("mpi-job-worker-1", [{"name": "c"}], task="worker")
    plugin.on_pod_create(pod, job)
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("mpi-job-worker-1", "mpi-job")
    container = pod["spec"]["containers"][0]
    assert [e["name"] for e in container["env"]] == ["VC_MPI_MASTER_HOSTS", "VC_MPI_MASTER_NUM", "VC_WORKER_HOSTS",
                                                     "VC_WORKER_NUM"]
    assert container["env"][2]["valueFrom"] == {"configMapKeyRef": {"name": "mpi-job-svc", "key": "VC_WORKER_HOSTS"}}
    assert container["volumeMounts"] == [{"mountPath": "/etc/volcano", "name": "mpi-job-svc"}]
    plugin.delete_objects(job, objects)
    assert objects.store == {}


def test_svc_flags() -> None:
    job = make_job("j", [{"name": "w", "replicas": 1}])
    objects = Objects()
    build("svc", ("--publish-not-ready-addresses", "--disable-network-policy")).add_objects(job, objects)
    assert objects.get(Kind("v1", "Service"), "j")["spec"]["publishNotReadyAddresses"] is True
    assert objects.get(Kind("networking.k8s.io/v1", "NetworkPolicy"), "j") is None
    pod = make_pod("j-w-0", [{"name": "c"}], task="w")
    build("svc", ("--inject-hosts-env=false",)).on_pod_create(pod, job)
    assert "env" not in pod["spec"]["containers"][0]


def test_svc_keeps_a_template_hostname_and_lists_one_host() -> None:
    job = make_job("j", [{"name": "ps", "replicas": 3, "template": {"spec": {"hostname": "ps", "subdomain": "sd",
                                                                             "containers": [{"name": "c"}]}}}])
    objects = Objects()
    SvcPlugin().add_objects(job, objects)
    assert objects.get(Kind("v1", "ConfigMap"), "j-svc")["data"]["ps.host"] == "ps.sd"


def test_svc_update_rewrites_the_hosts_only_when_they_change() -> None:
    objects = Objects()
    plugin = build("svc", ())
    plugin.add_objects(make_job("j", [{"name": "w", "replicas": 1}]), objects)
    plugin.on_job_update(make_job("j", [{"name": "w", "replicas": 3}]), objects)
    assert objects.get(Kind("v1", "ConfigMap"), "j-svc")["data"]["VC_W_NUM"] == "3"


# -- ssh --------------------------------------------------------------------------------------------------------
def test_ssh_secret_and_mounts() -> None:
    job = make_job("j", [{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 2}])
    objects = Objects()
    plugin = build("ssh", ())
    plugin.add_objects(job, objects)
    data = {k: base64.b64decode(v).decode() for k, v in objects.get(Kind("v1", "Secret"), "j-ssh")["data"].items()}
    assert data["id_rsa"] == "PRIVATE-1" and data["id_rsa.pub"] == data["authorized_keys"] == "ssh-rsa PUBLIC-1"
    assert data["config"] == ("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
                              "Host j-master-0\n  HostName j-master-0.j\n  Port 22\n"
                              "Host j-worker-0\n  HostName j-worker-0.j\n  Port 22\n"
                              "Host j-worker-1\n  HostName j-worker-1.j\n  Port 22\n")
    plugin.add_objects(job, objects)  # the same config: the keys stay
    assert objects.keys_made == 1
    pod = make_pod("j-worker-0", [{"name": "c"}], task="worker", initContainers=[{"name": "i"}])
    plugin.on_pod_create(pod, job)
    (volume,) = pod["spec"]["volumes"]
    assert volume["secret"]["secretName"] == "j-ssh" and volume["secret"]["defaultMode"] == 0o600
    assert [i["path"] for i in volume["secret"]["items"]] == [".ssh/id_rsa", ".ssh/id_rsa.pub", ".ssh/authorized_keys",
                                                               ".ssh/config"]
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert c["volumeMounts"] == [{"mountPath": "/root/.ssh", "subPath": ".ssh", "name": "j-ssh"}]


def test_ssh_no_root_mounts_under_etc_volcano() -> None:
    job = make_job("j", [{"name": "w", "replicas": 1}])
    pod = make_pod("j-w-0", [{"name": "c"}], task="w")
    build("ssh", ("--no-root",)).on_pod_create(pod, job)
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/etc/volcano/.ssh"
    assert pod["spec"]["volumes"][0]["secret"]["defaultMode"] == 0o644


# -- the distributed frameworks beyond Volcano's cases -----------------------------------------------------------
def test_pytorch_gives_every_rank_once() -> None:
    job = make_job("t", [{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 3}])
    plugin = build("pytorch", ())
    ranks = []
    for name, task in [("t-master-0", "master")] + [(f"t-worker-{i}", "worker") for i in range(3)]:
        pod = make_pod(name, [{"name": "c"}], task=task)
        plugin.on_pod_create(pod, job)
        env = dict(envs(pod["spec"]["containers"][0]))
        assert env["WORLD_SIZE"] == "4" and env["MASTER_ADDR"] == "t-master-0.t"
        ranks.append(int(env["RANK"]))
    assert sorted(ranks) == [0, 1, 2, 3]


def test_tensorflow_standalone_job_gets_no_tf_config() -> None:
    job = make_job("t", [{"name": "worker", "replicas": 1}])
    pod = make_pod("t-worker-0", [{"name": "c"}], task="worker")
    build("tensorflow", ()).on_pod_create(pod, job)
    assert "env" not in pod["spec"]["containers"][0]


def test_tensorflow_evaluator_and_renamed_roles() -> None:
    job = make_job("t", [{"name": "driver", "replicas": 1}, {"name": "w", "replicas": 2}, {"name": "evaluator", "replicas": 1}])
    pod = make_pod("t-w-1", [{"name": "c"}], task="w")
    build("tensorflow", ("--chief=driver", "--worker=w")).on_pod_create(pod, job)
    config = json.loads(pod["spec"]["containers"][0]["env"][0]["value"])
    assert config == {"cluster": {"worker": ["t-w-0.t:2222", "t-w-1.t:2222"], "chief": ["t-driver-0.t:2222"],
                                  "evaluator": ["t-evaluator-0.t:2222"]}, "task": {"type": "worker", "index": 1}}


def test_ray_keeps_a_users_command_and_args() -> None:
    job = make_job("r", [{"name": "head", "replicas": 1}, {"name": "worker", "replicas": 1}])
    plugin = build("ray", ())
    head = make_pod("r-head-0", [{"name": "head", "command": ["python", "serve.py"]}], task="head")
    worker = make_pod("r-worker-0", [{"name": "worker", "args": ["--x"]}], task="worker")
    plugin.on_pod_create(head, job)
    plugin.on_pod_create(worker, job)
    assert head["spec"]["containers"][0]["command"] == ["python", "serve.py"]
    assert "command" not in worker["spec"]["containers"][0]
    assert {p["containerPort"] for p in head["spec"]["containers"][0]["ports"]} == {6379, 8265, 10001}
    other = make_pod("r-head-0", [{"name": "sidecar"}], task="head")
    plugin.on_pod_create(other, job)
    assert "command" not in other["spec"]["containers"][0] and "ports" not in other["spec"]["containers"][0]


def test_ray_head_service() -> None:
    job = make_job("r", [{"name": "head", "replicas": 1}], namespace="ml")
    objects = Objects("ml")
    build("ray", ()).add_objects(job, objects)
    svc = objects.get(Kind("v1", "Service"), "r-head-svc")
    assert svc["spec"]["selector"] == {keys.JOB_NAME: "r", keys.JOB_NAMESPACE: "ml", keys.TASK_SPEC: "head"}
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
        ("gcs", 6379, "gcs"), ("dashboard", 8265, "dashboard"), ("client-server", 10001, "client-server")]


# -- flags and the registry --------------------------------------------------------------------------------------
FLAGS = {"port": Flag(int, 22, ""), "name": Flag(str, "x", ""), "on": Flag(bool, False, "")}


@pytest.mark.parametrize(("args", "want"), [
    ((), {"port": 22, "name": "x", "on": False}),
    (("--port=5000", "-name=y", "--on"), {"port": 5000, "name": "y", "on": True}),
    (("--port", "0x10", "--on=false"), {"port": 16, "name": "x", "on": False}),
    (("--on=T", "--"), {"port": 22, "name": "x", "on": True}),
])
def test_go_flag_parsing(args, want) -> None:
    assert parse_flags(FLAGS, args) == want


@pytest.mark.parametrize(("args", "problem"), [
    (("--nope",), "flag provided but not defined: -nope"),
    (("--port",), "flag needs an argument: -port"),
    (("--port=big",), "expected an integer"),
    (("--on=maybe",), "invalid boolean value"),
    (("value",), "is not a flag"),
    (("---port=1",), "is not a flag"),
    (("--", "extra"), "after '--'"),
])
def test_go_flag_errors(args, problem) -> None:
    with pytest.raises(ArgumentError, match=problem):
        parse_flags(FLAGS, args)


def test_registry_has_volcanos_plugins_and_refuses_duplicates() -> None:
    assert set(PLUGINS) == {"env", "svc", "ssh", "pytorch", "tensorflow", "mpi", "ray"}
    with pytest.raises(ValueError, match="registered twice"):
        register(SvcPlugin)
