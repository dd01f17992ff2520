#!/usr/bin/env python3
"""What the node agent costs a node: CPU (fraction of one core) and resident memory.

The real agent process (``python -m agent run``) runs its fast (25 ms) and slow
(1 s) loops against a fixture cgroup tree of ``--pods`` pods laid out as the
kubelet does (cgroup v1 or v2, cgroupfs or systemd driver, two containers
each, some of them offline), reads this machine's real /proc and /sys, asks
for devices as in production, and streams a report every second over gRPC to
a real ``python -m scheduler serve``.  This process plays the kernel: every
second it advances every pod's and container's CPU and memory counters (so
the agent sees moving usage and rewrites quotas as it would on a busy node);
its QoS parents' counters advance continuously (every 4 ms), as the
kernel's do, so the fast loop sees offline work running (``fast_ticks_per_s`` shows
the pace it kept: about 39 at 25 ms); that work is not counted.  After a warm-up, the agent's CPU time and RSS are
sampled over the window.  Prints one JSON line:

    {"pods": 110, "cpu_percent_of_core": ..., "rss_mib": ..., "reports": ..., ...}

    python hack/bench/agent_overhead.py [--pods 110] [--seconds 60] [--cgroup-version 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from hack.lib.cgroup_fixtures import (  # noqa: E402
    FakePod,
    container_dir,
    make_groups,
    make_tree,
    pod_dir,
    qos_dir,
    set_usage,
)
from hack.lib.processes import ServeFailed, cpu_seconds, free_port, scrape, start_serve, wait_port  # noqa: E402

GI = 2**30


class FakeKernel:
    """Advances the fixture's usage counters as a busy node's kernel would."""

    def __init__(self, root: Path, version: int, driver: str, pods: list[FakePod], seed: int = 7,
                 offline_idle: bool = False, fixed: str = ""):
        self.offline_idle = offline_idle
        self.root, self.version, self.driver = root, version, driver
        self.rng = random.Random(seed)
        self.parents = {"root": qos_dir(driver, "Guaranteed"), "offline": qos_dir(driver, "BestEffort")}
        if fixed:  # a layout of our own (--cgroup-parent): pods placed by level, an online parent of their own
            self.parents = {"root": fixed, "offline": f"{fixed}/offline", "online": f"{fixed}/online"}
        self.groups = []  # (cgroup, containers' cgroups, offline?)
        for pod in pods:
            offline = pod.qos_class == "BestEffort"
            path = fixed_pod_dir(fixed, pod) if fixed else pod_dir(version, driver, pod)
            self.groups.append((path, [f"{path}/{container_dir(driver, 'containerd', c)}" for c in pod.containers],
                                offline))
        self.lock = threading.Lock()
        self.rates = (0.0, 0.0)  # ns per second: all pods, offline pods
        self.parent_cpu = {"root": 0, "offline": 0}
        self.cpu = {g: 0 for g, _, _ in self.groups}
        self.cpu.update({c: 0 for _, cs, _ in self.groups for c in cs})

    def tick(self, seconds: float) -> None:
        """A second of pod work: every pod's and container's counters, and the rates the parents move at."""
        total = offline = 0
        for pod, containers, is_offline in self.groups:
            used = 0
            for c in containers:
                ns = 0 if is_offline and self.offline_idle else int(self.rng.uniform(0.0, 0.02) * seconds * 1e9)
                self.cpu[c] += ns
                used += ns
                set_usage(self.root, self.version, c, self.cpu[c], self.rng.randrange(32, 256) * 2**20)
            self.cpu[pod] += used
            set_usage(self.root, self.version, pod, self.cpu[pod], self.rng.randrange(64, 512) * 2**20)
            total += used
            offline += used if is_offline else 0
        with self.lock:
            self.rates = (total / max(seconds, 1e-9), offline / max(seconds, 1e-9))

    def tick_parents(self, seconds: float) -> None:
        """The QoS parents' counters move continuously (the fast loop reads them 40 times a second)."""
        with self.lock:
            total, offline = self.rates
        self.parent_cpu["root"] += int(total * seconds)
        self.parent_cpu["offline"] += int(offline * seconds)
        set_usage(self.root, self.version, self.parents["root"], self.parent_cpu["root"], 40 * GI)
        set_usage(self.root, self.version, self.parents["offline"], self.parent_cpu["offline"], 10 * GI)
        if "online" in self.parents:
            self.parent_cpu["online"] = self.parent_cpu.get("online", 0) + int((total - offline) * seconds)
            set_usage(self.root, self.version, self.parents["online"], self.parent_cpu["online"], 30 * GI)

    def run_parents(self, stop: threading.Event, every: float = 0.004) -> None:
        """Every ``every`` seconds (the kernel's counters move continuously: a step coarser than the fast loop's
        window leaves windows in which offline work seems idle, and the loop relaxes its pace)."""
        last = time.monotonic()
        while not stop.wait(every):
            now = time.monotonic()
            self.tick_parents(now - last)
            last = now


FIXED_PARENT = "scoria/node"


def fixed_pod_dir(parent: str, pod: FakePod) -> str:
    """Where a layout of our own puts a pod: by its level (BestEffort here: offline)."""
    return f"{parent}/{'offline' if pod.qos_class == 'BestEffort' else 'online'}/pod{pod.uid}"


def _pods(n: int, containers: int, offline_fraction: float) -> list[FakePod]:
    rng = random.Random(11)
    pods = []
    for i in range(n):
        qos = "BestEffort" if i < int(n * offline_fraction) else rng.choice(("Burstable", "Guaranteed"))
        ids = tuple(f"{rng.getrandbits(256):064x}" for _ in range(containers))
        pods.append(FakePod(f"{i:08x}-0000-4000-8000-{rng.getrandbits(48):012x}", qos, ids))
    return pods


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="agent-overhead-"))
    driver = "systemd" if args.cgroup_version == 2 else args.driver
    pods = _pods(args.pods, args.containers, args.offline_fraction)
    fixed = FIXED_PARENT if args.fixed_layout else ""
    if fixed:
        make_groups(tmp / "cg", version=args.cgroup_version,
                    groups=[f"{fixed_pod_dir(fixed, p)}/{container_dir(driver, 'containerd', c)}"
                            for p in pods for c in p.containers])
    else:
        make_tree(tmp / "cg", version=args.cgroup_version, driver=driver, pods=pods)
    kernel = FakeKernel(tmp / "cg", args.cgroup_version, driver, pods, offline_idle=args.offline_idle, fixed=fixed)
    kernel.tick(0)
    kernel.tick_parents(0)
    stop = threading.Event()
    threading.Thread(target=kernel.run_parents, args=(stop,), daemon=True).start()
    port_file, sched_metrics, agent_metrics = tmp / "port", free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(tmp / "scheduler.log", "w") as log:  # the child has its own descriptor: ours can close now
        sched = start_serve("--insecure", "--listen", "127.0.0.1:0", "--register-nodes", "--metrics-port",
                            str(sched_metrics), port_file=port_file, stderr=log, env=env)
    agent = None
    try:
        try:
            port = wait_port(port_file, sched, 30)
        except ServeFailed as exc:
            raise SystemExit(f"scheduler did not start ({exc}): {(tmp / 'scheduler.log').read_text()}") from None
        cmd = [sys.executable, "-m", "agent", "run", "--node-name", "bench-node", "--cgroup-root", str(tmp / "cg"),
               "--pods-from", "cgroups", "--metrics-port", str(agent_metrics), "--interval", str(args.interval),
               "--fast-interval", str(args.fast_interval)]
        if not args.no_stream:
            cmd += ["--scheduler", f"127.0.0.1:{port}", "--insecure"]
        if args.no_devices:
            cmd.append("--no-devices")
        if fixed:
            cmd += ["--cgroup-parent", fixed]
        with open(tmp / "agent.log", "w") as log:
            agent = subprocess.Popen(cmd, cwd=ROOT, stderr=log, env=env)
        proc = psutil.Process(agent.pid)
        start = time.monotonic()
        while time.monotonic() - start < args.warmup:
            kernel.tick(1.0)
            time.sleep(1.0)
        if agent.poll() is not None:
            raise SystemExit(f"agent exited: {(tmp / 'agent.log').read_text()[-2000:]}")
        before = scrape(f"http://127.0.0.1:{sched_metrics}/metrics")
        first = scrape(f"http://127.0.0.1:{agent_metrics}/metrics")
        loops0 = first.get("scoria_agent_loops_cpu_seconds_total", 0)
        loops0_fast = first.get('scoria_agent_loop_seconds_count{loop="fast"}', 0)
        cpu0, t0 = cpu_seconds(proc), time.monotonic()
        rss = []
        while time.monotonic() - t0 < args.seconds:
            kernel.tick(1.0)
            rss.append(proc.memory_info().rss)
            time.sleep(1.0)
        cpu1, t1 = cpu_seconds(proc), time.monotonic()
        after = scrape(f"http://127.0.0.1:{sched_metrics}/metrics")
        agent_side = scrape(f"http://127.0.0.1:{agent_metrics}/metrics")
        quota_written = _offline_quota(tmp / "cg", args.cgroup_version, kernel.parents["offline"])
    finally:
        stop.set()
        for p in (agent, sched):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
        log_tail = (tmp / "agent.log").read_text().splitlines()[-3:] if (tmp / "agent.log").exists() else []
        shutil.rmtree(tmp, ignore_errors=True)
    wall = t1 - t0
    reports = after.get("scoria_scheduler_reports_total", 0) - before.get("scoria_scheduler_reports_total", 0)
    return {
        "pods": args.pods, "containers_per_pod": args.containers, "offline_idle": args.offline_idle,
        "layout": "fixed (--cgroup-parent)" if args.fixed_layout else "kubelet",
        "cgroup_version": args.cgroup_version, "driver": driver, "interval_s": args.interval,
        "fast_interval_s": args.fast_interval, "window_s": round(wall, 1),
        "cpu_percent_of_core": round(100 * (cpu1 - cpu0) / wall, 3),
        "loops_cpu_percent_of_core": round(
            100 * (agent_side.get("scoria_agent_loops_cpu_seconds_total", 0) - loops0) / wall, 3),
        "rss_mib": round(rss[-1] / 2**20, 1), "rss_max_mib": round(max(rss) / 2**20, 1),
        "reports_accepted": int(reports),
        "fast_loop_mean_ms": _mean_ms(agent_side, "fast"), "slow_loop_mean_ms": _mean_ms(agent_side, "slow"),
        "fast_ticks_per_s": round((agent_side.get('scoria_agent_loop_seconds_count{loop="fast"}', 0) -
                                   loops0_fast) / wall, 1),
        "cgroup_writes": agent_side.get("scoria_agent_cgroup_writes_total"),
        "cgroup_write_errors": sum(v for k, v in agent_side.items() if k.startswith("scoria_agent_cgroup_write_errors")),
        "offline_quota_written": quota_written,
        "agent_log_tail": log_tail if args.verbose else None,
    }


def _mean_ms(samples: dict[str, float], loop: str) -> float | None:
    total = samples.get(f'scoria_agent_loop_seconds_sum{{loop="{loop}"}}')
    count = samples.get(f'scoria_agent_loop_seconds_count{{loop="{loop}"}}')
    return round(1000 * total / count, 3) if total is not None and count else None


def _offline_quota(root: Path, version: int, parent: str) -> bool:
    if version == 1:
        return (root / "cpu" / parent / "cpu.cfs_quota_us").read_text().strip() != "-1"
    return not (root / parent / "cpu.max").read_text().startswith("max")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--containers", type=int, default=2, help="containers per pod")
    parser.add_argument("--offline-fraction", type=float, default=0.3)
    parser.add_argument("--cgroup-version", type=int, choices=(1, 2), default=1)
    parser.add_argument("--driver", choices=("cgroupfs", "systemd"), default="cgroupfs", help="v1 only; v2 is systemd")
    parser.add_argument("--interval", type=float, default=1.0, help="report interval (the slow loop)")
    parser.add_argument("--fast-interval", type=float, default=0.025)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window")
    parser.add_argument("--no-devices", action="store_true", help="do not ask NVML/npu-smi (default: as production)")
    parser.add_argument("--offline-idle", action="store_true",
                        help="offline pods use no CPU (the fast loop relaxes to its idle pace)")
    parser.add_argument("--no-stream", action="store_true", help="no scheduler connection (what streaming costs)")
    parser.add_argument("--fixed-layout", action="store_true",
                        help="pods under a cgroup parent of our own (--cgroup-parent), placed by level: the agent "
                             "knows which are offline and enforces (cpu.idle, the quota, its signals), which it "
                             "cannot for the kubelet's layout with --pods-from cgroups")
    parser.add_argument("--verbose", action="store_true")
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
