"""The local runtime killed (SIGKILL) at each phase of a pod's start and stop, then restarted: every pod is
adopted or cleaned up — each container runs exactly once, a stopped pod is gone — and no process or cgroup
is left behind.

The runtime that is killed runs in a child process (the agent's own code: ``LocalRuntime`` on the same
state directory and cgroup parent), with one of its steps replaced by a SIGKILL to itself right there.
The one that comes back is the test's, as an agent restarted on the same state directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import FixedLayout
from agent.embedded import Backoff, LocalRuntime
from agent.embedded.podcgroups import container_cgroup
from agent.hostpaths import HostPaths
from hack.lib.processes import ROOT
from hack.lib.real_cgroups import runtime_unavailable
from hack.lib.real_cgroups import sandbox as cgroup_sandbox

pytestmark = pytest.mark.skipif(bool(runtime_unavailable()), reason=runtime_unavailable() or "")
CG = Path("/sys/fs/cgroup")

# The child: a runtime on STATE and PARENT that SIGKILLs itself at PHASE.
CHILD = r"""
import json, os, signal, sys, time
from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import FixedLayout
from agent.embedded import Backoff, LocalRuntime, podcgroups, starting, stopping
from agent.embedded.records import StateDir
from agent.hostpaths import HostPaths

phase, state, parent, workdir, pod_json = sys.argv[1:6]
backend = detect_backend(HostPaths())
rt = LocalRuntime(state, backend, FixedLayout(backend, parent), workdir=workdir, backoff=Backoff(initial=0.05))

def die(*_, **__):
    os.kill(os.getpid(), signal.SIGKILL)

def after(real):
    def call(*args, **kwargs):
        result = real(*args, **kwargs)
        die()
        return result
    return call

uid = json.loads(pod_json)["metadata"]["uid"]
start_hooks = {
    "start:record-saved": lambda: setattr(podcgroups, "make", die),            # the record, no cgroup yet
    "start:cgroups-made": lambda: setattr(rt.host.executor, "apply", die),     # cgroups without their limits
    "start:before-spawn": lambda: setattr(starting, "spawn", die),             # cgroups and limits, no process
    "start:spawned": lambda: setattr(starting, "spawn", after(starting.spawn)),  # a process whose pid is not saved
    "start:started": lambda: None,                                             # all started and saved
}
stop_hooks = {
    "stop:signalled": lambda: setattr(stopping, "_signal", after(stopping._signal)),  # SIGTERM sent
    "stop:exited": lambda: setattr(podcgroups, "remove", die),                 # processes gone, cgroups still there
    "stop:cleaned": lambda: setattr(StateDir, "remove", die),                  # cgroups gone, record not dropped
}
if phase in start_hooks:
    start_hooks[phase]()
rt.start(pod_json)
if phase == "start:started":
    rt.tick()
    die()
deadline = time.monotonic() + 10
while not all(c.state == "running" for c in rt.held.get(uid).record.containers):
    assert time.monotonic() < deadline
    rt.tick()
    time.sleep(0.02)
stop_hooks[phase]()
rt.stop(uid, 5.0)
while time.monotonic() < deadline:
    rt.tick()
    time.sleep(0.02)
sys.exit("the runtime was not killed")
"""

PHASES = ["start:record-saved", "start:cgroups-made", "start:before-spawn", "start:spawned", "start:started",
          "stop:signalled", "stop:exited", "stop:cleaned"]


def manifest(uid: str) -> str:
    containers = [{"name": f"c{i}", "command": ["sh", "-c", "exec sleep 60"],
                   "resources": {"limits": {"memory": "64Mi"}}} for i in range(2)]
    return json.dumps({"metadata": {"uid": uid, "name": uid, "namespace": "default"},
                       "spec": {"restartPolicy": "Always", "containers": containers}})


def wrappers(state: Path) -> dict[str, list[int]]:
    """The container wrappers running for this state directory, by exit file (session leaders: a wrapper's
    child between its fork and its exec still shows the wrapper's command line)."""
    out: dict[str, list[int]] = {}
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        try:
            leader = os.getsid(p.pid) == p.pid and p.status() != psutil.STATUS_ZOMBIE
        except (OSError, psutil.Error):
            continue
        if leader and len(cmd) > 4 and cmd[3] == "scoria-wrap" and cmd[4].startswith(str(state)):
            out.setdefault(cmd[4], []).append(p.pid)
    return out


def tick_until(rt: LocalRuntime, cond, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        rt.tick()
        if cond():
            return
        assert time.monotonic() < deadline, rt.runtime()
        time.sleep(0.02)


@pytest.mark.parametrize("phase", PHASES)
def test_a_runtime_killed_at_each_phase_is_adopted_or_cleaned_by_the_next(tmp_path: Path, phase: str) -> None:
    backend = detect_backend(HostPaths())
    state = tmp_path / "state"
    with cgroup_sandbox(backend, "cpu") as (parent, _):
        uid = "faulty"
        child = subprocess.run([sys.executable, "-c", CHILD, phase, str(state), parent, str(tmp_path), manifest(uid)],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert child.returncode == -9, child.stderr  # it died where the phase says
        rt = LocalRuntime(state, backend, FixedLayout(backend, parent), workdir=str(tmp_path),
                          backoff=Backoff(initial=0.05))
        try:
            pod_cgroup = f"{parent}/online/pod{uid}"
            if phase.startswith("start:"):
                # adopted, or started where nothing ran: each container runs once, in its own cgroup
                tick_until(rt, lambda: [c.state for p in rt.runtime() for c in p.containers] == ["running"] * 2)
                running = wrappers(state)
                assert sorted(len(pids) for pids in running.values()) == [1, 1], running
                pids = {c.name: c.pid for p in rt.runtime() for c in p.containers}
                for name, pid in pids.items():  # in its cgroup (once the wrapper has joined it), with its limits
                    cgroup = container_cgroup(pod_cgroup, uid, name)
                    procs = CG / "cpu" / cgroup / "cgroup.procs"
                    tick_until(rt, lambda procs=procs, pid=pid: pid in {int(x) for x in procs.read_text().split()})
                    assert int((CG / "memory" / cgroup / "memory.limit_in_bytes").read_text()) == 64 * 2**20
                before = {k: v[:] for k, v in running.items()}
                for _ in range(10):  # and it stays so: nothing started a second time
                    rt.tick()
                    time.sleep(0.02)
                assert wrappers(state) == before
            else:
                # the stop goes on where it was: the pod is gone, its processes and cgroups too
                tick_until(rt, lambda: rt.runtime() == [])
                assert wrappers(state) == {}
                assert not (CG / "cpu" / pod_cgroup).exists() and not (CG / "memory" / pod_cgroup).exists()
                assert not (state / "pods" / f"{uid}.json").exists()
        finally:
            rt.shutdown(0)
        assert wrappers(state) == {}  # nothing left running, whatever happened
