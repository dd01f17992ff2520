#!/usr/bin/env python3
"""How fast the agent squeezes offline work when online work wakes up, on this machine's real cgroups.

Under a private cgroup parent (removed afterwards) offline CPU hogs run in an
offline pod, and an online pod holds one busy process that is stopped
(SIGSTOP) — idle.  Each step resumes it (SIGCONT): from that instant the
benchmark polls the offline parent's ``cpu.cfs_quota_us`` every millisecond
until the agent has cut it by a fifth of the node (an open quota, no limit,
counts as the whole node); then it stops the online process again and waits
for the quota to open again.  The same poll also times the kernel's own
squeeze: until the online process runs (it stamps the monotonic clock into a
shared page as it spins, so its first stamp after SIGCONT is when it got a CPU
from the SCHED_IDLE hogs).  Prints one JSON line:

    {"steps": 40, "median_ms": ..., "p99_ms": ..., "max_ms": ..., "kernel": {"p99_ms": ...}, ...}

    sudo python hack/bench/qos_reaction.py [--steps 40] [--fast-interval 0.025] [--profile FILE]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

from agent.cgroups.backend import detect_backend  # noqa: E402
from agent.cgroups.tree import attach, remove_group  # noqa: E402
from agent.hostpaths import HostPaths  # noqa: E402
from agent.loop import AgentConfig  # noqa: E402
from agent.pods import PodInfo  # noqa: E402
from hack.lib.real_cgroups import make_agent, spawn  # noqa: E402
from proto.model import QosLevel  # noqa: E402


def run(args: argparse.Namespace) -> dict:
    paths = HostPaths()
    backend = detect_backend(paths)
    parent = f"scoria-bench-{uuid.uuid4().hex[:10]}"
    pods = [PodInfo("online", qos_class="Burstable", qos_level=QosLevel.LS),
            PodInfo("offline", qos_class="BestEffort", qos_level=QosLevel.BE)]
    procs: list[subprocess.Popen] = []
    stop = threading.Event()
    stamp: Path | None = None
    try:
        agent = make_agent(backend, parent, pods, profile=args.profile,
                           config=AgentConfig("bench", fast_interval=args.fast_interval))
        layout = agent.layout
        for _ in range(os.cpu_count() or 2):
            spawn(backend, layout.pod_path("offline", "BestEffort"), procs)
        stamp = Path(tempfile.mkstemp(prefix="scoria-reaction-")[1])
        stamp.write_bytes(bytes(8))
        online = subprocess.Popen([sys.executable, "-c", ONLINE, str(stamp)])
        procs.append(online)
        attach(backend, layout.pod_path("online", "Burstable"), online.pid)
        os.kill(online.pid, signal.SIGSTOP)
        last_ran = _stamp_reader(stamp)
        loops = threading.Thread(target=agent.run, args=(stop,), daemon=True)
        loops.start()
        capacity = agent.capacity.cpu_millis
        reactions, kernel, skipped = [], [], 0
        time.sleep(3)  # the slow loop measures the quiet node and opens the quota
        for _ in range(args.steps):
            before = _wait_open(backend, layout, capacity, timeout=10.0)
            if before is None:  # the slow loop never let offline work back in: not a step we can time
                skipped += 1
                continue
            t0 = time.perf_counter()
            os.kill(online.pid, signal.SIGCONT)
            got_cpu = None
            while time.perf_counter() - t0 < 2.0:
                if got_cpu is None and last_ran() > t0:
                    got_cpu = last_ran() - t0  # not when we noticed: when it ran (its own first stamp would do)
                now = _open_as_node(_quota(backend, layout), capacity)
                if now < before - capacity * 0.2:
                    reactions.append(time.perf_counter() - t0)
                    break
                time.sleep(0.001)
            if got_cpu is not None:
                kernel.append(got_cpu)
            os.kill(online.pid, signal.SIGSTOP)
            time.sleep(args.recover)
    finally:
        stop.set()
        if stamp is not None:
            stamp.unlink(missing_ok=True)
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
        remove_group(backend, parent)
    ms, kms = np.array(reactions) * 1000, np.array(kernel) * 1000
    return {"steps": len(reactions), "skipped": skipped, "missed": args.steps - skipped - len(reactions),
            "median_ms": round(float(np.median(ms)), 1) if ms.size else None,
            "p99_ms": round(float(np.percentile(ms, 99)), 1) if ms.size else None,
            "max_ms": round(float(ms.max()), 1) if ms.size else None, "fast_interval_ms": args.fast_interval * 1000,
            "psi_trigger": agent.trigger_used or "none (the kernel allows this process no window under 2 s)",
            "kernel": {"what": "SIGCONT to the online process running (its clock stamp), past the SCHED_IDLE hogs",
                       "steps": int(kms.size), "median_ms": round(float(np.median(kms)), 1) if kms.size else None,
                       "p99_ms": round(float(np.percentile(kms, 99)), 1) if kms.size else None},
            "capacity_millicores": capacity, "offline_hogs": os.cpu_count(), "cgroup_version": backend.version,
            "profile": str(args.profile) if args.profile else "builtin"}


# the online process: busy, stamping the monotonic clock into a shared page as it runs
ONLINE = """import mmap, struct, sys, time
f = open(sys.argv[1], "r+b")
page = mmap.mmap(f.fileno(), 8)
put, now = struct.Struct("d").pack_into, time.perf_counter
while True:
    put(page, 0, now())
"""


def _stamp_reader(path: Path):
    page = mmap.mmap(os.open(path, os.O_RDONLY), 8, prot=mmap.PROT_READ)
    get = struct.Struct("d").unpack_from
    return lambda: get(page, 0)[0]


def _open_as_node(quota: int | None, capacity: int) -> int:
    return capacity if quota is None else quota


def _quota(backend, layout) -> int | None:
    return backend.read(layout.offline_parent, "cpu.quota")


def _wait_open(backend, layout, capacity: int, timeout: float) -> int | None:
    """The offline quota once it is at least half the node again, open as the whole node (None if that
    takes over ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = _open_as_node(_quota(backend, layout), capacity)
        if q >= capacity * 0.5:
            return q
        time.sleep(0.05)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--fast-interval", type=float, default=0.025)
    parser.add_argument("--recover", type=float, default=1.5,
                        help="seconds idle after a step before waiting for the quota to reopen")
    parser.add_argument("--profile", type=Path, help="the agent's QoS profile (default: the built-in one)")
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup").exists():
        raise SystemExit("needs root and a cgroup hierarchy")
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
