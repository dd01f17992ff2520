"""Apply with kubectl's semantics (issue 19, items 2 and 3): create, configure or leave unchanged; a pod's
immutable fields refused by name; one invocation one transaction, folders included; ``delete -f``; unknown
fields refused with their path and the nearest known name, at apply and in the simulator."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from proto.model import PodActionKind
from scheduler.api.fields import check_known_fields
from scheduler.api.loader import iter_text, load_workload
from scheduler.api.manifests import ManifestError
from scheduler.cli import main
from scheduler.modes.embedded.server import ControlServer
from tests.scheduler.modes.test_embedded import View, cluster, docs, snapshot
from tests.support.builders import pod, podgroup, queue
from tests.support.ctl import ctl


def web(**spec: object) -> dict:
    doc = pod("web", cpu="500m", annotations={"team": "shop"})
    doc["spec"]["containers"][0]["command"] = ["sleep", "3600"]
    doc["spec"].update(spec)
    return doc


# -- item 2: create, configure, unchanged -----------------------------------------------------------------
def test_reapplying_an_unchanged_pod_is_unchanged_and_keeps_it_running(tmp_path: Path) -> None:
    """Found: re-applying an unchanged pod failed with 'already exists … delete it first'."""
    embedded, sched = cluster(tmp_path)
    assert embedded.apply(docs(web())) == [("pod/default/web", "created")]
    sched.run_once()
    uid = next(iter(embedded.cache.pods))
    before = snapshot(embedded)
    assert embedded.apply(docs(web())) == [("pod/default/web", "unchanged")]
    assert snapshot(embedded) == before
    running = embedded.cache.pods[uid]
    assert running.node_name == "n0" and running.phase == "Running"


def test_a_label_annotation_or_image_change_is_configured_and_the_binding_kept(tmp_path: Path) -> None:
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(web()))
    sched.run_once()
    uid = next(iter(embedded.cache.pods))
    changed = web()
    changed["metadata"]["labels"] = {"tier": "front"}
    changed["metadata"]["annotations"]["team"] = "checkout"
    changed["spec"]["containers"][0]["image"] = "busybox:2"
    assert embedded.apply(docs(changed)) == [("pod/default/web", "configured")]
    stored = embedded.store.get("Pod", "default/web")
    assert stored.manifest["metadata"]["uid"] == uid and stored.manifest["metadata"]["labels"] == {"tier": "front"}
    assert stored.status["nodeName"] == "n0"
    pod_now = embedded.cache.pods[uid]
    assert (pod_now.node_name, pod_now.phase, pod_now.labels) == ("n0", "Running", {"tier": "front"})
    assert pod_now.annotations["team"] == "checkout"
    assert embedded.apply(docs(changed)) == [("pod/default/web", "unchanged")]
    # a manifest read back with the pod's own uid and node applies too
    echoed = copy.deepcopy(stored.manifest)
    echoed["spec"]["nodeName"] = "n0"
    assert embedded.apply(docs(echoed)) == [("pod/default/web", "unchanged")]


IMMUTABLE = [  # (case, change to the manifest, the field the refusal names)
    ("command", lambda d: d["spec"]["containers"][0].update(command=["sleep", "1"]), "spec.containers[0].command[1]"),
    ("cpu request", lambda d: d["spec"]["containers"][0]["resources"]["requests"].update(cpu="2"),
     "spec.containers[0].resources.requests.cpu"),
    ("restart policy", lambda d: d["spec"].update(restartPolicy="Never"), "spec.restartPolicy"),
    ("another container", lambda d: d["spec"]["containers"].append({"name": "b", "image": "x"}),
     "spec.containers[1]"),
    ("a toleration removed", lambda d: d["spec"].update(tolerations=[]), "spec.tolerations[0]"),
    ("a scheduling gate added", lambda d: d["spec"].update(schedulingGates=[{"name": "wait"}]),
     "spec.schedulingGates"),
    ("a deadline raised", lambda d: d["spec"].update(activeDeadlineSeconds=120), "spec.activeDeadlineSeconds"),
]


@pytest.mark.parametrize("change,field", [c[1:] for c in IMMUTABLE], ids=[c[0] for c in IMMUTABLE])
def test_a_change_to_an_immutable_pod_field_is_refused_naming_the_field(tmp_path: Path, change, field) -> None:
    original = web(tolerations=[{"key": "k", "operator": "Exists"}], activeDeadlineSeconds=60)
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(original))
    sched.run_once()
    before = snapshot(embedded)
    changed = copy.deepcopy(original)
    change(changed)
    with pytest.raises(ManifestError) as info:
        embedded.apply(docs(changed))
    message = str(info.value)
    assert f"Pod default/web: {field}" in message and "\n" not in message, message
    assert snapshot(embedded) == before


def test_what_kube_apiserver_lets_a_pod_change_is_accepted(tmp_path: Path) -> None:
    original = web(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}],
                   activeDeadlineSeconds=60, schedulingGates=[{"name": "a"}, {"name": "b"}], nodeSelector={"x": "1"})
    embedded, _ = cluster(tmp_path)
    embedded.apply(docs(original))
    changed = copy.deepcopy(original)
    changed["spec"]["tolerations"][0]["tolerationSeconds"] = 300  # lowered
    changed["spec"]["tolerations"].append({"key": "other", "operator": "Exists"})  # added
    changed["spec"]["activeDeadlineSeconds"] = 30  # lowered
    changed["spec"]["schedulingGates"] = [{"name": "b"}]  # one removed
    changed["spec"]["nodeSelector"]["y"] = "2"  # added while gated
    assert embedded.apply(docs(changed)) == [("pod/default/web", "configured")]
    pod_now = next(iter(embedded.cache.pods.values()))
    assert pod_now.scheduling_gates == ("b",) and pod_now.node_selector == {"x": "1", "y": "2"}
    assert [t.key for t in pod_now.tolerations] == ["k", "other"] and pod_now.tolerations[0].seconds == 300


def test_a_priority_class_keeps_its_value_and_groups_and_queues_are_configured(tmp_path: Path) -> None:
    embedded, _ = cluster(tmp_path)
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    embedded.apply(docs(high, queue("q"), podgroup("g", queue="q")))
    with pytest.raises(ManifestError, match="PriorityClass high: value: field is immutable"):
        embedded.apply(docs({**high, "value": 2000}))
    assert embedded.apply(docs({**high, "description": "the important ones"})) == [
        ("priorityclass/high", "configured")]
    assert embedded.apply(docs(queue("q", weight=4), podgroup("g", queue="q", minMember=2))) == [
        ("queue/q", "configured"), ("podgroup/default/g", "configured")]
    assert embedded.cache.podgroups["default/g"].min_member == 2


def test_one_apply_is_one_transaction_whatever_its_files(tmp_path: Path) -> None:
    """Found: a folder with one new and one existing pod stored the new one and then exited 2."""
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(web()))
    sched.run_once()
    folder = [*docs(web()), *list(iter_text(yaml.safe_dump(pod("api")), "b.yaml"))]
    assert embedded.apply(folder) == [("pod/default/web", "unchanged"), ("pod/default/api", "created")]
    before = snapshot(embedded)
    bad = web()
    bad["spec"]["containers"][0]["command"] = ["true"]
    with pytest.raises(ManifestError, match="spec.containers\\[0\\].command"):
        embedded.apply([*list(iter_text(yaml.safe_dump(pod("late")), "a.yaml")), *docs(bad)])
    assert snapshot(embedded) == before  # the new pod of the other file was not stored either


def test_the_cli_applies_a_folder_as_one_request_and_says_what_became_of_each(tmp_path: Path) -> None:
    embedded, _ = cluster(tmp_path / "s")
    server = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    server.start()
    try:
        folder = tmp_path / "m"
        folder.mkdir()
        (folder / "a.yaml").write_text(yaml.safe_dump(web()))
        status, out, err = ctl(server, "apply", "-f", str(folder))
        assert (status, out) == (0, "pod/web created\n"), err
        (folder / "b.yaml").write_text(yaml.safe_dump_all([queue("q"), pod("api", queue="q")]))
        status, out, _ = ctl(server, "apply", "-f", str(folder))
        assert (status, out) == (0, "pod/web unchanged\nqueue/q created\npod/api created\n")
        changed = web()
        changed["spec"]["containers"][0]["command"] = ["true"]
        (folder / "a.yaml").write_text(yaml.safe_dump(changed))
        (folder / "c.yaml").write_text(yaml.safe_dump(pod("late")))
        status, out, err = ctl(server, "apply", "-f", str(folder))
        assert status == 2 and out == "" and f"{folder / 'a.yaml'}:1: Pod default/web: spec.containers[0].command" \
            in err, err
        assert embedded.store.get("Pod", "default/late") is None
        # delete -f: what the files define, one missing said and the rest deleted
        (folder / "a.yaml").write_text(yaml.safe_dump(web()))
        status, out, err = ctl(server, "delete", "-f", str(folder))
        assert status == 1 and "pod default/late not found" in err, err
        assert out.splitlines() == ["pod web deleted", "queue q deleted", "pod api deleted"]
        assert [s.key for s in embedded.store.load() if s.kind != "Node"] == []
    finally:
        server.stop()


# -- item 3: strict fields --------------------------------------------------------------------------------
UNKNOWN = [  # (case, manifest, the refusal)
    ("a typo in a container", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
     "  - name: c\n    comand: [sleep, '1']\n", "spec.containers[0].comand: unknown field; did you mean command?"),
    ("a typo in metadata", "apiVersion: v1\nkind: Pod\nmetadata: {name: web, lables: {a: b}}\nspec:\n  containers:\n"
     "  - {name: c, command: [sleep]}\n", "metadata.lables: unknown field; did you mean labels?"),
    ("snake case", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  node_selector: {a: b}\n"
     "  containers:\n  - {name: c, command: [sleep]}\n", "spec.node_selector: unknown field; did you mean nodeSelector?"),
    ("a PodGroup", "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
     "spec: {minMembers: 2}\n", "PodGroup default/g: spec.minMembers: unknown field; did you mean minMember?"),
    ("a Queue", "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
     "spec: {weigth: 2}\n", "Queue q: spec.weigth: unknown field; did you mean weight?"),
    ("a PriorityClass", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 5\n"
     "globalDefualt: true\n", "PriorityClass p: globalDefualt: unknown field; did you mean globalDefault?"),
    ("nothing near", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
     "  - {name: c, command: [sleep], zzz: 1}\n", "spec.containers[0].zzz: unknown field"),
]


@pytest.mark.parametrize("text,needle", [c[1:] for c in UNKNOWN], ids=[c[0] for c in UNKNOWN])
def test_an_unknown_field_is_refused_at_apply_with_its_path_and_the_nearest_name(tmp_path: Path, text: str,
                                                                                  needle: str) -> None:
    """Found: a ``comand:`` typo was stored and scheduled, and the pod failed at start with 'no command'."""
    embedded, _ = cluster(tmp_path)
    with pytest.raises(ManifestError) as info:
        embedded.apply(list(iter_text(text, "x.yaml")))
    assert needle in str(info.value) and str(info.value).startswith("x.yaml:1: "), str(info.value)
    assert [s.key for s in embedded.store.load() if s.kind != "Node"] == []


def test_an_unknown_field_is_refused_by_the_simulator(tmp_path: Path, capsys) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(UNKNOWN[0][1])
    with pytest.raises(ManifestError, match=r"spec.containers\[0\].comand: unknown field; did you mean command\?"):
        load_workload([path])
    assert main(["simulate", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("spec.containers[0].comand: unknown field; did you mean command?"), err


def test_fields_kubernetes_has_are_accepted_though_scoria_does_not_act_on_them(tmp_path: Path) -> None:
    text = """apiVersion: v1
kind: Pod
metadata: {name: web, ownerReferences: [{apiVersion: v1, kind: ReplicaSet, name: rs, uid: u1}], finalizers: [x]}
spec:
  serviceAccountName: web
  securityContext: {runAsUser: 1000, fsGroup: 2000}
  volumes: [{name: data, emptyDir: {sizeLimit: 1Gi}}, {name: cfg, configMap: {name: cfg}}]
  dnsPolicy: ClusterFirst
  hostAliases: [{ip: 127.0.0.1, hostnames: [web.local]}]
  containers:
  - name: c
    image: nginx
    command: [sleep, "60"]
    ports: [{containerPort: 80, name: http}]
    livenessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 5}
    readinessProbe: {tcpSocket: {port: 80}}
    volumeMounts: [{name: data, mountPath: /data}]
    envFrom: [{configMapRef: {name: cfg}}]
    env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
    lifecycle: {preStop: {exec: {command: [sleep, "1"]}}}
    imagePullPolicy: IfNotPresent
"""
    embedded, _ = cluster(tmp_path)
    assert embedded.apply(list(iter_text(text, "x.yaml"))) == [("pod/default/web", "created")]
    assert check_known_fields(yaml.safe_load(text)) is None


def test_the_shipped_examples_have_only_known_fields() -> None:
    from hack.lib.processes import ROOT

    for path in sorted((ROOT / "daemonset" / "examples").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert check_known_fields(doc) is None, (path, check_known_fields(doc))


def test_the_crd_field_table_is_current() -> None:
    """scheduler/api/crdfields.py is what hack/gen-fields.py makes of daemonset/crds."""
    import subprocess
    import sys

    from hack.lib.processes import ROOT

    run = subprocess.run([sys.executable, "hack/gen-fields.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_a_deleted_pods_start_is_not_resent_after_an_unchanged_apply(tmp_path: Path) -> None:
    """An unchanged apply of a running pod sends its node nothing new (no second START, no STOP)."""
    embedded, sched = cluster(tmp_path)
    embedded.apply(docs(web()))
    sched.run_once()
    (start,) = embedded.pod_actions("n0", View())
    assert start.kind == PodActionKind.START
    embedded.apply(docs(web()))
    running = next(iter(embedded.cache.pods.values()))
    from tests.scheduler.modes.test_embedded import running as runtime_of
    assert embedded.pod_actions("n0", View(runtime_of(running))) == []
    assert json.loads(start.pod_json)["metadata"]["uid"] == running.uid


def test_a_volcano_jobs_task_template_is_checked_as_the_pod_template_it_is(tmp_path: Path, capsys) -> None:
    """The Job CRD leaves ``spec.tasks[].template`` free-form; it holds a PodTemplateSpec and is checked as one."""
    path = tmp_path / "job.yaml"
    path.write_text("""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 1
  schedulerName: scoria
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        containers:
        - {name: c, image: busybox, comand: [sleep, "1"]}
""")
    assert main(["simulate", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Job default/train: spec.tasks[0].template.spec.containers[0].comand: unknown field; did you mean " \
           "command?" in err, err
    path.write_text(path.read_text().replace("comand", "command").replace("minAvailable", "minAvaliable"))
    assert main(["simulate", "-f", str(path)]) == 2
    assert "spec.minAvaliable: unknown field; did you mean minAvailable?" in capsys.readouterr().err
