#!/usr/bin/env python3
"""How fast the agent squeezes offline work when online work wakes up, on this machine's real cgroups.

Under a private cgroup parent (removed afterwards) offline CPU hogs run in an
offline pod, and an online pod holds one busy process that is stopped
(SIGSTOP) — idle.  Each step resumes it (SIGCONT): from that instant the
benchmark polls the offline parent's ``cpu.cfs_quota_us`` every millisecond
until the agent has cut it; then it stops the online process again and waits
for the agent's slow loop to let offline work back in.  Prints one JSON line:

    {"steps": 40, "median_ms": ..., "p99_ms": ..., "max_ms": ..., ...}

    sudo python hack/bench/qos_reaction.py [--steps 40] [--fast-interval 0.025]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

from agent.cgroups.backend import detect_backend  # noqa: E402
from agent.cgroups.tree import remove_group  # noqa: E402
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
    try:
        agent = make_agent(backend, parent, pods, config=AgentConfig("bench", fast_interval=args.fast_interval))
        layout = agent.layout
        for _ in range(os.cpu_count() or 2):
            spawn(backend, layout.pod_path("offline", "BestEffort"), procs)
        online = spawn(backend, layout.pod_path("online", "Burstable"), procs)
        os.kill(online.pid, signal.SIGSTOP)
        loops = threading.Thread(target=agent.run, args=(stop,), daemon=True)
        loops.start()
        capacity = agent.capacity.cpu_millis
        reactions, skipped = [], 0
        time.sleep(3)  # the slow loop measures the quiet node and opens the quota
        for _ in range(args.steps):
            before = _wait_open(backend, layout, capacity, timeout=10.0)
            if before is None:  # the slow loop never let offline work back in: not a step we can time
                skipped += 1
                continue
            os.kill(online.pid, signal.SIGCONT)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 2.0:
                now = _quota(backend, layout)
                if now is not None and now < before - capacity * 0.2:
                    reactions.append(time.perf_counter() - t0)
                    break
                time.sleep(0.001)
            os.kill(online.pid, signal.SIGSTOP)
            time.sleep(args.recover)
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
        remove_group(backend, parent)
    ms = np.array(reactions) * 1000
    return {"steps": len(reactions), "skipped": skipped, "median_ms": round(float(np.median(ms)), 1) if ms.size else None,
            "p99_ms": round(float(np.percentile(ms, 99)), 1) if ms.size else None,
            "max_ms": round(float(ms.max()), 1) if ms.size else None, "fast_interval_ms": args.fast_interval * 1000,
            "capacity_millicores": capacity, "offline_hogs": os.cpu_count(), "cgroup_version": backend.version}


def _quota(backend, layout) -> int | None:
    return backend.read(layout.offline_parent, "cpu.quota")


def _wait_open(backend, layout, capacity: int, timeout: float) -> int | None:
    """The offline quota once it is at least half the node again (None if that takes over ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = _quota(backend, layout)
        if q is not None and q >= capacity * 0.5:
            return q
        time.sleep(0.05)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--fast-interval", type=float, default=0.025)
    parser.add_argument("--recover", type=float, default=1.5,
                        help="seconds idle after a step before waiting for the quota to reopen")
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup").exists():
        raise SystemExit("needs root and a cgroup hierarchy")
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
