"""``python -m scheduler job|queue ...`` against the embedded scheduler (``--server``): the real command line, the
real control socket (:class:`ControlServer`), the embedded store, and the controllers and the scheduler driven
between commands; pods run by a faked node runtime (what its reports say)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main
from scheduler.modes.embedded.server import ControlServer
from tests.scheduler.modes.test_embedded import cluster
from tests.scheduler.modes.test_embedded_jobs import report_running, small_job


class Embedded:
    def __init__(self, tmp_path: Path) -> None:
        self.embedded, self.scheduler = cluster(tmp_path / "state")
        self.embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
        self.server = ControlServer(self.embedded, socket_path=tmp_path / "control.sock")
        self.server.start()
        self.url = f"unix://{tmp_path / 'control.sock'}"

    def drive(self, done: Callable[[], bool], rounds: int = 20) -> None:
        """Reconcile, schedule and let the node run what is bound to it until ``done``."""
        for _ in range(rounds):
            self.embedded.controllers.reconcile_once()
            self.scheduler.run_once()
            report_running(self.embedded)
            if done():
                return
        raise AssertionError("not reached")

    def phase(self, name: str = "train") -> str:
        stored = self.embedded.store.get("Job", f"default/{name}")
        return ((stored.status if stored else {}).get("state") or {}).get("phase", "")

    def pods(self, prefix: str = "train-") -> list[str]:
        return sorted(p.name for p in self.embedded.cache.pods.values() if p.name.startswith(prefix)
                      and not p.terminating)


@pytest.fixture
def emb(tmp_path: Path):
    made = Embedded(tmp_path)
    yield made
    made.server.stop()


@pytest.fixture
def vcctl(emb, capsys):
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*argv, "--server", emb.url])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_a_job_is_run_listed_viewed_suspended_resumed_and_deleted(emb, vcctl, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(small_job()))
    code, out, err = vcctl("job", "run", "-f", str(path))
    assert code == 0, err
    assert out.strip() == "run job train successfully"
    code, _, err = vcctl("job", "run", "-f", str(path))
    assert code == 1 and "already exists" in err
    emb.drive(lambda: emb.phase() == "Running")
    code, out, _ = vcctl("job", "list")
    header, row = out.splitlines()
    assert header.split()[:3] == ["Name", "Creation", "Phase"]
    assert row.split()[0] == "train" and row.split()[2:] == ["Running", "Batch", "3", "3", "0", "3", "0", "0", "0",
                                                             "0"]
    assert vcctl("job", "list", "-n", "elsewhere")[1].strip() == "No resources found"
    assert vcctl("job", "list", "--all-namespaces")[1].splitlines()[1].split()[:2] == ["default", "train"]
    assert vcctl("job", "suspend", "-N", "train")[0] == 0
    emb.drive(lambda: emb.phase() == "Aborted" and not emb.pods())
    code, out, _ = vcctl("job", "view", "-N", "train")
    assert code == 0 and "Aborted" in out and "CommandIssued" in out, out
    assert vcctl("job", "resume", "-N", "train")[0] == 0
    emb.drive(lambda: emb.phase() == "Running" and len(emb.pods()) == 3)
    code, _, err = vcctl("job", "view", "-N", "absent")
    assert code == 1 and "job default/absent not found" in err
    assert vcctl("job", "delete", "-N", "train")[0] == 0
    emb.drive(lambda: not emb.embedded.store.of_kind("Job") and not emb.embedded.store.of_kind("PodGroup"))
    assert vcctl("job", "delete", "-N", "train")[0] == 1


def test_job_run_from_flags_and_a_refused_job(emb, vcctl, tmp_path: Path) -> None:
    code, out, err = vcctl("job", "run", "-N", "quick", "-r", "2", "-m", "2", "-R", "cpu=100m,memory=64Mi",
                           "-L", "cpu=100m,memory=64Mi")
    assert code == 0, err
    job = emb.embedded.store.get("Job", "default/quick")
    assert job is not None and job.manifest["spec"]["minAvailable"] == 2
    bad = small_job("bad")
    bad["spec"]["tasks"][0]["minAvailable"] = 9
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    code, _, err = vcctl("job", "run", "-f", str(tmp_path / "bad.yaml"))
    assert code == 2 and "spec.tasks[0].minAvailable" in err
    assert emb.embedded.store.get("Job", "default/bad") is None


def test_queues_are_created_listed_closed_and_deleted(emb, vcctl) -> None:
    assert vcctl("queue", "create", "-n", "research", "-w", "3")[0] == 0
    assert emb.embedded.cache.queues["research"].weight == 3
    code, out, _ = vcctl("queue", "list")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert code == 0 and rows["research"][:3] == ["research", "3", "Open"] and "default" in rows
    assert vcctl("queue", "operate", "-n", "research", "-a", "update", "-w", "5")[0] == 0
    assert emb.embedded.cache.queues["research"].weight == 5
    code, _, err = vcctl("queue", "operate", "-n", "research", "-a", "delete")
    assert code == 1 and "only a queue with state Closed can be deleted" in err
    assert vcctl("queue", "operate", "-n", "research", "-a", "close")[0] == 0
    assert emb.embedded.cache.queues["research"].state == "Closed"
    code, out, _ = vcctl("queue", "get", "-n", "research")
    assert out.splitlines()[1].split()[:3] == ["research", "5", "Closed"]
    path = Path(emb.url[len("unix://"):]).parent / "late.yaml"
    path.write_text(yaml.safe_dump(small_job("late", queue="research")))
    code, _, err = vcctl("job", "run", "-f", str(path))
    assert code == 2 and "research" in err  # a closed queue takes no Job (Volcano's admission)
    assert vcctl("queue", "operate", "-n", "research", "-a", "delete")[0] == 0
    assert "research" not in emb.embedded.cache.queues
    assert vcctl("queue", "create", "-n", "later", "-S", "Closed")[0] == 0
    assert emb.embedded.cache.queues["later"].state == "Closed"
    assert vcctl("queue", "operate", "-n", "later", "-a", "open")[0] == 0
    assert emb.embedded.cache.queues["later"].state == "Open"
    code, _, err = vcctl("queue", "get", "-n", "nothing")
    assert code == 1 and "queue nothing not found" in err
    code, _, err = vcctl("queue", "create", "-n", "later")
    assert code == 1 and "already exists" in err
    code, _, err = vcctl("queue", "operate", "-n", "default", "-a", "delete")
    assert code == 1 and "'default' can not be deleted" in err


def test_an_unreachable_server_is_one_line(tmp_path: Path, capsys) -> None:
    code = main(["job", "list", "--server", f"unix://{tmp_path / 'none.sock'}"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "none.sock" in err
