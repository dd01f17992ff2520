"""Admission of Volcano Jobs and Commands: Volcano's own webhook tests as data (tests/fixtures/volcano-jobs/
admit_job_test.yaml), then Scoria's cases for what the issue asks (the field named, the webhook's defaults)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from scheduler.api.manifests import ManifestError
from scheduler.controllers.jobs.admission import (
    AdmissionContext,
    QueueFacts,
    admit_command,
    admit_job,
    admit_job_update,
)

FIXTURE = yaml.safe_load((Path(__file__).resolve().parents[2] / "fixtures" / "volcano-jobs" / "admit_job_test.yaml")
                         .read_text())
TEMPLATE = {"metadata": {"labels": {"name": "test"}}, "spec": {"containers": [{"name": "fake-name", "image": "busybox:1.24"}]}}


def job_doc(raw: dict, namespace: str = "test") -> dict:
    spec = copy.deepcopy(raw["spec"])
    for task in spec.get("tasks") or ():
        task.setdefault("template", copy.deepcopy(TEMPLATE))
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": raw["name"], "namespace": raw.get("namespace", namespace)}, "spec": spec}


def context_of(case: dict) -> AdmissionContext:
    queues = {name: QueueFacts(**facts) for name, facts in (case.get("queues") or {"default": {}}).items()}
    return AdmissionContext(queues=queues)


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["case"])
def test_volcano_admission_case(case: dict) -> None:
    doc = job_doc(case["job"])
    if case["allowed"]:
        admit_job(doc, "jobs.yaml:1", context_of(case))
        return
    with pytest.raises(ManifestError) as info:
        admit_job(doc, "jobs.yaml:1", context_of(case))
    message = str(info.value)
    assert message.startswith(f"jobs.yaml:1: Job test/{case['job']['name']}: {case['field']}: "), message
    # Scoria words most refusals as Volcano does; the ported case names Volcano's words
    keyword = case["volcano"].strip(" ;").split(" in task")[0].split(", but")[0]
    if case["field"].endswith((".replicas", ".partitionSize", ".totalPartitions")) and "greater" not in keyword:
        return  # refused by the field's bounds (Volcano's CRD schema), worded as such
    assert keyword.lower().replace("'", "") in message.lower().replace("'", "") or \
        case["field"].endswith((".partitionSize", ".totalPartitions", ".replicas", ".dependsOn.name[0]")), message


@pytest.mark.parametrize("case", FIXTURE["updates"]["cases"], ids=lambda c: c["case"])
def test_volcano_update_case(case: dict) -> None:
    old = job_doc(FIXTURE["updates"]["base"])
    new = copy.deepcopy(old)
    new["spec"]["minAvailable"] = case["minAvailable"]
    new["spec"]["tasks"][0]["replicas"] = case["replicas"]
    if case.get("addTask"):
        new["spec"]["tasks"].append({"name": "task-2", "replicas": 5, "template": copy.deepcopy(TEMPLATE)})
    if case.get("mutateTaskName"):
        new["spec"]["tasks"][0]["name"] = "mutated-name"
    if case.get("mutateSpec"):
        new["spec"]["queue"] = "mutated-queue"
    if case["allowed"]:
        admit_job_update(old, new, "jobs.yaml")
        return
    with pytest.raises(ManifestError, match=re.escape(f"jobs.yaml: Job default/valid-job: {case['field']}: ")):
        admit_job_update(old, new, "jobs.yaml")


def test_every_ported_case_names_its_source() -> None:
    assert FIXTURE["source"].endswith("admit_job_test.go") and FIXTURE["commit"]
    names = [c["case"] for c in FIXTURE["cases"]] + [c["case"] for c in FIXTURE["updates"]["cases"]]
    assert len(names) == len(set(names)) >= 45
    assert all(c["why"] for c in FIXTURE["left_out"])


# -- Scoria's own cases -----------------------------------------------------------------------------------------
def base(**spec: object) -> dict:
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
           "spec": {"tasks": [{"name": "a", "replicas": 2, "template": copy.deepcopy(TEMPLATE)},
                              {"name": "b", "replicas": 1, "template": copy.deepcopy(TEMPLATE)}]}}
    doc["spec"].update(spec)
    return doc


def with_task(index: int, **fields: object) -> dict:
    doc = base()
    doc["spec"]["tasks"][index].update(fields)
    return doc


REFUSED = [
    ("task minAvailable above replicas", with_task(0, minAvailable=3), "spec.tasks[0].minAvailable",
     "greater than 'replicas'"),
    ("dependsOn names a missing task", with_task(1, dependsOn={"name": ["nope"]}), "spec.tasks[1].dependsOn.name[0]",
     "no task 'nope'"),
    ("dependsOn cycle", (lambda d: (d["spec"]["tasks"][0].update(dependsOn={"name": ["b"]}),
                                    d["spec"]["tasks"][1].update(dependsOn={"name": ["a"]}), d)[-1])(base()),
     "spec.tasks[0].dependsOn", "a -> b -> a"),
    ("dependsOn iteration", with_task(1, dependsOn={"name": ["a"], "iteration": "some"}),
     "spec.tasks[1].dependsOn.iteration", "any or all"),
    ("unknown plugin argument", base(plugins={"svc": ["--no-such-flag"]}), "spec.plugins.svc",
     "flag provided but not defined: -no-such-flag"),
    ("plugin argument of the wrong type", base(plugins={"pytorch": ["--port=http"]}), "spec.plugins.pytorch",
     "expected an integer"),
    ("stray plugin argument", base(plugins={"env": ["VC_X"]}), "spec.plugins.env", "is not a flag"),
    ("ray without a head task", base(plugins={"ray": []}), "spec.plugins.ray", "head task 'head' was not found"),
    ("ssh private key without the public one", base(plugins={"ssh": ["--ssh-private-key=x"]}), "spec.plugins.ssh",
     "go together"),
    ("unknown spec field", base(minAvaliable=1), "spec.minAvaliable", "unknown field"),
    ("unknown task field", with_task(0, replica=1), "spec.tasks[0].replica", "unknown field"),
    ("task name not a DNS label", with_task(0, name="Task_A"), "spec.tasks[0].name", "RFC 1123 label"),
    ("pod name too long", with_task(0, name="a" * 60), "spec.tasks[0].name", "not a valid pod name"),
    ("job name not a DNS name", (lambda d: (d["metadata"].update(name="J"), d)[-1])(base()), "metadata.name",
     "RFC 1123"),
    ("bad quantity in a template", with_task(1, template={"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}),
     "spec.tasks[1].template.spec.containers[0].resources.requests.cpu", "invalid quantity"),
    ("template without containers", with_task(0, template={"spec": {}}), "spec.tasks[0].template.spec.containers",
     "at least one container"),
    ("policy timeout not a duration", base(policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "5x"}]),
     "spec.policies[0].timeout", "Go duration"),
    ("internal event in a policy", base(policies=[{"event": "OutOfSync", "action": "RestartJob"}]),
     "spec.policies[0].event", "invalid policy event"),
    ("policy without an action", base(policies=[{"exitCode": 3}]), "spec.policies[0].action", "invalid policy action"),
    ("negative ttl", base(ttlSecondsAfterFinished=-1), "spec.ttlSecondsAfterFinished", "at least 0"),
    ("minSuccess zero", base(minSuccess=0), "spec.minSuccess", "at least 1"),
    ("topologyPolicy unknown", with_task(0, topologyPolicy="tight"), "spec.tasks[0].topologyPolicy", "must be one of"),
]


@pytest.mark.parametrize(("doc", "field", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_with_the_field_named(doc: dict, field: str, words: str) -> None:
    with pytest.raises(ManifestError) as info:
        admit_job(doc, "f.yaml:7")
    assert re.match(rf"f\.yaml:7: Job ns/\w+: {re.escape(field)}: ", str(info.value)), str(info.value)
    assert words in str(info.value)


def test_defaults_are_volcanos_webhook_defaults() -> None:
    job = admit_job(base(plugins={"mpi": ["--master=a", "--worker=b"]}), "f", AdmissionContext(scheduler_name="scoria"))
    spec = job.spec
    assert (spec.queue, spec.scheduler_name, spec.max_retry, spec.min_available) == ("default", "scoria", 3, 3)
    assert [(t.name, t.min_available, t.max_retry) for t in spec.tasks] == [("a", 2, 3), ("b", 1, 3)]
    assert spec.plugin_names == ("mpi", "ssh", "svc")  # mpi brings svc and ssh
    unnamed = base()
    del unnamed["spec"]["tasks"][1]["name"]
    assert [t.name for t in admit_job(unnamed, "f").spec.tasks] == ["a", "default1"]


def test_queue_and_priority_class_must_exist_when_known() -> None:
    context = AdmissionContext(queues={"default": QueueFacts(), "closed": QueueFacts(state="Closed")},
                               priority_classes={"high"})
    with pytest.raises(ManifestError, match="spec.queue: can only submit job to queue with state `Open`"):
        admit_job(base(queue="closed"), "f", context)
    with pytest.raises(ManifestError, match=r"spec.priorityClassName: PriorityClass 'low' is not defined"):
        admit_job(base(priorityClassName="low"), "f", context)
    doc = with_task(1, template={"spec": {"priorityClassName": "low", "containers": [{"name": "c"}]}})
    with pytest.raises(ManifestError, match=r"spec.tasks\[1\].template.spec.priorityClassName"):
        admit_job(doc, "f", context)
    admit_job(base(priorityClassName="high"), "f", context)


COMMAND = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": "j-abortjob-x"},
           "action": "AbortJob", "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j"}}


@pytest.mark.parametrize(("change", "wanted"), [
    (lambda c: c.update(action="Pause"), "action: Pause"),
    (lambda c: c.update(action=None), "action: missing"),
    (lambda c: c.pop("target"), "target: missing"),
    (lambda c: c["target"].update(kind="Pod"), "target.kind"),
    (lambda c: c["target"].pop("name"), "target.name: missing"),
    (lambda c: c.update(apiVersion="bus.volcano.sh/v1"), "apiVersion"),
])
def test_command_admission(change, wanted: str) -> None:
    cmd = copy.deepcopy(COMMAND)
    admit_command(cmd, "c.yaml")
    change(cmd)
    with pytest.raises(ManifestError, match=wanted):
        admit_command(cmd, "c.yaml")
