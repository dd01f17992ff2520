"""The local runtime's rules without real cgroups: manifests, phases, back-off, records, limits, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cgroups.backend import V1Backend, V2Backend
from agent.cgroups.layout import FixedLayout
from agent.cgroups.tree import V1_CONTROLLERS
from agent.embedded import Backoff, LocalRuntime
from agent.embedded.phase import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    ContainerView,
    InvalidTransition,
    pod_phase,
    restarts,
    transition,
)
from agent.embedded.podcgroups import container_cgroup, limit_writes, shares
from agent.embedded.records import ContainerRecord, PodRecord, StateDir, Stopping
from agent.embedded.spec import INVALID, START_ERROR, UNSUPPORTED, SpecError, expand, load_manifest, parse_pod
from agent.hostpaths import HostPaths
from proto.model import Directive, PodAction, PodActionKind
from proto.vocab.placement import DEVICES_ANNOTATION, DeviceGrant, encode_devices

UID = "0000aaaa-0000-4000-8000-000000000001"


def pod(*containers: dict, uid: str = UID, name: str = "web", policy: str | None = None, **spec) -> dict:
    doc = {"metadata": {"uid": uid, "name": name, "namespace": "team", "labels": {"app": "web"}},
           "spec": {"containers": list(containers) or [{"name": "main", "command": ["true"]}], **spec}}
    if policy:
        doc["spec"]["restartPolicy"] = policy
    return doc


# -- manifests --------------------------------------------------------------------------------------

def test_command_and_args_run_with_the_pods_env_expanded() -> None:
    spec = parse_pod(pod({"name": "main", "command": ["python3", "-c"], "args": ["print('$(GREETING)')", "$$(X)"],
                          "env": [{"name": "WHO", "value": "world"},
                                  {"name": "GREETING", "value": "hello $(WHO) $(MISSING)"},
                                  {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                  {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}}]}),
                     base_env={"PATH": "/bin"}, node_name="box")
    c = spec.containers[0]
    assert c.argv == ("python3", "-c", "print('hello world $(MISSING)')", "$(X)")
    assert c.env["PATH"] == "/bin" and c.env["ME"] == "web" and c.env["APP"] == "web"
    assert (c.env["SCORIA_POD_NAME"], c.env["SCORIA_POD_NAMESPACE"], c.env["SCORIA_POD_UID"]) == ("web", "team", UID)
    assert spec.restart_policy == "Always" and spec.grace_seconds == 30


def test_devices_granted_to_the_pod_are_in_every_containers_env() -> None:
    grants = encode_devices([DeviceGrant("nvidia.com/gpu", "GPU-1", 0, 4096, 30)])
    doc = pod({"name": "a", "command": ["true"]}, {"name": "b", "command": ["true"]})
    doc["metadata"]["annotations"] = {DEVICES_ANNOTATION: grants}
    spec = parse_pod(doc)
    for c in spec.containers:
        assert c.env["CUDA_VISIBLE_DEVICES"] == "GPU-1" and c.env["CUDA_DEVICE_SM_LIMIT_0"] == "30"


def test_resources_are_read_per_container() -> None:
    spec = parse_pod(pod({"name": "main", "command": ["true"],
                          "resources": {"requests": {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"},
                                        "limits": {"kubernetes.io/batch-cpu": "2000"}}}))
    c = spec.containers[0]
    assert (c.cpu_request, c.cpu_limit, c.memory_limit, c.batch_cpu, c.batch_memory) == (0, None, None, 2000, 2**30)
    assert spec.info.qos_class == "BestEffort" and spec.info.offline


@pytest.mark.parametrize("doc,reason,words", [
    ({"metadata": {"uid": UID, "name": "x"}, "spec": {}}, INVALID, "at least one container"),
    (pod({"name": "main", "args": ["x"]}), START_ERROR, "no command"),
    (pod({"name": "main", "command": ["true"], "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s",
                                                                                                      "key": "k"}}}]}),
     "CreateContainerConfigError", "secret 's' not found"),
    (pod({"name": "main", "command": ["true"], "env": [{"name": "K", "valueFrom": {"resourceFieldRef": {}}}]}),
     UNSUPPORTED, "valueFrom resourceFieldRef"),
    (pod({"name": "main", "command": ["true"], "env": [{"name": "K", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}),
     UNSUPPORTED, "status.podIP"),
    (pod({"name": "main", "command": ["true"], "envFrom": [{"configMapRef": {"name": "c"}}]}),
     "CreateContainerConfigError", "configMapRef 'c' not found"),
    (pod({"name": "main", "command": ["true"], "volumeMounts": [{"name": "v", "mountPath": "/data"}]},
         volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]), UNSUPPORTED, "persistentVolumeClaim"),
    (pod({"name": "main", "command": ["true"], "volumeMounts": [{"name": "nope", "mountPath": "/data"}]}),
     INVALID, "not declared"),
    (pod({"name": "main", "command": ["true"]}, initContainers=[{"name": "i"}]), UNSUPPORTED, "initContainers"),
    (pod({"name": "a", "command": ["true"]}, {"name": "a", "command": ["true"]}), INVALID, "used twice"),
    (pod({"name": "Bad_Name", "command": ["true"]}), INVALID, "not a valid container name"),
    (pod({"name": "main", "command": "true"}), INVALID, "list of strings"),
    (pod({"name": "main", "command": ["true"], "resources": {"limits": {"cpu": "lots"}}}), INVALID, "invalid quantity"),
    (pod(policy="Sometimes"), INVALID, "restartPolicy"),
    (pod(terminationGracePeriodSeconds=-1), INVALID, "terminationGracePeriodSeconds"),
    (pod(uid="../etc"), INVALID, "not a valid uid"),
], ids=["no-containers", "no-command", "secret-missing", "resource-field", "unknown-field", "envFrom-missing",
        "claim-volume", "undeclared-volume", "init-containers", "duplicate",
        "bad-name", "command-not-list", "bad-quantity", "bad-restart-policy", "negative-grace", "unsafe-uid"])
def test_pods_the_runtime_will_not_run_say_why(doc: dict, reason: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_pod(doc)
    assert err.value.reason == reason and words in err.value.message


def test_pod_json_that_does_not_parse_is_invalid() -> None:
    for text in ("{not json", "[1, 2]", ""):
        with pytest.raises(SpecError) as err:
            load_manifest(text)
        assert err.value.reason == INVALID


def test_the_actions_uid_must_match_the_manifests() -> None:
    with pytest.raises(SpecError, match="is not the pod_uid"):
        parse_pod(pod(), uid="another")
    assert parse_pod({**pod(), "metadata": {"name": "web"}}, uid=UID).uid == UID


def test_expansion_follows_the_kubelet() -> None:
    assert expand("$(A)-$(B)-$$(A)-$A", {"A": "1"}) == "1-$(B)-$(A)-$A"


# -- phases and back-off ----------------------------------------------------------------------------

def v(state: str, code: int = 0, reason: str = "", attempted: bool = True, name: str = "c") -> ContainerView:
    return ContainerView(name, state, code, reason, "", attempted)


@pytest.mark.parametrize("containers,expected", [
    ([v("waiting", attempted=False)], (PENDING, "")),
    ([v("running")], (RUNNING, "")),
    ([v("running"), v("terminated", 0, "Completed")], (RUNNING, "")),
    ([v("terminated", 0, "Completed"), v("terminated", 0, "Completed")], (SUCCEEDED, "Completed")),
    ([v("terminated", 0, "Completed"), v("terminated", 3, "Error", name="b")], (FAILED, "Error")),
    ([v("terminated", 137, "OOMKilled")], (FAILED, "OOMKilled")),
    ([v("terminated", 128, "StartError")], (FAILED, "StartError")),
    ([v("waiting", 1, "CrashLoopBackOff")], (RUNNING, "CrashLoopBackOff")),
], ids=["pending", "running", "one-still-running", "succeeded", "failed", "oom", "start-error", "back-off"])
def test_pod_phase(containers: list[ContainerView], expected: tuple[str, str]) -> None:
    phase, reason, message = pod_phase(containers)
    assert (phase, reason) == expected
    if phase == FAILED:
        failed = next(c for c in containers if c.exit_code)
        assert f"container {failed.name} exited with code {failed.exit_code}" in message


@pytest.mark.parametrize("policy,code,again", [
    ("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False), ("OnFailure", 3, True),
    ("Never", 0, False), ("Never", 3, False)])
def test_restart_policy(policy: str, code: int, again: bool) -> None:
    assert restarts(policy, code) is again


def test_finished_phases_are_final() -> None:
    assert transition(PENDING, RUNNING) == RUNNING and transition(RUNNING, FAILED) == FAILED
    for done in (SUCCEEDED, FAILED):
        with pytest.raises(InvalidTransition):
            transition(done, RUNNING)
    with pytest.raises(InvalidTransition):
        transition(RUNNING, PENDING)


def test_back_off_doubles_from_ten_seconds_to_five_minutes() -> None:
    b = Backoff()
    assert [b.delay(step) for step in range(7)] == [10, 20, 40, 80, 160, 300, 300]
    assert b.next_step(4, ran_for=30) == 4 and b.next_step(4, ran_for=601) == 0
    assert Backoff(initial=0.1).delay(2) == pytest.approx(0.4)


# -- records ------------------------------------------------------------------------------------------

def test_records_round_trip_atomically(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    record = PodRecord(UID, "team", "web", manifest=pod(), phase=RUNNING, started_at=12.5, cgroup="scoria/online/podx",
                       containers=[ContainerRecord("main", "scoria/online/podx/ab", "running", pid=42, pid_start=99.25,
                                                   restarts=2, backoff_step=1)],
                       stopping=Stopping("evict", "memory", 20.0))
    state.save(record)
    assert [p.name for p in (tmp_path / "pods").iterdir()] == [f"{UID}.json"]  # no temporary left
    assert state.load_all() == [record]
    assert state.load_all()[0].restarts == 2


def test_a_record_that_does_not_read_back_is_set_aside(tmp_path: Path, caplog) -> None:
    state = StateDir(tmp_path)
    (tmp_path / "pods" / "broken.json").write_text("{truncated")
    (tmp_path / "pods" / "other.json").write_text(json.dumps(PodRecord("mismatch").to_dict()))
    assert state.load_all() == []
    assert sorted(p.name for p in (tmp_path / "pods").iterdir()) == ["broken.json.bad", "other.json.bad"]
    assert "cannot read pod record" in caplog.text


# -- limits ---------------------------------------------------------------------------------------------

def writes(doc: dict, *, version: int = 1, path: str = "scoria/online/podx") -> dict[tuple[str, str], object]:
    spec = parse_pod(doc)
    return {(w.path.removeprefix(path).lstrip("/") or "pod", w.knob): w.value
            for w in limit_writes(spec, path, version=version, offline_parent="scoria/offline")}


def test_limits_follow_the_kubelet() -> None:
    doc = pod({"name": "a", "command": ["true"], "resources": {"requests": {"cpu": "250m"},
                                                             "limits": {"cpu": "1", "memory": "256Mi"}}},
              {"name": "b", "command": ["true"], "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}})
    got = writes(doc)
    a, b = (container_cgroup("x", UID, n).removeprefix("x/") for n in ("a", "b"))
    assert got[(a, "cpu.shares")] == shares(250) == 256 and got[(b, "cpu.shares")] == 512
    assert got[(a, "cpu.quota")] == 1000 and got[(b, "memory.limit")] == 128 * 2**20
    assert got[("pod", "cpu.shares")] == 768 and got[("pod", "cpu.quota")] == 1500
    assert got[("pod", "memory.limit")] == 384 * 2**20


def test_a_pod_limit_needs_every_container_to_have_one() -> None:
    doc = pod({"name": "a", "command": ["true"], "resources": {"limits": {"cpu": "1"}}},
              {"name": "b", "command": ["true"], "resources": {"requests": {"cpu": "1"}}})
    got = writes(doc)
    assert ("pod", "cpu.quota") not in got and ("pod", "memory.limit") not in got


def test_offline_pods_get_batch_limits_but_no_quota_under_the_offline_parent_on_v1() -> None:
    doc = pod({"name": "a", "command": ["true"], "resources": {"limits": {"kubernetes.io/batch-cpu": "2000",
                                                                        "kubernetes.io/batch-memory": "1Gi"}}})
    a = container_cgroup("x", UID, "a").removeprefix("x/")
    v1 = writes(doc, path="scoria/offline/podx")
    assert v1[(a, "memory.limit")] == 2**30 and v1[(a, "cpu.shares")] == 2 and v1[("pod", "cpu.shares")] == 2
    assert not any(knob == "cpu.quota" for _, knob in v1)  # the kernel would refuse the agent's quota cuts
    v2 = writes(doc, version=2, path="scoria/offline/podx")
    assert v2[(a, "cpu.quota")] == 2000 and v2[("pod", "cpu.quota")] == 2000


def test_container_cgroups_are_named_as_layouts_list_them() -> None:
    from agent.cgroups.layout import container_id
    path = container_cgroup("scoria/online/podx", UID, "main")
    assert container_id(path.rsplit("/", 1)[1]) and path == container_cgroup("scoria/online/podx", UID, "main")


# -- the runtime on bad input (no cgroup is made for a pod it refuses) ------------------------------------

@pytest.fixture
def runtime(tmp_path: Path) -> LocalRuntime:
    for c in V1_CONTROLLERS:
        (tmp_path / "cg" / c).mkdir(parents=True)
    backend = V1Backend(HostPaths(cgroup=tmp_path / "cg"))
    return LocalRuntime(tmp_path / "state", backend, FixedLayout(backend, "scoria"), clock=lambda: 1000.0)


def action(kind: PodActionKind, pod_json: str = "", uid: str = UID, **kw) -> PodAction:
    return PodAction(kind, uid, "team", "web", pod_json=pod_json, **kw)


def test_bad_pods_are_failed_with_a_reason_and_never_raise(runtime: LocalRuntime, caplog) -> None:
    runtime.on_directive(Directive(pod_actions=[
        action(PodActionKind.START, "{not json"),
        action(PodActionKind.START, json.dumps(pod(uid="u2", name="empty"))
               .replace('"containers": [{"name": "main", "command": ["true"]}]', '"containers": []'), uid="u2"),
        action(PodActionKind.START, json.dumps(pod({"name": "main", "args": ["x"]}, uid="u3", name="nocmd")), uid="u3"),
        action(PodActionKind.START, "[]", uid=""),  # nothing to report it under: logged only
    ]))
    got = {p.uid: p for p in runtime.runtime()}
    assert set(got) == {UID, "u2", "u3"}
    assert (got[UID].phase, got[UID].reason) == (FAILED, INVALID) and "does not parse" in got[UID].message
    assert (got["u2"].phase, got["u2"].reason) == (FAILED, INVALID) and "at least one container" in got["u2"].message
    assert (got["u3"].phase, got["u3"].reason) == (FAILED, START_ERROR) and "no command" in got["u3"].message
    assert runtime.pods() == []
    assert "not running pod team/web" in caplog.text and "team/nocmd" in caplog.text


def test_refused_pods_are_remembered_until_stopped(runtime: LocalRuntime, tmp_path: Path) -> None:
    runtime.apply(action(PodActionKind.START, "{not json"))
    runtime.apply(action(PodActionKind.START, "{not json"))  # idempotent
    again = LocalRuntime(tmp_path / "state", runtime.backend, runtime.layout)
    assert [(p.uid, p.phase, p.reason) for p in again.runtime()] == [(UID, FAILED, INVALID)]
    again.apply(action(PodActionKind.STOP))
    assert again.runtime() == [] and not (tmp_path / "state" / "pods" / f"{UID}.json").exists()
    again.apply(action(PodActionKind.START, json.dumps(pod())))  # a late START for a stopped pod
    assert again.runtime() == []


def test_a_cgroup_that_cannot_be_made_fails_the_pod(runtime: LocalRuntime, monkeypatch, caplog) -> None:
    import agent.embedded.podcgroups as rc

    def refuse(backend, rel):
        raise PermissionError(13, "Permission denied", rel)
    monkeypatch.setattr(rc, "make", refuse)
    runtime.apply(action(PodActionKind.START, json.dumps(pod())))
    [got] = runtime.runtime()
    assert (got.phase, got.reason) == (FAILED, START_ERROR) and "cannot create cgroup" in got.message
    assert runtime.pods() == [] and "pod team/web failed" in caplog.text


def test_actions_for_unknown_pods_do_nothing(runtime: LocalRuntime) -> None:
    runtime.apply(action(PodActionKind.STOP, uid="nobody"))
    runtime.apply(action(PodActionKind.EVICT, uid="nobody", reason="memory"))
    runtime.apply(action(PodActionKind.UNSPECIFIED))
    assert runtime.runtime() == [] and runtime.evict("nobody", "why") is True


def test_the_parents_exist_from_the_start(runtime: LocalRuntime, tmp_path: Path) -> None:
    for c in V1_CONTROLLERS:
        assert (tmp_path / "cg" / c / "scoria" / "online").is_dir()
        assert (tmp_path / "cg" / c / "scoria" / "offline").is_dir()


def test_v2_limits_use_weights() -> None:
    backend = V2Backend(HostPaths(cgroup=Path("/nonexistent")))
    assert backend.encode("cpu.shares", shares(1000)) == "39"


# -- the command line -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args,words", [
    (["run", "--embedded"], "--embedded needs --state DIR"),
    (["run", "--embedded", "--state", "x", "--pods-from", "kubernetes"], "drop --pods-from"),
    (["run", "--embedded", "--state", "x", "--dry-run"], "cannot be a --dry-run"),
    (["run", "--embedded", "--state", "x", "--shutdown-grace", "-1"], "--shutdown-grace"),
], ids=["no-state", "pods-from", "dry-run", "negative-grace"])
def test_embedded_flags_are_checked(args: list[str], words: str, capsys) -> None:
    from agent.cli import main
    assert main([*args, "--metrics-port", "0", "--no-devices"]) == 2
    assert words in capsys.readouterr().err
