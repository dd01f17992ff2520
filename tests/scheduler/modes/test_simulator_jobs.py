"""Volcano Jobs in the simulator: ``simulate -f job.yaml`` runs the real Job and PodGroup controllers beside the
real scheduler, so a Job's pods appear under their Volcano names and land on nodes over the cycles; a Job Volcano's
admission would refuse is one line naming the file, the Job and the field, and exit status 2."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from scheduler.framework.config import parse_config
from scheduler.modes.simulator.simulation import simulate

ROOT = Path(__file__).resolve().parents[3]
AT = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)


def node(name: str, cpu: str = "8", memory: str = "16Gi") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": memory}}}


def task(name: str, replicas: int, cpu: str = "1", **extra: object) -> dict:
    return {"name": name, "replicas": replicas, **extra, "template": {"spec": {"containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}


def job(name: str, tasks: list[dict], **spec: object) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"tasks": tasks, **spec}}


def write(tmp_path: Path, docs: list[dict], name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def run(*paths: Path, **kwargs) -> dict:
    return simulate([str(p) for p in paths], at=AT, **kwargs).to_dict()


def test_a_pytorch_job_lands_under_volcano_pod_names(tmp_path: Path) -> None:
    path = write(tmp_path, [node("n1"), node("n2"), job("train", [task("master", 1, "2"), task("worker", 2, "4")],
                                                        plugins={"pytorch": []})])
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "-f", str(path), "-o", "json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    placed = {p["name"]: p["node"] for p in result["pods"]}
    assert set(placed) == {"train-master-0", "train-worker-0", "train-worker-1"} and all(placed.values())
    (group,) = result["podGroups"]
    assert group["name"].startswith("train-") and group["phase"] == "Running"
    (status,) = result["jobs"]
    assert (status["name"], status["phase"], status["running"], status["minAvailable"]) == ("train", "Running", 3, 3)


def test_depends_on_starts_the_workers_cycles_after_the_master(tmp_path: Path) -> None:
    tasks = [task("master", 1), task("worker", 2, minAvailable=0, dependsOn={"name": ["master"]})]
    result = run(write(tmp_path, [node("n1"), job("train", tasks, minAvailable=1)]))
    assert sorted(p["name"] for p in result["pods"] if p["node"]) == ["train-master-0", "train-worker-0",
                                                                       "train-worker-1"]
    assert result["stats"]["cycles"] >= 3  # admit, place the master; then the workers, created after it ran


def test_a_job_the_cluster_cannot_admit_gets_no_pods(tmp_path: Path) -> None:
    """As in Volcano, a Job's pods are created once enqueue admits its PodGroup; one whose minResources exceed
    what the cluster could ever give stays Pending, without pods."""
    result = run(write(tmp_path, [node("n1", cpu="2"), job("big", [task("worker", 3)])]))
    assert result["pods"] == [] and result["jobs"][0]["phase"] == "Pending"
    assert [g["phase"] for g in result["podGroups"]] == ["Pending"]


def test_gang_keeps_admitted_pods_pending_until_all_fit(tmp_path: Path) -> None:
    nodes = [node("n1", cpu="2"), node("n2", cpu="2")]  # 4 cpus in all, but no node takes two 1.2-cpu pods
    result = run(write(tmp_path, [*nodes, job("big", [task("worker", 3, cpu="1200m")])]))
    assert len(result["pods"]) == 3 and all(p["node"] is None for p in result["pods"])
    assert result["jobs"][0]["phase"] == "Pending" and result["jobs"][0]["pending"] == 3


def test_an_elastic_job_runs_with_its_minimum(tmp_path: Path) -> None:
    result = run(write(tmp_path, [node("n1", cpu="3"), job("el", [task("worker", 5, minAvailable=2)], minAvailable=2)]))
    assert sum(1 for p in result["pods"] if p["node"]) == 3
    assert result["jobs"][0]["phase"] == "Running"


def test_a_suspend_command_in_the_files_aborts_the_job(tmp_path: Path) -> None:
    command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
               "metadata": {"name": "train-abortjob", "namespace": "ml"}, "action": "AbortJob",
               "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train"}}
    result = run(write(tmp_path, [node("n1"), job("train", [task("worker", 2)]), command]))
    assert result["jobs"][0]["phase"] == "Aborted" and result["pods"] == []


def test_without_enqueue_pods_come_at_once(tmp_path: Path) -> None:
    config = parse_config('actions: "allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n',
                          "test")
    result = run(write(tmp_path, [node("n1"), job("train", [task("worker", 2)])]), config=config)
    assert sum(1 for p in result["pods"] if p["node"]) == 2


def test_plain_workload_pods_get_one_podgroup_per_owner(tmp_path: Path) -> None:
    def owned(name: str, owner: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "web", "annotations": {"scheduling.volcano.sh/queue-name": "default"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}",
                                 "controller": True}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    result = run(write(tmp_path, [node("n1"), owned("a-1", "a"), owned("a-2", "a"), owned("b-1", "b")]))
    assert sorted(g["name"] for g in result["podGroups"]) == ["podgroup-uid-a", "podgroup-uid-b"]
    assert all(p["node"] == "n1" for p in result["pods"])


def test_the_job_table(tmp_path: Path) -> None:
    path = write(tmp_path, [node("n1"), job("train", [task("worker", 2)])])
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "-f", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    header = next(line for line in out.stdout.splitlines() if line.startswith("NAMESPACE  JOB"))
    assert header.split() == ["NAMESPACE", "JOB", "PHASE", "MIN", "PENDING", "RUNNING", "SUCCEEDED", "FAILED",
                              "RETRYCOUNT"]
    assert any(line.split()[:3] == ["ml", "train", "Running"] for line in out.stdout.splitlines())


BAD = [
    ("task minAvailable above replicas", lambda d: d["spec"]["tasks"][0].update(minAvailable=5),
     "Job ml/train: spec.tasks[0].minAvailable: 'minAvailable' (5) is greater than 'replicas' (2)"),
    ("an undefined queue", lambda d: d["spec"].update(queue="gpu"), "Job ml/train: spec.queue: unable to find job queue"),
    ("an unknown plugin", lambda d: d["spec"].update(plugins={"horovod": []}),
     "Job ml/train: spec.plugins.horovod: unable to find job plugin: horovod"),
    ("a dependency cycle", lambda d: d["spec"]["tasks"][0].update(dependsOn={"name": ["worker"]}),
     "Job ml/train: spec.tasks[0].dependsOn: job has dependencies between tasks"),
]


def test_a_refused_job_is_one_line_naming_file_job_and_field(tmp_path: Path) -> None:
    for label, change, wanted in BAD:
        doc = job("train", [task("worker", 2)])
        change(doc)
        path = write(tmp_path, [node("n1"), copy.deepcopy(doc)], name=f"{label.replace(' ', '-')}.yaml")
        out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "-f", str(path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (label, out.stderr)
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith(f"error: {path}:") and wanted in line, (label, line)


def test_a_command_for_a_missing_job_is_refused(tmp_path: Path) -> None:
    command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": "c", "namespace": "ml"},
               "action": "ResumeJob", "target": {"kind": "Job", "name": "nope"}}
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "-f", str(write(tmp_path, [node("n1"), command]))],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Command ml/c: target.name: Job ml/nope is not defined" in out.stderr


def test_the_shipped_job_examples_are_admitted_and_run(tmp_path: Path) -> None:
    examples = ROOT / "daemonset" / "examples" / "jobs"
    nodes = write(tmp_path, [node(f"n{i}", cpu="16", memory="64Gi") for i in range(4)], name="nodes.yaml")
    result = run(examples, nodes)
    phases = {j["name"]: j["phase"] for j in result["jobs"]}
    assert phases == {"mpi": "Running", "ray": "Running", "serve": "Running", "tf": "Running", "train": "Running"}
    assert all(p["node"] for p in result["pods"]) and len(result["pods"]) == 3 + 3 + 5 + 3 + 3
