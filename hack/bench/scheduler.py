#!/usr/bin/env python3
"""Scheduler throughput on a synthetic cluster; prints one JSON line.

Default: 10,000 nodes; 50,000 pods in gangs of 1-16 across 10 weighted
queues; a tenth of the nodes tainted (with matching tolerating jobs) and a
fifth labelled into pools that some jobs select.  Pods arrive in waves; each
wave is followed by one scheduling cycle of the real scheduler (built-in
configuration: enqueue, allocate, preempt, reclaim, backfill), then cycles
run until nothing changes.

    python hack/bench/scheduler.py [--nodes N] [--pods N] [--waves N] [--seed N] [--profile full] [--cpu]

``--profile full`` schedules with the shipped
``daemonset/config/scheduler-colocation.conf`` (numa-aware, deviceshare, usage,
colocation, forecast and tdm beside the default plugins; a fiftieth of the
nodes in its revocable zone, open at the benchmark's clock) and gives every
node an agent report: two NUMA zones, real usage and batch allocatable, and on
a tenth of the nodes 8 GPUs in two NVLink quads.  A quarter of the pods are
offline (``kubernetes.io/batch-cpu``/``batch-memory``, some declaring
``scoria.io/expected-duration``), a tenth of the online jobs carry a NUMA
policy, and the GPU-pool jobs ask for whole or shared GPUs.  Reports are
refreshed before every cycle, as agents would.

Figures: ``pods_per_second`` = binds / total time spent in cycles
(snapshot, session, actions and close included; building the synthetic
objects is not); ``evictions`` and ``pods_bound_at_end`` say how many of those
binds were later undone by preemption or reclaim; ``p99_cycle_seconds`` over
all cycles (about 50 by default, so it is close to the maximum, also given);
``peak_rss_mib`` of the process.  ``--cpu`` adds ``cpu_pods_per_second``,
``cpu_seconds_in_cycles`` and ``cpu_p99_cycle_seconds``: the same over the
process CPU time of each cycle (on a shared machine wall time counts other
processes' turns).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from proto.model import (  # noqa: E402
    Capacity,
    Colocation,
    Devices,
    Gpu,
    GpuLink,
    GpuTopologyLevel,
    Identity,
    Load,
    NodeReport,
    NumaZone,
)
from scheduler.api.objects import Node, Pod, PodGroup, Queue, Taint, Toleration  # noqa: E402
from scheduler.builtins import register_builtins  # noqa: E402
from scheduler.cluster.cache import ClusterCache  # noqa: E402
from scheduler.cycle import Scheduler, tune_gc  # noqa: E402
from scheduler.framework.config import default_config, load_config  # noqa: E402

GI = 2**30
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def make_nodes(count: int, rng: random.Random, scale: float, full: bool = False) -> list[Node]:
    nodes = []
    for i in range(count):
        cpu = max(1, round(rng.choice((32, 48, 64)) * scale))
        labels = {"kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"zone-{i % 4}"}
        taints: tuple[Taint, ...] = ()
        allocatable = {"cpu": cpu * 1000, "memory": cpu * 4 * GI, "pods": 110}
        if i % GPU_NODE == 0:
            taints = (Taint("dedicated", "gpu", "NoSchedule"),)
            labels["pool"] = "gpu"
            if full:
                allocatable["nvidia.com/gpu"] = 8
        elif i % 5 == 1:
            labels["pool"] = rng.choice(("highmem", "fast-disk"))
        if full and i % 50 == 3:
            labels["volcano.sh/revocable-zone"] = "night"  # the shipped config's zone, open 22:00-06:00
        nodes.append(Node(name=f"node-{i}", labels=labels, taints=taints, allocatable=allocatable))
    return nodes


FULL_CONFIG = ROOT / "daemonset" / "config" / "scheduler-colocation.conf"  # what operators apply
GPU_NODE = 10  # every tenth node has GPUs (and the gpu taint)


def make_report(node: Node, rng: random.Random, at: float) -> NodeReport:
    """An agent's report for ``node``: two zones, usage, batch allocatable, GPUs on GPU nodes."""
    cpus = node.allocatable["cpu"] // 1000
    half = cpus // 2
    zones = [NumaZone(0, list(range(half)), node.allocatable["memory"] // 2, [10, 21]),
             NumaZone(1, list(range(half, cpus)), node.allocatable["memory"] // 2, [21, 10])]
    gpus = []
    if "nvidia.com/gpu" in node.allocatable:
        for i in range(8):
            quad = range(4) if i < 4 else range(4, 8)
            links = [GpuLink(j, 4 if j in quad else 0, GpuTopologyLevel.NODE if j in quad else GpuTopologyLevel.SYSTEM)
                     for j in range(8) if j != i]
            gpus.append(Gpu(i, f"GPU-{node.name}-{i}", "NVIDIA H100", 80 * GI, 0, 0.0, 0.0, i // 4, True, links=links))
    used = cpus * rng.uniform(0.1, 0.6)
    return NodeReport(
        identity=Identity(node.name, "bench", "boot", 1, int(at * 1e9), 1000),
        capacity=Capacity(cpus * 1000, node.allocatable["memory"], zones),
        devices=Devices(gpus),
        load=Load(used, int(node.allocatable["memory"] * rng.uniform(0.1, 0.5))),
        colocation=Colocation(int((cpus * 0.8 - used) * 1000), int(node.allocatable["memory"] * 0.3)))


def make_jobs(pods: int, queues: int, rng: random.Random, full: bool = False) -> list[tuple[PodGroup, list[Pod]]]:
    jobs = []
    made = 0
    j = 0
    while made < pods:
        size = min(rng.randint(1, 16), pods - made)
        queue = f"queue-{rng.randrange(queues)}"
        ns = f"ns-{j % 20}"
        name = f"job-{j}"
        created = EPOCH + timedelta(seconds=j)
        group = PodGroup(namespace=ns, name=name, queue=queue, min_member=size, created=created)
        kind = rng.random()
        selector: dict[str, str] = {}
        tolerations: tuple[Toleration, ...] = ()
        if kind < 0.05:
            selector = {"pool": "gpu"}
            tolerations = (Toleration("dedicated", "Equal", "gpu", "NoSchedule"),)
        elif kind < 0.15:
            selector = {"pool": rng.choice(("highmem", "fast-disk"))}
        cpu = rng.choice((500, 1000, 2000, 4000))
        mem = rng.choice((1, 2, 4, 8)) * GI
        requests: dict[str, int] = {"cpu": cpu, "memory": mem}
        annotations = {"scheduling.k8s.io/group-name": name}
        if full:
            requests, annotations = full_profile(requests, annotations, rng, gpu=kind < 0.05)
        members = [Pod(namespace=ns, name=f"{name}-{k}", uid=f"{ns}/{name}-{k}", requests=dict(requests),
                       annotations=dict(annotations), node_selector=dict(selector),
                       tolerations=tolerations, created=created)
                   for k in range(size)]
        jobs.append((group, members))
        made += size
        j += 1
    return jobs


def full_profile(requests: dict[str, int], annotations: dict[str, str], rng: random.Random,
                 gpu: bool) -> tuple[dict[str, int], dict[str, str]]:
    """Turn a job's pods into offline, NUMA-pinned or GPU pods for ``--profile full``."""
    if gpu:
        if rng.random() < 0.5:
            requests["nvidia.com/gpu"] = rng.choice((1, 2, 4))
        else:
            requests.update({"volcano.sh/vgpu-number": rng.choice((1, 2)),
                             "volcano.sh/vgpu-memory": rng.choice((4000, 10000, 20000)),
                             "volcano.sh/vgpu-cores": rng.choice((10, 25, 50))})
        return requests, annotations
    roll = rng.random()
    if roll < 0.25:  # offline: batch resources only
        requests = {"kubernetes.io/batch-cpu": requests["cpu"], "kubernetes.io/batch-memory": requests["memory"]}
        if rng.random() < 0.3:
            annotations["scoria.io/expected-duration"] = rng.choice(("30m", "2h", "6h"))
        if rng.random() < 0.2:
            annotations["volcano.sh/preemptable"] = "true"
    elif roll < 0.325:
        annotations["volcano.sh/numa-topology-policy"] = rng.choice(("single-numa-node", "best-effort", "restricted"))
    return requests, annotations


def run(args: argparse.Namespace) -> dict:
    tune_gc()  # as python -m scheduler does
    rng = random.Random(args.seed)
    cache = ClusterCache()
    for q in range(args.queues):
        cache.upsert(Queue(name=f"queue-{q}", weight=q + 1))
    full = args.profile == "full"
    nodes = make_nodes(args.nodes, rng, args.node_scale, full)
    for node in nodes:
        cache.upsert(node)
    jobs = make_jobs(args.pods, args.queues, rng, full)
    if args.config:
        config = load_config(args.config)
    else:
        config = load_config(FULL_CONFIG) if full else default_config()
    clock = [EPOCH + timedelta(hours=1)]  # a second passes between waves
    sched = Scheduler(cache, config=config, clock=lambda: clock[0])
    reports = [make_report(node, rng, clock[0].timestamp()) for node in nodes] if full else []
    waves = [jobs[i::args.waves] for i in range(args.waves)]
    cycles: list[float] = []
    cpu: list[float] = []
    bound = evicted = 0
    for wave in waves:
        for group, members in wave:
            cache.upsert(group)
            for pod in members:
                cache.upsert(pod)
        clock[0] += timedelta(seconds=1)
        for report in reports:  # agents report every second; the capacity (and so the inventory) is unchanged
            report.identity.sample_time_ns = int(clock[0].timestamp() * 1e9)
            cache.accept_report(report, clock[0].timestamp(), register=False, capacity_key=report.identity.node_name)
        began = time.process_time()
        result = sched.run_once()
        cpu.append(time.process_time() - began)
        cycles.append(result.seconds)
        bound += result.binds
        evicted += result.evictions
    for _ in range(args.max_settle):
        began = time.process_time()
        result = sched.run_once()
        cpu.append(time.process_time() - began)
        cycles.append(result.seconds)
        bound += result.binds
        evicted += result.evictions
        if not result.changed:
            break
    total = sum(cycles)
    at_end = sum(1 for p in cache.pods.values() if p.node_name and not p.evicted)
    out = {
        "nodes": args.nodes, "pods": sum(len(m) for _, m in jobs), "jobs": len(jobs), "queues": args.queues,
        "pods_scheduled": bound, "evictions": evicted, "pods_bound_at_end": at_end, "pods_pending": result.pending,
        "pods_per_second": round(bound / total, 1) if total else None,
        "p99_cycle_seconds": round(float(np.percentile(cycles, 99)), 4),
        "median_cycle_seconds": round(float(np.median(cycles)), 4),
        "max_cycle_seconds": round(max(cycles), 4),
        "cycles": len(cycles), "seconds_in_cycles": round(total, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "actions": list(config.actions), "seed": args.seed, "node_scale": args.node_scale, "profile": args.profile,
    }
    if args.cpu:  # the same figures in this process's CPU time: steadier than wall time on a shared machine
        out["cpu_pods_per_second"] = round(bound / sum(cpu), 1) if sum(cpu) else None
        out["cpu_seconds_in_cycles"] = round(sum(cpu), 3)
        out["cpu_p99_cycle_seconds"] = round(float(np.percentile(cpu, 99)), 4)
    return out


def main() -> None:
    register_builtins()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--waves", type=int, default=50,
                        help="pods arrive in this many waves (1,000 pods each by default), a cycle after each")
    parser.add_argument("--max-settle", type=int, default=10, help="extra cycles at most after the last wave")
    parser.add_argument("--config", help="scheduler configuration file (default: built in)")
    parser.add_argument("--node-scale", type=float, default=1.0,
                        help="scale node sizes (e.g. 0.15 makes the cluster too small, so many pods stay pending)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=("default", "full"), default="default",
                        help="full: every placement plugin on, agent reports, GPUs, NUMA, offline and shared-GPU pods")
    parser.add_argument("--cpu", action="store_true",
                        help="also report the figures in process CPU time (cpu_pods_per_second, ...)")
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
