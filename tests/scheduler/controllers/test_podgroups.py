"""PodGroups for plain workloads: Volcano's podgroup controller tests as data (tests/fixtures/volcano-jobs/
pg_controller_test.yaml), then the controller through the loop and a MemoryHost."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from scheduler.controllers.host import MemoryHost
from scheduler.controllers.jobs.quota import parse_resources
from scheduler.controllers.kinds import POD, PODGROUP, REPLICASET, annotations_of
from scheduler.controllers.loop import ControllerLoop
from scheduler.controllers.podgroups import PodGroupSettings, build_podgroup, group_name, plain_pod_effects
from scheduler.controllers.writes import Annotate, Create

FIXTURE = yaml.safe_load((Path(__file__).resolve().parents[2] / "fixtures" / "volcano-jobs" / "pg_controller_test.yaml")
                         .read_text())
NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["case"])
def test_volcano_podgroup_case(case: dict) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(case["pod"])}
    pod["spec"].setdefault("schedulerName", "scoria")
    owners = {REPLICASET: [{"apiVersion": "apps/v1", "kind": "ReplicaSet", **r} for r in case.get("replicasets", [])]}
    settings = PodGroupSettings(inherit_owner_annotations=case.get("inherit", True))
    want = case["expect"]
    effects = plain_pod_effects([pod], {}, owners, settings)
    if want.get("none"):
        assert effects == []
        return
    if pod["metadata"].get("ownerReferences"):
        assert [type(e) for e in effects] == [Create, Annotate]
        group = effects[0].obj
        assert effects[1].annotations == {"scheduling.k8s.io/group-name": group["metadata"]["name"]}
    else:  # Volcano groups a pod without owner too; Scoria leaves it to its implicit group, so build it directly
        assert effects == []
        group = build_podgroup(pod, group_name(pod), owners, settings)
    if "name" in want:
        assert group["metadata"]["name"] == want["name"]
    if "ownerReferences" in want:
        assert group["metadata"]["ownerReferences"] == want["ownerReferences"]
    spec = group["spec"]
    for key in ("minMember", "priorityClassName", "queue"):
        if key in want:
            assert spec.get(key) == want[key], key
    for name, amount in (want.get("minResources") or {}).items():
        assert parse_resources(spec["minResources"])[name] == amount
    for key, value in (want.get("annotations") or {}).items():
        assert group["metadata"]["annotations"][key] == value
    for key in want.get("absentAnnotations", ()):
        assert key not in group["metadata"].get("annotations", {})
    for key, value in (want.get("labels") or {}).items():
        assert group["metadata"]["labels"][key] == value


def _pod(name: str, owner_uid: str | None, *, scheduler: str = "scoria", **meta) -> dict:
    metadata = {"name": name, "namespace": "web", **meta}
    if owner_uid:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner_uid,
                                        "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def test_one_group_per_owner_and_every_pod_annotated() -> None:
    host = MemoryHost(clock=lambda: NOW)
    for doc in (_pod("a-1", "rs-a"), _pod("a-2", "rs-a"), _pod("b-1", "rs-b"), _pod("bare", None),
                _pod("other", "rs-c", scheduler="default-scheduler")):
        host.create(doc)
    loop = ControllerLoop()
    result = loop.reconcile(host, NOW)
    groups = sorted(g["metadata"]["name"] for g in host.list(PODGROUP))
    assert groups == ["podgroup-rs-a", "podgroup-rs-b"]
    notes = {p["metadata"]["name"]: annotations_of(p).get("scheduling.k8s.io/group-name") for p in host.list(POD)}
    assert notes == {"a-1": "podgroup-rs-a", "a-2": "podgroup-rs-a", "b-1": "podgroup-rs-b", "bare": None, "other": None}
    assert result.writes == 5
    assert loop.reconcile(host, NOW).writes == 0  # idempotent


def test_a_replicaset_scaled_to_zero_loses_its_group() -> None:
    host = MemoryHost(clock=lambda: NOW)
    host.create(_pod("a-1", "rs-a"))
    loop = ControllerLoop()
    loop.reconcile(host, NOW)
    host.seed({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "web",
                                                                           "uid": "rs-a"}, "spec": {"replicas": 0}})
    loop.reconcile(host, NOW)
    assert host.list(PODGROUP) == []


def test_queue_priority_and_owner_annotations_reach_the_group() -> None:
    host = MemoryHost(clock=lambda: NOW)
    host.seed({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "rs", "namespace": "web", "uid": "rs-a",
        "annotations": {"scheduling.volcano.sh/group-min-member": "2", "volcano.sh/sla-waiting-time": "1h",
                        "other.io/key": "x"}}, "spec": {"replicas": 2}})
    pod = _pod("a-1", "rs-a", annotations={"scheduling.volcano.sh/queue-name": "batch"})
    pod["spec"]["priorityClassName"] = "high"
    host.create(pod)
    ControllerLoop(podgroups=PodGroupSettings(scheduler_names=frozenset({"scoria"}))).reconcile(host, NOW)
    (group,) = host.list(PODGROUP)
    assert group["spec"]["queue"] == "batch" and group["spec"]["priorityClassName"] == "high"
    assert group["spec"]["minMember"] == 2 and parse_resources(group["spec"]["minResources"])["cpu"] == 2000
    assert group["metadata"]["annotations"] == {"volcano.sh/sla-waiting-time": "1h"}
