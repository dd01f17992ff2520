"""Volcano Jobs in embedded mode, end to end: ``serve --embedded`` and ``agent run --embedded`` as real processes,
each pod a real process in its own network namespace, small pure-Python programs that find each other by the
names the Job plugins publish.

Each test has its own scheduler, agent, cgroup parent and pod range (so its own bridge), and leaves no process,
cgroup, network namespace or bridge behind (checked in ``Stack.close``).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from agent.embedded.podnet import PodNetwork
from hack.lib.processes import ROOT
from hack.lib.real_cgroups import runtime_unavailable
from tests.e2e.test_demo import Stack, wait


def _unavailable() -> str | None:
    return runtime_unavailable() or PodNetwork("probe").problem()


pytestmark = pytest.mark.skipif(bool(_unavailable()), reason=_unavailable() or "")
PY = sys.executable


class JobStack(Stack):
    """The demo's stack with a pod range of its own and the Volcano Job words of the CLI."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        n = uuid.uuid4().int % 200 + 20
        self.cidr = f"10.251.{n}.0/24"
        self.bridge = PodNetwork("x").bridge_of(self.cidr)

    def start_scheduler(self) -> None:  # the demo's, with this stack's pod range
        self.scheduler = subprocess.Popen(
            [PY, "-m", "scheduler", "-v", "serve", "--embedded", "--state", str(self.dir / "scheduler"),
             "--metrics-port", "0", "--config", str(self.config), "--schedule-interval", "0.3",
             "--pod-cidr", self.cidr, "--agent-state", str(self.dir / "agent")],
            cwd=ROOT, stdout=self._log("scheduler"), stderr=subprocess.STDOUT)
        wait(lambda: self._answers() or self.scheduler.poll() is not None, 30, "the control endpoint")
        assert self.scheduler.poll() is None, self.logs()

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([PY, "-m", "scheduler", *args, "--server", self.api], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert not check or done.returncode == 0, done.stdout + done.stderr
        return done

    def job(self, name: str) -> dict:
        found = [j for j in self.get("/objects/jobs") if j["key"] == f"default/{name}"]
        return found[0]["status"] if found else {}

    def phase(self, name: str) -> str:  # type: ignore[override]
        return (self.job(name).get("state") or {}).get("phase", "")

    def log_of(self, pod: str) -> str:
        done = self.cli("logs", pod, check=False)
        return done.stdout + done.stderr

    def close(self) -> None:
        super().close()
        left = Path(f"/sys/class/net/{self.bridge}").exists()
        netns = [p.name for p in Path("/run/netns").glob("scoria-*")
                 if (self.dir / "agent") and PodNetwork(str((self.dir / "agent").absolute())).tag in p.name]
        for name in netns:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
        assert not netns, f"network namespaces left behind: {netns}"
        assert not left, f"bridge {self.bridge} left behind"


@pytest.fixture
def stack(tmp_path: Path):
    made: list[JobStack] = []

    def make() -> JobStack:
        s = JobStack(tmp_path)
        made.append(s)
        return s.up()

    yield make
    for s in made:
        s.close()


def job(name: str, tasks: list[dict], **spec) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"schedulerName": "scoria", "tasks": tasks, **spec}}


def task(name: str, replicas: int, code: str, tag: str, *, restart: str = "Never", **more) -> dict:
    return {"name": name, "replicas": replicas, **more,
            "template": {"spec": {"restartPolicy": restart, "terminationGracePeriodSeconds": 2, "containers": [
                {"name": "main", "image": "ignored", "command": [PY, "-c", code, tag],
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}


def until(cond: Callable[[], object], timeout: float, what: str, stack: JobStack) -> None:
    wait(cond, timeout, what, stack.logs)


PYTORCH_MASTER = """
import os, socket
world, rank, port = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"]), int(os.environ["MASTER_PORT"])
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", port)); server.listen()
peers = {}
while len(peers) < world - 1:
    conn, (ip, _) = server.accept()
    their_rank, their_world = map(int, conn.recv(100).decode().split())
    assert their_world == world, (their_world, world)
    peers[their_rank] = (conn, ip)
assert sorted(peers) == list(range(1, world)), sorted(peers)
for conn, _ in peers.values():
    conn.sendall(f"ok {world}".encode()); conn.close()
print("master", rank, "world", world, "ranks", sorted(peers), "from", sorted(ip for _, ip in peers.values()), flush=True)
"""
PYTORCH_WORKER = """
import os, socket, time
world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
mine = socket.socket(); mine.bind(("0.0.0.0", port)); mine.listen()   # the master's port, in a namespace of its own
for _ in range(300):
    try:
        conn = socket.create_connection((addr, port), timeout=2); break
    except OSError:
        time.sleep(0.1)
conn.sendall(f"{rank} {world}".encode())
print("worker", rank, "of", world, "at", addr, "got", conn.recv(100).decode(), flush=True)
"""


def test_a_pytorch_job_meets_at_master_addr_and_agrees_on_world_size(stack) -> None:
    s = stack()
    s.apply(job("torch", [task("master", 1, PYTORCH_MASTER, s.tag), task("worker", 2, PYTORCH_WORKER, s.tag)],
                plugins={"pytorch": ["--port=23456"]}))
    until(lambda: s.phase("torch") == "Completed", 90, "the pytorch job to complete", s)
    master = s.log_of("torch-master-0")
    assert "master 0 world 3 ranks [1, 2]" in master, master
    for i in (0, 1):
        assert f"worker {i + 1} of 3 at torch-master-0.torch got ok 3" in s.log_of(f"torch-worker-{i}")
    ips = {s.get(f"/objects/pods/default/torch-worker-{i}")["status"]["podIP"] for i in (0, 1)}
    assert len(ips) == 2 and all(ip.startswith(s.cidr.rsplit(".", 1)[0]) for ip in ips)
    assert str(sorted(ips)) in master  # the master saw each worker come from its own address


MPI_MASTER = """
import os, pathlib, socket, time
hosts = pathlib.Path("/etc/volcano/mpiworker.host").read_text().split()
assert hosts == os.environ["MPI_HOST"].split(","), (hosts, os.environ["MPI_HOST"])
ssh = pathlib.Path("/root/.ssh")
assert (ssh / "id_rsa").read_text().startswith("-----BEGIN") and oct((ssh / "id_rsa").stat().st_mode & 0o777) == "0o600"
assert (ssh / "authorized_keys").read_text() == (ssh / "id_rsa.pub").read_text()
reached = []
for host in hosts:
    for _ in range(300):
        try:
            with socket.create_connection((host, 22), timeout=2) as c:
                reached.append((host, c.recv(100).decode().strip())); break
        except OSError:
            time.sleep(0.1)
print("reached", reached, flush=True)
assert len(reached) == len(hosts) == 2
"""
MPI_WORKER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 22)); s.listen()   # where sshd would listen: port 22 in each worker's own namespace
while True:
    c, _ = s.accept(); c.sendall(("hello from " + socket.gethostname()).encode()); c.close()
"""


def test_an_mpi_job_master_reads_its_hostfile_and_reaches_every_worker_by_name(stack) -> None:
    s = stack()
    s.apply(job("mpi", [task("mpimaster", 1, MPI_MASTER, s.tag,
                             policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
                        task("mpiworker", 2, MPI_WORKER, s.tag)],
                plugins={"mpi": ["--master=mpimaster", "--worker=mpiworker", "--port=22"], "svc": [], "ssh": []}))
    until(lambda: s.phase("mpi") == "Completed", 90, "the mpi job to complete", s)
    out = s.log_of("mpi-mpimaster-0")
    assert "reached [('mpi-mpiworker-0.mpi', 'hello from mpi-mpiworker-0'), " \
           "('mpi-mpiworker-1.mpi', 'hello from mpi-mpiworker-1')]" in out, out


SLEEPER = "import time\nwhile True: time.sleep(1)\n"


def test_an_evicted_pod_restarts_the_job_until_max_retry_fails_it(stack) -> None:
    s = stack()
    s.apply(job("retry", [task("worker", 2, SLEEPER, s.tag)], maxRetry=2,
                policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    until(lambda: s.phase("retry") == "Running", 60, "the job to run", s)
    for retry in (1, 2):
        first = s.get("/objects/pods/default/retry-worker-0")["manifest"]["metadata"]["uid"]
        s.cli("delete", "pod", "retry-worker-0")  # what Volcano sees as PodEvicted: a pod deleted under the Job
        if retry < 2:
            until(lambda first=first, retry=retry: s.job("retry").get("retryCount") == retry and
                  s.phase("retry") == "Running" and
                  s.get("/objects/pods/default/retry-worker-0")["manifest"]["metadata"]["uid"] != first,
                  60, f"restart {retry}", s)
            assert s.job("retry")["version"] == retry
    until(lambda: s.phase("retry") == "Failed", 60, "maxRetry to fail the job", s)
    assert s.job("retry")["retryCount"] == 2
    until(lambda: not [p for p in s.get("/objects/pods") if p["key"].startswith("default/retry-")
                       and p["status"].get("phase") == "Running"], 30, "the pods to stop", s)


def test_task_completed_completes_the_job(stack) -> None:
    s = stack()
    s.apply(job("done", [task("master", 1, "print('finished')", s.tag,
                              policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
                         task("worker", 2, SLEEPER, s.tag)]))
    until(lambda: s.phase("done") == "Completed", 60, "TaskCompleted to complete the job", s)
    until(lambda: all(p["key"] == "default/done-master-0" or p["status"].get("phase") != "Running"
                      for p in s.get("/objects/pods") if p["key"].startswith("default/done-")), 30,
          "the workers to be stopped", s)
    assert "finished" in s.log_of("done-master-0")


DEPENDENT = """
import os, socket, time
started = time.time()
for _ in range(300):
    try:
        socket.create_connection(("deps-master-0.deps", 8000), timeout=2).close(); break
    except OSError:
        time.sleep(0.1)
print("worker started", started, flush=True)
"""
MASTER_SERVING = """
import socket, time
print("master started", time.time(), flush=True)
s = socket.socket(); s.bind(("0.0.0.0", 8000)); s.listen()
while True:
    s.accept()[0].close()
"""


def test_depends_on_starts_the_workers_once_the_master_runs(stack) -> None:
    s = stack()
    s.apply(job("deps", [task("master", 1, MASTER_SERVING, s.tag),
                         task("worker", 2, DEPENDENT, s.tag, minAvailable=0, dependsOn={"name": ["master"]})],
                minAvailable=1, plugins={"svc": []}))
    until(lambda: all("worker started" in s.log_of(f"deps-worker-{i}") for i in (0, 1)), 90, "the workers", s)
    master_started = float(s.log_of("deps-master-0").split("master started ")[1].split()[0])
    for i in (0, 1):
        worker = s.get(f"/objects/pods/default/deps-worker-{i}")
        assert float(s.log_of(f"deps-worker-{i}").split("worker started ")[1].split()[0]) > master_started
        created = worker["manifest"]["metadata"]["creationTimestamp"]
        assert time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone >= int(master_started)


def test_suspend_and_resume_through_the_cli(stack) -> None:
    s = stack()
    s.apply(job("pause", [task("worker", 2, SLEEPER, s.tag)]))
    until(lambda: s.phase("pause") == "Running", 60, "the job to run", s)
    s.cli("job", "suspend", "-N", "pause")
    until(lambda: s.phase("pause") == "Aborted", 60, "the job to be aborted", s)
    until(lambda: not [p for p in s.get("/objects/pods") if p["key"].startswith("default/pause-")], 60,
          "its pods to go", s)
    listed = s.cli("job", "list").stdout
    assert "pause" in listed and "Aborted" in listed, listed
    s.cli("job", "resume", "-N", "pause")
    until(lambda: s.phase("pause") == "Running", 60, "the job to run again", s)
    view = s.cli("job", "view", "-N", "pause").stdout
    assert "CommandIssued" in view or "Running" in view, view
    s.cli("job", "delete", "-N", "pause")
    until(lambda: not [p for p in s.get("/objects/pods") if p["key"].startswith("default/pause-")], 60,
          "its pods to go with it", s)
    assert s.get("/objects/jobs") == []
    assert yaml  # the manifests go through the control API as YAML
