"""The local runtime on this machine's real cgroup v1 hierarchies, with real processes.

Each test runs its pods under its own uniquely named parent cgroup, with its
own state directory, and leaves neither a process nor a cgroup behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import FixedLayout
from agent.embedded import Backoff, LocalEvictor, LocalRuntime
from agent.embedded.podcgroups import container_cgroup
from agent.hostpaths import HostPaths
from agent.loop import AgentConfig
from hack.lib.processes import ROOT, stop
from hack.lib.real_cgroups import make_agent, runtime_unavailable
from hack.lib.real_cgroups import sandbox as cgroup_sandbox
from proto.model import PodAction, PodActionKind

pytestmark = pytest.mark.skipif(bool(runtime_unavailable()), reason=runtime_unavailable() or "")
CG = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpu", "cpuacct", "memory", "cpuset")


@pytest.fixture
def env(tmp_path: Path):
    """(backend, parent cgroup, a factory of runtimes on one state directory); all stopped afterwards."""
    backend = detect_backend(HostPaths())
    made: list[LocalRuntime] = []
    with cgroup_sandbox(backend, "cpu") as (parent, _):
        def runtime(**kw) -> LocalRuntime:
            kw.setdefault("backoff", Backoff(initial=0.05))
            rt = LocalRuntime(tmp_path / "state", backend, FixedLayout(backend, parent), workdir=str(tmp_path), **kw)
            made.append(rt)
            return rt
        try:
            yield backend, parent, runtime
        finally:
            for rt in reversed(made):
                rt._closed = False  # a test may have shut one down; shutting down again is harmless
                rt.shutdown(0)


def manifest(uid: str, *commands: str, policy: str = "Never", name: str = "", grace: int | None = None,
             resources: dict | None = None, **spec) -> str:
    containers = [{"name": f"c{i}", "command": ["sh", "-c", cmd], "resources": resources or {}}
                  for i, cmd in enumerate(commands)]
    doc = {"metadata": {"uid": uid, "name": name or uid, "namespace": "default"},
           "spec": {"restartPolicy": policy, "containers": containers, **spec}}
    if grace is not None:
        doc["spec"]["terminationGracePeriodSeconds"] = grace
    return json.dumps(doc)


def until(rt: LocalRuntime, cond: Callable[[], bool], timeout: float = 4.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        rt.tick()
        if cond():
            return
        assert time.monotonic() < deadline, f"timed out; runtime: {rt.runtime()}"
        time.sleep(0.02)


def only(rt: LocalRuntime):
    pods = rt.runtime()
    assert len(pods) == 1, pods
    return pods[0]


def cgroup_of(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            out[c] = path
    return out


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    proc = psutil.Process(pid)
    return [pid] + [c.pid for c in proc.children(recursive=True)]


def test_a_container_runs_in_its_own_cgroup_with_its_limits_and_logs(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.apply(PodAction(PodActionKind.START, "web", pod_json=manifest(
        "web", "echo started $SCORIA_POD_NAME; exec sleep 30",
        resources={"requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "64Mi"}})))
    log = tmp_path / "state" / "logs" / "default_web_web" / "c0.log"
    until(rt, lambda: log.exists() and "started web" in log.read_text())
    pod = only(rt)
    assert (pod.phase, pod.containers[0].state) == ("Running", "running")
    assert pod.log_dir == str(log.parent)
    path = container_cgroup(f"{parent}/online/podweb", "web", "c0")
    for pid in tree(pod.containers[0].pid):  # the wrapper and the command it runs
        where = cgroup_of(pid)
        assert all(where[c] == f"/{path}" for c in CONTROLLERS), where
    assert (CG / "cpu" / path / "cpu.cfs_quota_us").read_text().strip() == "50000"
    assert (CG / "cpu" / path / "cpu.shares").read_text().strip() == "256"
    assert int((CG / "memory" / path / "memory.limit_in_bytes").read_text()) == 64 * 2**20
    assert [p.uid for p in rt.pods()] == ["web"] and rt.pods()[0].qos_class == "Burstable"


def test_exit_codes_become_phases_and_finished_pods_leave_no_cgroup(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.start(manifest("ok", "echo done"))
    rt.start(manifest("bad", "exit 3"))
    until(rt, lambda: all(p.phase in ("Succeeded", "Failed") for p in rt.runtime()))
    got = {p.uid: p for p in rt.runtime()}
    assert (got["ok"].phase, got["ok"].reason) == ("Succeeded", "Completed")
    assert (got["bad"].phase, got["bad"].reason) == ("Failed", "Error")
    assert "exited with code 3" in got["bad"].message and got["bad"].containers[0].exit_code == 3
    until(rt, lambda: not (CG / "cpu" / parent / "online" / "podok").exists()
          and not (CG / "memory" / parent / "online" / "podbad").exists())
    assert rt.pods() == []
    assert Path(got["ok"].log_dir, "c0.log").read_text() == "done\n"  # logs stay


def test_on_failure_restarts_with_back_off_and_counts_restarts(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    rt = runtime(backoff=Backoff(initial=0.2))
    count = tmp_path / "count"
    script = f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}; echo run $n; [ $n -ge 2 ]"
    started = time.monotonic()
    rt.start(manifest("flaky", script, policy="OnFailure"))
    until(rt, lambda: only(rt).phase == "Succeeded", timeout=5)
    elapsed = time.monotonic() - started
    pod = only(rt)
    assert pod.restarts == 2 and pod.containers[0].restarts == 2 and pod.reason == "Completed"
    assert elapsed >= 0.2 + 0.4  # waited the back-off: 0.2 s, then 0.4 s
    # each run's output apart (issue 19: restarts were appended to one file): the current run and the one before
    assert Path(pod.log_dir, "c0.log").read_text() == "run 2\n"
    assert Path(pod.log_dir, "c0.previous.log").read_text() == "run 1\n"
    # and how the run before ended stays known: kubectl's Last State (it showed exit code 0 after a restart)
    c0 = pod.containers[0]
    assert (c0.state, c0.exit_code, c0.reason) == ("terminated", 0, "Completed"), c0
    assert c0.last_termination is not None and (c0.last_termination.exit_code, c0.last_termination.reason) == (
        1, "Error"), c0
    assert c0.last_termination.started_ns < c0.last_termination.finished_ns <= c0.finished_ns, c0


def test_a_container_cgroup_removed_meanwhile_is_made_again(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    rt = runtime(backoff=Backoff(initial=0.3))
    flag = tmp_path / "flag"
    rt.start(manifest("again", f"if [ -e {flag} ]; then exec sleep 30; fi; touch {flag}; exit 1", policy="OnFailure",
                      resources={"limits": {"memory": "64Mi"}}))
    until(rt, lambda: only(rt).containers[0].state == "waiting")
    path = container_cgroup(f"{parent}/online/podagain", "again", "c0")
    for c in CONTROLLERS:
        (CG / c / path).rmdir()  # someone removed it during the back-off
    until(rt, lambda: only(rt).containers[0].state == "running" and only(rt).restarts == 1)
    pid = only(rt).containers[0].pid
    until(rt, lambda: all(cgroup_of(pid)[c] == f"/{path}" for c in CONTROLLERS))  # the wrapper moved in
    assert int((CG / "memory" / path / "memory.limit_in_bytes").read_text()) == 64 * 2**20


def test_never_does_not_restart_and_always_does(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.start(manifest("always", "exit 0", policy="Always"))
    until(rt, lambda: only(rt).restarts >= 2)
    assert only(rt).phase == "Running"


def test_a_missing_executable_is_a_start_error(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    doc = json.loads(manifest("nocmd", "x"))
    doc["spec"]["containers"][0]["command"] = ["no-such-program-anywhere"]
    rt.start(json.dumps(doc))
    pod = only(rt)
    assert (pod.phase, pod.reason) == ("Failed", "StartError") and "not found in $PATH" in pod.message
    assert pod.containers[0].exit_code == 128


def test_stop_kills_what_ignores_sigterm_after_the_grace_period(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.start(manifest("stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done", grace=30))
    rt.start(manifest("polite", "echo ready; exec sleep 30"))
    until(rt, lambda: all(Path(p.log_dir, "c0.log").exists() and Path(p.log_dir, "c0.log").read_text()
                          for p in rt.runtime()))
    pids = {p.uid: tree(p.containers[0].pid) for p in rt.runtime()}
    started = time.monotonic()
    rt.apply(PodAction(PodActionKind.STOP, "stubborn", grace_period_seconds=1))
    rt.stop("polite", 5)
    until(rt, lambda: all(gone(pid) for pid in pids["polite"]))
    assert time.monotonic() - started < 0.9  # SIGTERM was enough
    assert not all(gone(pid) for pid in pids["stubborn"])
    until(rt, lambda: rt.runtime() == [])
    assert time.monotonic() - started >= 1.0  # the stubborn one was killed only after its grace period
    assert all(gone(pid) for pids_ in pids.values() for pid in pids_)
    for uid in ("stubborn", "polite"):
        assert not (CG / "cpu" / parent / "online" / f"pod{uid}").exists()
        assert not (CG / "memory" / parent / "online" / f"pod{uid}").exists()
        assert (tmp_path / "state" / "logs" / f"default_{uid}_{uid}" / "c0.log").exists()
    rt.start(manifest("polite", "exit 0"))  # a late START for a stopped pod
    assert rt.runtime() == []


def test_evicted_pods_are_failed_evicted(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.start(manifest("batch", "exec sleep 30"))
    until(rt, lambda: only(rt).phase == "Running")
    pids = tree(only(rt).containers[0].pid)
    rt.apply(PodAction(PodActionKind.EVICT, "batch", reason="memory pressure on the node"))
    until(rt, lambda: only(rt).phase == "Failed")
    pod = only(rt)
    assert (pod.reason, pod.message) == ("Evicted", "memory pressure on the node")
    assert all(gone(pid) for pid in pids) and rt.pods() == []
    assert not (CG / "cpu" / parent / "offline" / "podbatch").exists()
    rt.apply(PodAction(PodActionKind.STOP, "batch"))  # the scheduler has it: dropped
    assert rt.runtime() == []


def test_a_runtime_dropped_without_shutdown_is_adopted_by_the_next(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    first = runtime()
    go = tmp_path / "go"
    first.start(manifest("long", f"echo up; while [ ! -e {go} ]; do sleep 0.02; done; exit 7"))
    until(first, lambda: only(first).phase == "Running")
    pid = only(first).containers[0].pid
    first._closed = True  # as if the agent were SIGKILLed: no shutdown, the pod keeps running
    second = runtime()
    second.tick()
    pod = only(second)
    assert (pod.phase, pod.containers[0].state, pod.containers[0].pid) == ("Running", "running", pid)
    wrappers = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and "scoria-wrap" in p.info["cmdline"]
                and str(tmp_path) in " ".join(p.info["cmdline"])]
    assert [p.pid for p in wrappers] == [pid]  # not started a second time
    go.touch()
    until(second, lambda: only(second).phase == "Failed")
    pod = only(second)
    assert pod.containers[0].exit_code == 7 and "exited with code 7" in pod.message and pod.restarts == 0


def test_an_exit_while_the_agent_was_down_is_not_lost(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    first = runtime()
    go = tmp_path / "go"
    first.start(manifest("short", f"while [ ! -e {go} ]; do sleep 0.02; done; exit 5", policy="OnFailure"))
    until(first, lambda: only(first).phase == "Running")
    first._closed = True
    go.touch()
    exit_file = tmp_path / "state" / "run" / "short" / "c0.exit"
    deadline = time.monotonic() + 3
    while not exit_file.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = runtime()
    until(second, lambda: only(second).restarts == 1)  # exited 5 -> OnFailure starts it again
    assert only(second).containers[0].exit_code in (0, 5)


def test_shutdown_leaves_no_process_and_no_cgroup(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.start(manifest("a", "trap '' TERM; sleep 30 & sleep 30", "exec sleep 30", grace=30))
    rt.start(manifest("b", "exec sleep 30", policy="Always"))
    until(rt, lambda: all(len(psutil.Process(c.pid).children()) for p in rt.runtime() for c in p.containers))
    pids = [pid for p in rt.runtime() for c in p.containers for pid in tree(c.pid)]
    groups = {os.getpgid(c.pid) for p in rt.runtime() for c in p.containers}
    started = time.monotonic()
    rt.shutdown(grace=0.3)
    assert time.monotonic() - started < 3
    assert all(gone(pid) for pid in pids)
    for group in groups:
        members = [p for p in psutil.process_iter() if _pgid(p.pid) == group and not gone(p.pid)]
        assert members == []
    assert not (CG / "cpu" / parent).exists() and not (CG / "memory" / parent).exists()
    assert not (CG / "cpuset" / parent).exists() and not (CG / "cpuacct" / parent).exists()
    # the records stay: the next start treats the pods as after a reboot
    again = runtime()
    until(again, lambda: {p.uid: p.phase for p in again.runtime()} == {"a": "Failed", "b": "Running"})
    got = {p.uid: p for p in again.runtime()}
    assert {c.exit_code for c in got["a"].containers} <= {137, 143} and "shutdown" in got["a"].message
    assert got["b"].restarts == 1 and got["b"].containers[0].state == "running"
    assert (CG / "cpu" / parent / "offline" / "podb").is_dir()  # its cgroups made again


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


def test_oom_kills_are_reported(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    rt.start(manifest("hog", f"exec {sys.executable} -c 'x = bytearray(256 * 2**20)'",
                      resources={"limits": {"memory": "32Mi"}}))
    until(rt, lambda: only(rt).phase == "Failed")
    pod = only(rt)
    assert (pod.reason, pod.containers[0].exit_code) == ("OOMKilled", 137)


def test_the_agent_drives_the_runtime_and_applies_its_qos(env) -> None:
    backend, parent, runtime = env
    rt = runtime()
    agent = make_agent(backend, parent, [], config=AgentConfig("this-node"))
    agent.pods, agent.runtime, agent.evictor = rt, rt, LocalEvictor(rt, max_grace=0.2)
    rt.executor = agent.executor
    rt.start(manifest("batch", "exec sleep 30", resources={"requests": {"kubernetes.io/batch-cpu": "500"}}))
    report = agent.slow_tick()
    assert [(p.uid, p.phase) for p in report.runtime] == [("batch", "Running")]
    assert [p.uid for p in report.load.pods] == ["batch"]
    assert (CG / "cpu" / parent / "offline" / "podbatch" / "cpu.idle").read_text().strip() == "1"
    from agent.intents import Evict
    assert agent.evictor.evict(Evict("batch", "default", "batch", "node memory above 90%", "memory"))
    until(rt, lambda: only(rt).phase == "Failed")
    assert only(rt).reason == "Evicted"


def test_the_agent_cli_adopts_pods_and_cleans_up_on_sigint(env, tmp_path: Path) -> None:
    backend, parent, runtime = env
    first = runtime()
    first.start(manifest("kept", "exec sleep 30"))
    until(first, lambda: only(first).phase == "Running")
    pid = only(first).containers[0].pid
    first._closed = True
    agent = subprocess.Popen([sys.executable, "-m", "agent", "-v", "run", "--embedded", "--state", str(tmp_path / "state"),
                              "--cgroup-parent", parent, "--metrics-port", "0", "--no-devices"],
                             cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            record = json.loads((tmp_path / "state" / "pods" / "kept.json").read_text())
            if "adopted pod default/kept" in _peek(agent):
                break
            assert agent.poll() is None, _peek(agent)
            assert time.monotonic() < deadline, "the agent did not adopt the pod"
            time.sleep(0.1)
        assert record["containers"][0]["pid"] == pid and not gone(pid)
        agent.send_signal(signal.SIGINT)
        assert agent.wait(10) == 0
    finally:
        stop(agent, signal.SIGKILL)
    assert gone(pid)
    assert not (CG / "cpu" / parent).exists() and not (CG / "memory" / parent).exists()


_seen: dict[int, str] = {}


def _peek(proc: subprocess.Popen) -> str:
    """The stderr the process wrote so far (non-blocking)."""
    import fcntl
    fd = proc.stderr.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    try:
        chunk = proc.stderr.read() or ""
    except (BlockingIOError, TypeError):
        chunk = ""
    _seen[proc.pid] = _seen.get(proc.pid, "") + chunk
    return _seen[proc.pid]


class FakeScheduler:
    """The scheduler's side of the stream, just enough: acks every report, hands out queued pod actions."""

    def __init__(self) -> None:
        import queue
        self.actions: queue.Queue[PodAction] = queue.Queue()
        self.reports: list = []

    def Connect(self, request_iterator, context):
        from proto import codec
        from proto.model import Ack, Directive
        for message in request_iterator:
            report = codec.report_from_pb(message)
            self.reports.append(report)
            actions = []
            while not self.actions.empty():
                actions.append(self.actions.get())
            yield codec.directive_to_pb(Directive(ack=Ack(report.identity.sequence), pod_actions=actions))

    def runtime(self) -> dict:
        return {p.uid: p for p in self.reports[-1].runtime} if self.reports else {}


def test_the_agent_runs_what_the_scheduler_sends_and_reports_it(env, tmp_path: Path) -> None:
    from concurrent import futures

    import grpc

    from proto.scoria.v1 import agent_pb2_grpc
    backend, parent, runtime = env
    scheduler = FakeScheduler()
    server = grpc.server(futures.ThreadPoolExecutor(4))
    agent_pb2_grpc.add_NodeAgentServicer_to_server(scheduler, server)
    sock = tmp_path / "agent.sock"  # as serve --embedded listens: a Unix socket, no TLS and no --insecure
    assert server.add_insecure_port(f"unix:{sock}")
    server.start()
    agent = subprocess.Popen([sys.executable, "-m", "agent", "run", "--embedded", "--state", str(tmp_path / "state"),
                              "--cgroup-parent", parent, "--scheduler", f"unix:{sock}",
                              "--interval", "0.2", "--metrics-port", "0", "--no-devices", "--node-name", "box"],
                             cwd=ROOT, stderr=subprocess.PIPE, text=True)

    def wait(cond: Callable[[], bool], timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert agent.poll() is None, _peek(agent)
            assert time.monotonic() < deadline, (scheduler.runtime(), _peek(agent))
            time.sleep(0.05)
    try:
        scheduler.actions.put(PodAction(PodActionKind.START, "one", "default", "one",
                                        pod_json=manifest("one", "exec sleep 30")))
        wait(lambda: "one" in scheduler.runtime() and scheduler.runtime()["one"].phase == "Running")
        pid = scheduler.runtime()["one"].containers[0].pid
        scheduler.actions.put(PodAction(PodActionKind.STOP, "one", "default", "one"))
        wait(lambda: "one" not in scheduler.runtime())
        assert gone(pid)
        scheduler.actions.put(PodAction(PodActionKind.START, "two", "default", "two",
                                        pod_json=manifest("two", "exec sleep 30", policy="Always")))
        wait(lambda: "two" in scheduler.runtime() and scheduler.runtime()["two"].phase == "Running")
        pid = scheduler.runtime()["two"].containers[0].pid
        assert scheduler.reports[-1].identity.node_name == "box"
        agent.send_signal(signal.SIGINT)
        assert agent.wait(10) == 0
    finally:
        stop(agent, signal.SIGKILL)
        server.stop(0)
    assert gone(pid)
    assert not (CG / "cpu" / parent).exists() and not (CG / "memory" / parent).exists()


def test_an_online_pod_without_requests_runs_as_online_work(env, tmp_path: Path) -> None:
    """``volcano.sh/qos-level: LS`` with no requests is BestEffort by Kubernetes' class: it still goes under the
    online parent, is never SCHED_IDLE, and memory pressure evicts the offline pod beside it, not it."""
    backend, parent, runtime = env
    rt = runtime()
    profile = tmp_path / "pressure.yaml"  # any machine is above 1% memory: evictions are due at once
    profile.write_text("spec: {eviction: {memoryHighPercent: 1, memoryLowPercent: 0, samples: 1, maxPerInterval: 5}}\n")
    agent = make_agent(backend, parent, [], profile=profile, config=AgentConfig("this-node"))
    agent.pods, agent.runtime, agent.evictor = rt, rt, LocalEvictor(rt, max_grace=0.2)
    rt.executor = agent.executor
    web = json.loads(manifest("web", "exec sleep 30", policy="Always"))
    web["metadata"]["annotations"] = {"volcano.sh/qos-level": "LS"}
    rt.start(json.dumps(web))
    rt.start(manifest("batch", "exec sleep 30"))  # no annotation, no requests: BestEffort, offline
    assert (CG / "cpu" / parent / "online" / "podweb").is_dir() and (CG / "cpu" / parent / "offline" / "podbatch").is_dir()
    agent.slow_tick()
    assert (CG / "cpu" / parent / "online" / "podweb" / "cpu.idle").read_text().strip() == "0"
    assert (CG / "cpu" / parent / "online" / "cpu.cfs_quota_us").read_text().strip() == "-1"
    until(rt, lambda: {p.uid: p.reason for p in rt.runtime()}.get("batch") == "Evicted")
    for _ in range(3):
        agent.slow_tick()
    got = {p.uid: p for p in rt.runtime()}
    assert (got["web"].phase, got["web"].reason) == ("Running", "")
    assert got["web"].containers[0].restarts == 0 and not gone(got["web"].containers[0].pid)


def test_an_offline_pod_with_plain_cpu_requests_runs_under_the_offline_parent(env, tmp_path: Path) -> None:
    """Issue 19 item 6: ``volcano.sh/qos-level: BE`` with ordinary CPU requests (Burstable by Kubernetes' class,
    no batch resources) is offline work: its cgroup is under the offline parent, whose quota the agent moves,
    and it runs SCHED_IDLE — never under the online parent because of its class."""
    backend, parent, runtime = env
    rt = runtime()
    agent = make_agent(backend, parent, [], config=AgentConfig("this-node"))
    agent.pods, agent.runtime, agent.evictor = rt, rt, LocalEvictor(rt, max_grace=0.2)
    rt.executor = agent.executor
    batch = json.loads(manifest("burst", "echo started; exec sleep 30",
                                resources={"requests": {"cpu": "500m", "memory": "64Mi"}}))
    batch["metadata"]["annotations"] = {"volcano.sh/qos-level": "BE"}
    rt.start(json.dumps(batch))
    log = tmp_path / "state" / "logs" / "default_burst_burst" / "c0.log"
    until(rt, lambda: log.exists() and "started" in log.read_text())  # the wrapper has joined its cgroup
    path = container_cgroup(f"{parent}/offline/podburst", "burst", "c0")
    for pid in tree(only(rt).containers[0].pid):
        where = cgroup_of(pid)
        assert all(where[c] == f"/{path}" for c in CONTROLLERS), where
    assert not (CG / "cpu" / parent / "online" / "podburst").exists()
    agent.slow_tick()
    assert (CG / "cpu" / parent / "offline" / "podburst" / "cpu.idle").read_text().strip() == "1"
    assert agent.slow_tick().colocation.offline_cpu_quota_millis is not None


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("variable", [{"name": "A=B", "value": "x"}, {"name": "A\u0000B", "value": "x"},
                                      {"name": "A", "value": "x\u0000y"}],
                         ids=["equals-in-name", "nul-in-name", "nul-in-value"])
def test_a_container_exec_refuses_backs_off_as_the_kubelets_do(env, variable: dict) -> None:
    """exec(2) refuses the environment (a name with '=' or a NUL byte): the container never starts.  It is
    restarted 10 s, 20 s, 40 s … later, not on every tick (the issue saw 14 restarts in 15 s), and the pod's
    reason says why."""
    backend, parent, runtime = env
    clock = FakeClock()
    rt = runtime(backoff=Backoff(), clock=clock)
    doc = json.loads(manifest("bad-env", "exec sleep 30", policy="Always"))
    doc["spec"]["containers"][0]["env"] = [variable]
    rt.apply(PodAction(PodActionKind.START, "bad-env", pod_json=json.dumps(doc)))
    started = clock.t
    restarts_at = []
    for _ in range(160):  # 160 s of ticks, one a second
        clock.t += 1
        before = only(rt).restarts
        rt.tick()
        if only(rt).restarts > before:
            restarts_at.append(clock.t - started)
    assert restarts_at == [10, 30, 70, 150]  # 10 s, then doubling: 20, 40, 80
    pod = only(rt)
    assert (pod.phase, pod.reason) == ("Running", "CrashLoopBackOff")
    assert "StartError" not in pod.message and "cannot be started" in pod.message and \
        ("environment variable" in pod.message) and pod.containers[0].pid == 0
    assert pod.containers[0].state == "waiting" and pod.containers[0].exit_code == 128


def test_a_start_that_fails_for_any_reason_backs_off(env, monkeypatch) -> None:
    """Whatever makes a start fail — here a bug in spawning, simulated — the container waits its back-off."""
    from agent.embedded import starting
    backend, parent, runtime = env
    clock = FakeClock()
    rt = runtime(backoff=Backoff(), clock=clock)

    def broken(*args, **kwargs):
        raise RuntimeError("spawn broke")
    monkeypatch.setattr(starting, "spawn", broken)
    rt.apply(PodAction(PodActionKind.START, "broken", pod_json=manifest("broken", "exec sleep 30", policy="Always")))
    for _ in range(15):
        clock.t += 1
        rt.tick()
    pod = only(rt)
    assert pod.restarts == 1 and pod.reason == "CrashLoopBackOff" and "spawn broke" in pod.message


def _catches_sigterm(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


@pytest.mark.parametrize("when,delay", [("spawn", 0.1), ("spawn", 0.2), ("caught", 0.0), ("caught", 0.3)],
                         ids=["100ms-after-spawn", "200ms-after-spawn", "as-soon-as-caught", "300ms-after-caught"])
def test_sigterm_while_the_agent_starts_stops_the_pods_cleanly(env, tmp_path: Path, when: str, delay: float) -> None:
    """An agent SIGTERMed in its first moments — importing, adopting the pods an earlier agent left — exits 0
    having stopped them as any shutdown does, not -15 with the previous run's processes left running."""
    backend, parent, runtime = env
    first = runtime()
    first.start(manifest("kept", "exec sleep 30", policy="Always"))
    until(first, lambda: only(first).phase == "Running")
    pids = tree(only(first).containers[0].pid)
    first._closed = True  # as if that agent had been SIGKILLed: its pod runs on
    spawned = time.monotonic()
    agent = subprocess.Popen([sys.executable, "-m", "agent", "run", "--embedded", "--state", str(tmp_path / "state"),
                              "--cgroup-parent", parent, "--metrics-port", "0", "--no-devices"],
                             cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        if when == "caught":  # the agent holds SIGTERM from its first moment: well within 0.2 s of its start
            while not _catches_sigterm(agent.pid):
                assert agent.poll() is None and time.monotonic() - spawned < 0.2, "SIGTERM not held in time"
                time.sleep(0.002)
        time.sleep(max(0.0, delay - (time.monotonic() - spawned)) if when == "spawn" else delay)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(20) == 0, agent.stderr.read()
    finally:
        stop(agent, signal.SIGKILL)
    assert all(gone(pid) for pid in pids)
    assert not (CG / "cpu" / parent).exists() and not (CG / "memory" / parent).exists()
    record = json.loads((tmp_path / "state" / "pods" / "kept.json").read_text())
    assert record["stopping"] is None and record["cgroup"] == ""  # stopped as on a normal shutdown, record kept
