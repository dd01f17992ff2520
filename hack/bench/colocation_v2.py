#!/usr/bin/env python3
"""The co-location benchmark's cgroup v2 run where the machine has no v2 CPU controller: a fixture tree.

A fixture tree has no scheduler behind it, so nothing here measures latency, throughput or CPU use: it
checks what the real agent (``python -m agent run``) *writes* on a cgroup v2 tree laid out as
``hack/bench/colocation.py`` lays out the real one (``<parent>/node/{online,offline}/pod…``), while this
process plays the kernel — every 2 ms it advances the QoS parents' ``cpu.stat`` (``usage_usec``) and the
online parent's ``cpu.pressure`` (``some total``), every 50 ms the pods', at the rates of the current step:

    calm      online 0.3 cores, offline the rest: the offline pod and parent SCHED_IDLE (cpu.idle 1),
              the quota open (cpu.max "max 100000")
    rise      online to 1.5 cores at once: cpu.max clamped (a number) — the time from the counters'
              change to the write is the agent's own reaction on v2 (no kernel in it)
    steady    online stays there: the clamp is let go once the slow loop has made it online's level
    stall     online level unchanged but its tasks stalled 30% of the time (cpu.pressure, which only v2
              keeps per group): clamped again
    calm      open again

Prints one JSON line: ``{"cgroup_version": 2, "mode": "fixture", "checks": {…}, "reaction_ms": …}``::

    python hack/bench/colocation_v2.py        (no root needed: nothing outside a temporary directory)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hack.lib.cgroup_fixtures import make_groups  # noqa: E402
from hack.lib.processes import free_port, scrape  # noqa: E402
from hack.lib.processes import stop as stop_process  # noqa: E402

PARENT = "scoria-colo/node"
ONLINE, OFFLINE = f"{PARENT}/online", f"{PARENT}/offline"
WEB, BATCH = f"{ONLINE}/podweb", f"{OFFLINE}/podbatch"


class FixtureKernel:
    """Counters moving at the rates of the current step (cores; stall as a share of time)."""

    def __init__(self, root: Path, cpus: int):
        self.root, self.cpus = root, cpus
        self.rates = {"online": 0.0, "offline": 0.0, "stall": 0.0}
        self.used = {WEB: 0.0, BATCH: 0.0}
        self.stalled_us = 0.0
        self.lock = threading.Lock()
        self.changed_at = time.monotonic()

    def set(self, **rates: float) -> None:
        with self.lock:
            self.rates.update(rates)
            self.changed_at = time.monotonic()

    def run(self, stop: threading.Event, every: float = 0.002, pods_every: int = 25) -> None:
        """The counters the fast loop reads (the QoS parents', the online stall) every ``every`` seconds —
        finely, as the kernel's move: a coarse step would look like a burst in a 25 ms window — and the pods'
        own (read once a second) every ``pods_every`` steps."""
        try:  # on time even on a busy machine (a late step looks like a burst); needs root, else best effort
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except (PermissionError, OSError):
            pass
        last, step = time.monotonic(), 0
        while not stop.wait(every):
            now = time.monotonic()
            with self.lock:
                dt, r = now - last, dict(self.rates)
            last, step = now, step + 1
            self.used[WEB] += r["online"] * dt * 1e6
            self.used[BATCH] += r["offline"] * dt * 1e6
            self.stalled_us += r["stall"] * dt * 1e6
            groups = {ONLINE: self.used[WEB], OFFLINE: self.used[BATCH], PARENT: self.used[WEB] + self.used[BATCH]}
            if step % pods_every == 0:
                groups.update({WEB: self.used[WEB], BATCH: self.used[BATCH]})
            for group, usec in groups.items():
                _write(self.root / group / "cpu.stat", f"usage_usec {int(usec):015d}\nuser_usec 0\nsystem_usec 0\n")
            _write(self.root / ONLINE / "cpu.pressure",
                   f"some avg10=0.00 avg60=0.00 avg300=0.00 total={int(self.stalled_us):015d}\n"
                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=000000000000000\n")


def _write(path: Path, text: str) -> None:
    """In place, as the kernel's files change (the agent keeps counter files open), in one write of a fixed
    length (numbers zero-padded) so that a reader never sees a half-written one."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, text.encode(), 0)
    finally:
        os.close(fd)


def _read(root: Path, group: str, name: str) -> str:
    try:
        return (root / group / name).read_text().strip()
    except OSError:
        return ""


def _wait(test, seconds: float, every: float = 0.001) -> float | None:
    """Seconds until ``test()`` holds (polled every ``every``), or None after ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if test():
            return time.monotonic() - start
        time.sleep(every)
    return None


def run(profile: Path | None = None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="scoria-colo-v2-"))
    cg = tmp / "cg"
    make_groups(cg, version=2, groups=[WEB, BATCH])
    cpus = os.cpu_count() or 2
    kernel = FixtureKernel(cg, cpus)
    kernel.set(online=0.3, offline=cpus - 0.3)
    stop = threading.Event()
    threading.Thread(target=kernel.run, args=(stop,), daemon=True).start()
    port = free_port()
    cmd = [sys.executable, "-m", "agent", "run", "--node-name", "colocation-v2", "--cgroup-root", str(cg),
           "--cgroup-parent", PARENT, "--pods-from", "cgroups", "--no-devices", "--metrics-port", str(port)]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    checks: dict[str, bool] = {}
    reactions: list[float] = []
    log = tmp / "agent.log"
    with open(log, "w") as err:
        agent = subprocess.Popen(cmd, cwd=ROOT, stderr=err)
    try:
        quota = lambda: _read(cg, OFFLINE, "cpu.max")  # noqa: E731
        idle = _wait(lambda: _read(cg, OFFLINE, "cpu.idle") == "1" == _read(cg, BATCH, "cpu.idle"), 30, 0.02)
        checks["offline_parent_and_pod_sched_idle"] = idle is not None
        time.sleep(2.5)  # two slow ticks: the calm level measured
        checks["calm_quota_open"] = quota() == "max 100000"
        for _ in range(3):
            kernel.set(online=1.5, offline=cpus - 1.5)
            took = _wait(lambda: not quota().startswith("max"), 2.0)
            if took is not None:
                reactions.append(took)
            time.sleep(2.5)  # the slow loop makes 1.5 cores online's level: the clamp is let go
            checks.setdefault("steady_quota_open_again", True)
            checks["steady_quota_open_again"] &= quota() == "max 100000"
            kernel.set(online=0.3, offline=cpus - 0.3)
            time.sleep(2.5)
        checks["rise_clamps_quota"] = len(reactions) == 3
        kernel.set(stall=0.3)
        checks["online_stall_clamps_quota"] = _wait(lambda: not quota().startswith("max"), 2.0) is not None
        kernel.set(stall=0.0)
        checks["calm_quota_open_at_end"] = _wait(lambda: quota() == "max 100000", 3.0) is not None
        metrics = scrape(f"http://127.0.0.1:{port}/metrics", timeout=5)
        checks["no_cgroup_write_errors"] = not any(v for k, v in metrics.items()
                                                   if k.startswith("scoria_agent_cgroup_write_errors_total"))
        checks["agent_running"] = agent.poll() is None
    finally:
        stop.set()
        stop_process(agent, timeout=10)  # killed (and reaped) if it will not go
        tail = log.read_text()[-1500:] if not all(checks.values()) else ""
        shutil.rmtree(tmp, ignore_errors=True)
    ms = sorted(round(r * 1000, 1) for r in reactions)
    out = {"cgroup_version": 2, "mode": "fixture", "checks": checks, "ok": all(checks.values()),
           "reaction_ms": {"all": ms, "max": ms[-1] if ms else None},
           "note": "a fixture tree: the agent's v2 write paths (cpu.idle, cpu.max open/clamped, PSI stall per "
                   "group) only; no latency, throughput or utilisation (no kernel scheduler behind it)"}
    if tail:
        out["agent_log_tail"] = tail
    return out


def main() -> None:
    profile = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    print(json.dumps(run(profile)))


if __name__ == "__main__":
    main()
