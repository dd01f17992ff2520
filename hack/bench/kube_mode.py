"""Kubernetes mode at scale against the fake API server (hack/lib/fake_apiserver.py)::

    python hack/bench/kube_mode.py [--nodes 1000] [--pods 10000] [--cycles 3]

A cluster of ``--nodes`` nodes (32 CPUs each) and ``--pods`` pods: 90% running (bound by someone), the
rest pending in gangs of 10 (every gang fits) plus 50 pods too big for any node (pending for ever).  Measured:

* ``first_cycle_s``: from start (informers listing and syncing every kind) to the end of the first
  scheduling cycle (``sync_s`` of it: until every kind is listed); ``binds_drained_s``: until that
  cycle's binds are all answered;
* ``informer_mb``: memory the informers and the cache hold after a sync (tracemalloc, a second pass
  with a fresh cache; ``rss_delta_mb``: the process's RSS growth over the first pass, for comparison);
* ``relist_s``: after every watch gets 410 (``expire_watches``), until every kind has listed again
  (``relist_pods_s``: the pods informer alone);
* ``writes_per_steady_cycle``: non-GET requests per cycle once nothing changes (goal 0), over ``--cycles``.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hack.lib.fake_apiserver import FakeApiServer, node  # noqa: E402
from scheduler.cluster.cache import ClusterCache  # noqa: E402
from scheduler.cycle import Scheduler  # noqa: E402
from scheduler.framework.config import parse_config  # noqa: E402
from scheduler.modes.kubernetes import mode  # noqa: E402
from scheduler.modes.kubernetes.source import KubeSource  # noqa: E402

PG = "scheduling.volcano.sh/v1beta1"
CONFIG = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _pod(name: str, cpu: str, node_name: str | None = None, group: str | None = None) -> dict:
    spec: dict = {"schedulerName": "scoria", "containers": [{"name": "main", "image": "busybox", "resources": {
        "requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    meta: dict = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    status: dict = {"phase": "Pending"}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def seed(api: FakeApiServer, nodes: int, pods: int) -> int:
    """The cluster; returns how many pods the first cycle should bind."""
    api.put({"apiVersion": PG, "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}})
    for i in range(nodes):
        api.put(node(f"n{i:05d}", allocatable={"cpu": "32", "memory": "256Gi", "pods": "110"}))
    running = pods * 9 // 10
    for i in range(running):
        api.put(_pod(f"run-{i:06d}", "1", node_name=f"n{i % nodes:05d}"))
    gangs = (pods - running - 50) // 10
    for g in range(gangs):
        api.put({"apiVersion": PG, "kind": "PodGroup", "metadata": {"name": f"g{g:04d}", "namespace": "default"},
                 "spec": {"minMember": 10, "queue": "q"}})
        for m in range(10):
            api.put(_pod(f"g{g:04d}-{m}", "1", group=f"g{g:04d}"))
    for i in range(50):
        api.put(_pod(f"huge-{i:02d}", "64"))
    return gangs * 10


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _writes(api: FakeApiServer) -> int:
    with api._cond:
        return sum(1 for c in api.calls if c.method != "GET")


def run(nodes: int, pods: int, cycles: int, qps: float, burst: int) -> dict:
    out: dict = {"nodes": nodes, "pods": pods, "qps": qps, "burst": burst}
    with FakeApiServer(history=max(1000, pods)) as api:
        to_bind = seed(api, nodes, pods)
        gc.collect()
        rss0 = _rss_mb()
        cache, stop = ClusterCache(), threading.Event()
        began = time.perf_counter()
        kube = mode.start(cache, api.client(), stop, resync=3600, qps=qps, burst=burst, sync_timeout=600)
        out["sync_s"] = round(time.perf_counter() - began, 3)
        scheduler = Scheduler(cache, effects=kube.effects, config=parse_config(CONFIG, "bench"),
                              clock=lambda: datetime.now(UTC))
        first = scheduler.run_once()
        out["first_cycle_s"] = round(time.perf_counter() - began, 3)
        out["first_cycle_binds"] = first.binds
        kube.effects.drain(600)
        out["binds_drained_s"] = round(time.perf_counter() - began, 3)
        out["expected_binds"] = to_bind
        gc.collect()
        out["rss_delta_mb"] = round(_rss_mb() - rss0, 1)
        # settle: the watch brings the binds back, the statuses go out
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            scheduler.run_once()
            kube.effects.drain(60)
            if kube.effects.backlog() == 0 and sum(1 for p in cache.pods.values() if p.node_name) >= pods - 50:
                break
        scheduler.run_once()  # the cycle that sees the settled world may still write once (statuses)
        kube.effects.drain(60)
        steady = []
        for _ in range(cycles):
            before = _writes(api)
            t = time.perf_counter()
            scheduler.run_once()
            kube.effects.drain(60)
            steady.append((_writes(api) - before, time.perf_counter() - t))
        out["writes_per_steady_cycle"] = [w for w, _ in steady]
        out["steady_cycle_s"] = round(sorted(s for _, s in steady)[len(steady) // 2], 3)
        # relist after 410
        lists = {inf.kind: inf.lists for inf in kube.source.informers}
        # a write no informer watches first: an informer that saw the latest write would resume from the
        # compacted revision itself, which is no 410, and the loop below would wait for ever
        api.put_namespace("bench-relist")
        t = time.perf_counter()
        api.expire_watches()
        pods_done = None
        deadline = time.monotonic() + 600
        while not all(inf.lists > lists[inf.kind] for inf in kube.source.informers):
            if time.monotonic() > deadline:
                late = [i.kind for i in kube.source.informers if i.lists == lists[i.kind]]
                raise RuntimeError(f"not listed again within 600 s after every watch got 410: {late}")
            pods_inf = next(i for i in kube.source.informers if i.kind == "pods")
            if pods_done is None and pods_inf.lists > lists["pods"]:
                pods_done = time.perf_counter() - t
            time.sleep(0.005)
        out["relist_s"] = round(time.perf_counter() - t, 3)
        out["relist_pods_s"] = round(pods_done if pods_done is not None else out["relist_s"], 3)
        stop.set()
        kube.close()
        # informer memory: a fresh cache and informers, traced
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        cache2 = ClusterCache()
        source = KubeSource(cache2, api.client(), resync=3600)
        source.start()
        source.wait_synced(600)
        gc.collect()
        out["informer_mb"] = round((tracemalloc.get_traced_memory()[0] - base) / 2**20, 1)
        tracemalloc.stop()
        source.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--cycles", type=int, default=3, help="steady-state cycles measured")
    parser.add_argument("--qps", type=float, default=1000.0, help="the client rate limit (--kube-qps)")
    parser.add_argument("--burst", type=int, default=1000)
    args = parser.parse_args(argv)
    from scheduler.builtins import register_builtins
    register_builtins()
    if args.nodes < 1 or args.pods < 100:
        parser.error("need --nodes >= 1 and --pods >= 100")
    print(json.dumps(run(args.nodes, args.pods, args.cycles, args.qps, args.burst)))


if __name__ == "__main__":
    main()
