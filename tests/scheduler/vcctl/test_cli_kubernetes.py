"""``python -m scheduler job|queue ...`` against a cluster (``--kubeconfig``): the real command line, the real client,
hack/lib/fake_apiserver.py, and Kubernetes mode's controllers acting on what the commands make."""

from __future__ import annotations

import pytest
import yaml

from scheduler.cli import main
from tests.support.kube_harness import write_kubeconfig
from tests.support.kube_jobs import volcano_job


@pytest.fixture
def vcctl(api, tmp_path, capsys):
    kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", api.url))

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*argv, "--kubeconfig", kubeconfig])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_queues_are_created_listed_closed_and_deleted(api, vcctl) -> None:
    assert vcctl("queue", "create", "-n", "research", "-w", "3")[0] == 0
    made = api.get("queues", "research")
    assert made["spec"]["weight"] == 3
    code, out, _ = vcctl("queue", "list")
    assert code == 0 and out.splitlines()[0].split() == ["Name", "Weight", "State", "Inqueue", "Pending", "Running",
                                                         "Unknown"]
    assert out.splitlines()[1].split()[:3] == ["research", "3", "Open"]
    assert vcctl("queue", "operate", "-n", "research", "-a", "update", "-w", "5")[0] == 0
    assert api.get("queues", "research")["spec"]["weight"] == 5
    code, _, err = vcctl("queue", "operate", "-n", "research", "-a", "delete")
    assert code == 1 and "only a queue with state Closed can be deleted" in err and api.get("queues", "research")
    assert vcctl("queue", "operate", "-n", "research", "-a", "close")[0] == 0
    assert api.get("queues", "research")["status"]["state"] == "Closed"
    code, out, _ = vcctl("queue", "get", "-n", "research")
    assert out.splitlines()[1].split()[:3] == ["research", "5", "Closed"]
    assert vcctl("queue", "operate", "-n", "research", "-a", "delete")[0] == 0
    assert api.get("queues", "research") is None
    assert vcctl("queue", "create", "-n", "later", "-S", "Closed")[0] == 0
    assert api.get("queues", "later")["status"]["state"] == "Closed"
    assert vcctl("queue", "operate", "-n", "later", "-a", "open")[0] == 0
    assert api.get("queues", "later")["status"]["state"] == "Open"
    code, _, err = vcctl("queue", "get", "-n", "nothing")
    assert code == 1 and "queue nothing not found" in err
    code, _, err = vcctl("queue", "create", "-n", "later")
    assert code == 1 and "already exists" in err
    api.put({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}, "status": {"state": "Closed"}})
    code, _, err = vcctl("queue", "operate", "-n", "default", "-a", "delete")
    assert code == 1 and "'default' can not be deleted" in err


def test_a_job_is_run_listed_viewed_suspended_resumed_and_deleted(api, cluster, vcctl, tmp_path) -> None:
    c = cluster()
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(volcano_job()))
    code, out, err = vcctl("job", "run", "-f", str(path))
    assert code == 0, err
    assert out.strip() == "run job train successfully"
    c.drive(lambda: c.phase() == "Running" and all(p["status"]["phase"] == "Running" for p in c.pods().values()))
    code, out, _ = vcctl("job", "list")
    header, row = out.splitlines()
    assert header.split() == ["Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running",
                              "Succeeded", "Failed", "Unknown", "RetryCount"]
    cells = row.split()
    assert cells[0] == "train" and cells[2:] == ["Running", "Batch", "2", "2", "0", "2", "0", "0", "0", "0"]
    code, out, _ = vcctl("job", "list", "--all-namespaces")
    assert out.splitlines()[0].split()[:2] == ["Namespace", "Name"] and out.splitlines()[1].split()[:2] == [
        "default", "train"]
    assert vcctl("job", "list", "-n", "elsewhere")[1].strip() == "No resources found"
    assert vcctl("job", "suspend", "-N", "train")[0] == 0
    c.drive(lambda: c.phase() == "Aborted" and not c.pods())
    code, out, _ = vcctl("job", "view", "-N", "train")
    assert code == 0 and "Phase:           Aborted" in out and "CommandIssued" in out
    assert vcctl("job", "resume", "-N", "train")[0] == 0
    c.drive(lambda: c.phase() == "Running" and all(p["status"]["phase"] == "Running" for p in c.pods().values()))
    code, out, _ = vcctl("job", "delete", "-N", "train")
    assert code == 0 and out.strip() == "delete job train successfully"
    assert api.wait_collected()
    api.finish_terminating(everything=True)
    assert not c.job() and not c.pods() and not api.objects("podgroups")
    code, _, err = vcctl("job", "view", "-N", "train")
    assert code == 1 and "job default/train not found" in err


def test_a_job_from_flags_is_vcctls(api, vcctl) -> None:
    code, out, _ = vcctl("job", "run", "-N", "quick", "-r", "3", "-m", "2", "-i", "python:3.11", "-R", "cpu=500m")
    assert code == 0 and out.strip() == "run job quick successfully"
    job = api.get("jobs.batch.volcano.sh", "quick", "default")
    (task,) = job["spec"]["tasks"]
    container = task["template"]["spec"]["containers"][0]
    assert (job["spec"]["minAvailable"], task["name"], task["replicas"]) == (2, "quick", 3)
    assert container["image"] == "python:3.11" and container["resources"]["requests"] == {"cpu": "500m"}
    assert container["resources"]["limits"] == {"cpu": "1000m", "memory": "100Mi"}
    assert task["template"]["spec"]["restartPolicy"] == "Never" and job["spec"]["schedulerName"] == "scoria"


def test_what_admission_refuses_is_refused_before_anything_is_sent(api, vcctl, tmp_path) -> None:
    doubled = volcano_job()
    doubled["spec"]["tasks"].append(dict(doubled["spec"]["tasks"][0]))
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doubled))
    code, _, err = vcctl("job", "run", "-f", str(path))
    assert code == 2 and "bad.yaml" in err and "spec.tasks[1].name" in err
    api.put({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "shut"},
             "spec": {"weight": 1}, "status": {"state": "Closed"}})
    closed = volcano_job("late", queue="shut")
    path.write_text(yaml.safe_dump(closed))
    code, _, err = vcctl("job", "run", "-f", str(path))
    assert code == 2 and "shut" in err
    code, _, err = vcctl("job", "run", "-N", "x", "-R", "cpu")
    assert code == 2 and "--requests" in err
    assert not [c for c in api.calls if c.verb == "create"]


def test_an_unreachable_cluster_is_one_line(tmp_path, capsys) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    assert main(["job", "list", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: list jobs in default: cannot reach http://127.0.0.1:9") and "Traceback" not in err
