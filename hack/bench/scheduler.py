#!/usr/bin/env python3
"""Scheduler throughput on a synthetic cluster; prints one JSON line.

Default: 10,000 nodes; 50,000 pods in gangs of 1-16 across 10 weighted
queues; a tenth of the nodes tainted (with matching tolerating jobs) and a
fifth labelled into pools that some jobs select.  Pods arrive in waves; each
wave is followed by one scheduling cycle of the real scheduler (built-in
configuration: enqueue, allocate, preempt, reclaim, backfill), then cycles
run until nothing changes.

    python hack/bench/scheduler.py [--nodes N] [--pods N] [--waves N] [--seed N]

Figures: ``pods_per_second`` = binds / total time spent in cycles
(snapshot, session, actions and close included; building the synthetic
objects is not); ``evictions`` and ``pods_bound_at_end`` say how many of those
binds were later undone by preemption or reclaim; ``p99_cycle_seconds`` over
all cycles (about 50 by default, so it is close to the maximum, also given);
``peak_rss_mib`` of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

from scheduler.api.objects import Node, Pod, PodGroup, Queue, Taint, Toleration  # noqa: E402
from scheduler.cache import ClusterCache  # noqa: E402
from scheduler.framework.config import default_config, load_config  # noqa: E402
from scheduler.scheduler import Scheduler  # noqa: E402

GI = 2**30
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_nodes(count: int, rng: random.Random, scale: float) -> list[Node]:
    nodes = []
    for i in range(count):
        cpu = max(1, round(rng.choice((32, 48, 64)) * scale))
        labels = {"kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"zone-{i % 4}"}
        taints: tuple[Taint, ...] = ()
        if i % 10 == 0:
            taints = (Taint("dedicated", "gpu", "NoSchedule"),)
            labels["pool"] = "gpu"
        elif i % 5 == 1:
            labels["pool"] = rng.choice(("highmem", "fast-disk"))
        nodes.append(Node(name=f"node-{i}", labels=labels, taints=taints,
                          allocatable={"cpu": cpu * 1000, "memory": cpu * 4 * GI, "pods": 110}))
    return nodes


def make_jobs(pods: int, queues: int, rng: random.Random) -> list[tuple[PodGroup, list[Pod]]]:
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
        members = [Pod(namespace=ns, name=f"{name}-{k}", uid=f"{ns}/{name}-{k}", requests={"cpu": cpu, "memory": mem},
                       annotations={"scheduling.k8s.io/group-name": name}, node_selector=dict(selector),
                       tolerations=tolerations, created=created)
                   for k in range(size)]
        jobs.append((group, members))
        made += size
        j += 1
    return jobs


def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    cache = ClusterCache()
    for q in range(args.queues):
        cache.upsert(Queue(name=f"queue-{q}", weight=q + 1))
    for node in make_nodes(args.nodes, rng, args.node_scale):
        cache.upsert(node)
    jobs = make_jobs(args.pods, args.queues, rng)
    config = load_config(args.config) if args.config else default_config()
    sched = Scheduler(cache, config=config, clock=lambda: EPOCH + timedelta(hours=1))
    waves = [jobs[i::args.waves] for i in range(args.waves)]
    cycles: list[float] = []
    bound = evicted = 0
    for wave in waves:
        for group, members in wave:
            cache.upsert(group)
            for pod in members:
                cache.upsert(pod)
        result = sched.run_once()
        cycles.append(result.seconds)
        bound += result.binds
        evicted += result.evictions
    for _ in range(args.max_settle):
        result = sched.run_once()
        cycles.append(result.seconds)
        bound += result.binds
        evicted += result.evictions
        if not result.changed:
            break
    total = sum(cycles)
    at_end = sum(1 for p in cache.pods.values() if p.node_name and not p.evicted)
    return {
        "nodes": args.nodes, "pods": sum(len(m) for _, m in jobs), "jobs": len(jobs), "queues": args.queues,
        "pods_scheduled": bound, "evictions": evicted, "pods_bound_at_end": at_end, "pods_pending": result.pending,
        "pods_per_second": round(bound / total, 1) if total else None,
        "p99_cycle_seconds": round(float(np.percentile(cycles, 99)), 4),
        "median_cycle_seconds": round(float(np.median(cycles)), 4),
        "max_cycle_seconds": round(max(cycles), 4),
        "cycles": len(cycles), "seconds_in_cycles": round(total, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "actions": list(config.actions), "seed": args.seed, "node_scale": args.node_scale,
    }


def main() -> None:
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
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
