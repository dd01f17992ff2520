"""Volcano Jobs at scale: ``--jobs`` Jobs of ``--pods`` pods each submitted at once, until every pod is bound::

    python hack/bench/jobs.py [--jobs 1000] [--pods 8] [--nodes 100] [--interval 1.0] [--mode embedded|kubernetes|all]

For each mode, the real controllers and the real scheduler run as ``serve`` runs them (the scheduling loop
every ``--interval`` seconds, serve's default 1 s; the controllers on their own thread), in this process:

* ``embedded``: the embedded store (SQLite in a temporary folder), the Jobs applied in one request
  (:meth:`Embedded.apply`, as ``apply -f`` sends them), the controllers over the store
  (:mod:`scheduler.modes.embedded.controllers`); ``--nodes`` nodes registered as their agents' reports
  would (no agent runs the pods: binding is what is measured);
* ``kubernetes``: hack/lib/fake_apiserver.py with ``--nodes`` Nodes, the Jobs created through the API
  (one POST each, as fast as the client sends them), Kubernetes mode's informers, effects and controllers
  (:mod:`scheduler.modes.kubernetes.controllers`).

Measured per mode: from a Job's submission (the end of the apply; in Kubernetes mode the moment its POST
was answered) to the bind of the last of its pods (the scheduler's bind decision), ``p50_s``/``p99_s``/
``max_s`` over the Jobs; ``controller_cpu_s``: CPU time of the controllers' thread (``/proc`` per thread)
from submission to the last bind; ``reconciles`` where the mode counts them; ``all_bound_s``.  Goal: p99 ≤ 2 s.
Prints one JSON line per mode.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hack.lib.stats import nearest_rank  # noqa: E402
from scheduler.cluster.cache import ClusterCache  # noqa: E402
from scheduler.cycle import Scheduler  # noqa: E402
from scheduler.framework.config import default_config  # noqa: E402

MODES = ("embedded", "kubernetes")
JOB_NAME = "volcano.sh/job-name"  # the annotation every pod of a Job carries


def job_manifest(i: int, pods: int) -> dict:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                 "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": f"job-{i:05d}", "namespace": "default"},
            "spec": {"schedulerName": "scoria", "minAvailable": pods,
                     "tasks": [{"name": "worker", "replicas": pods, "template": {"spec": {"containers": [container]}}}]}}


def thread_cpu(name: str) -> float:
    """CPU seconds (user + system) of this process's thread called ``name`` (0 when there is none)."""
    tick = os.sysconf("SC_CLK_TCK")
    for t in threading.enumerate():
        if t.name == name and t.native_id is not None:
            try:
                fields = Path(f"/proc/self/task/{t.native_id}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return 0.0
            return (int(fields[11]) + int(fields[12])) / tick
    return 0.0


class Binds:
    """The time of each bind decision, by Job (wrapping the scheduler's effects)."""

    def __init__(self, effects) -> None:
        self.at: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()
        bind = effects.bind

        def timed(pod, node, annotations):
            ok = bind(pod, node, annotations)
            job = pod.annotations.get(JOB_NAME)
            if job is not None:
                with self._lock:
                    self.at[job].append(time.perf_counter())
            return ok
        effects.bind = timed

    def done(self, jobs: int, pods: int) -> bool:
        with self._lock:
            return len(self.at) >= jobs and all(len(v) >= pods for v in self.at.values())


def figures(mode: str, args: argparse.Namespace, submitted: dict[str, float], binds: Binds, began: float,
            cpu: float, extra: dict) -> dict:
    latencies = sorted(max(binds.at[job]) - t for job, t in submitted.items() if len(binds.at.get(job, ())) >= args.pods)
    out = {"mode": mode, "jobs": args.jobs, "pods_per_job": args.pods, "nodes": args.nodes, "interval_s": args.interval,
           "bound_jobs": len(latencies)}
    if latencies:
        out.update(p50_s=round(nearest_rank(latencies, 0.5), 3), p99_s=round(nearest_rank(latencies, 0.99), 3),
                   max_s=round(latencies[-1], 3),
                   all_bound_s=round(max(max(v) for v in binds.at.values()) - began, 3))
    out["controller_cpu_s"] = round(cpu, 3)
    out.update(extra)
    return out


def wait_bound(binds: Binds, args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.timeout
    while not binds.done(args.jobs, args.pods):
        if time.monotonic() > deadline:
            raise SystemExit(f"not every pod was bound within {args.timeout:g} s")
        time.sleep(0.005)


def run_embedded(args: argparse.Namespace) -> dict:
    from scheduler.api.objects import Node
    from scheduler.modes.embedded.mode import Embedded, EmbeddedMode
    from scheduler.modes.embedded.store import Store

    with tempfile.TemporaryDirectory(prefix="scoria-jobs-bench-") as folder:
        cache = ClusterCache()
        embedded = Embedded(cache, Store(Path(folder) / "store.sqlite"))
        embedded.load()
        for n in range(args.nodes):
            cache.upsert(Node(f"n{n:04d}", {"cpu": 64_000, "memory": 256 * 2**30, "pods": 110},
                              labels={"kubernetes.io/hostname": f"n{n:04d}"}))
        scheduler = Scheduler(cache, effects=embedded.effects, config=default_config(), clock=lambda: datetime.now(UTC))
        binds = Binds(embedded.effects)
        embedded.controllers.configure(scheduler_names=frozenset({"scoria"}), wait_for_admission=True)
        embedded.controllers.key_pair = lambda: ("", "")
        stop = threading.Event()
        embedded.controllers.start(stop)
        loop = threading.Thread(target=scheduler.run, name="schedule", daemon=True,
                                kwargs={"interval": args.interval, "stop": stop, "early": EmbeddedMode.early_cycles})
        loop.start()
        docs = [(job_manifest(i, args.pods), "jobs.yaml") for i in range(args.jobs)]
        cpu0 = thread_cpu("controllers")
        began = time.perf_counter()
        embedded.apply(docs)
        t = time.perf_counter()
        submitted = {f"job-{i:05d}": t for i in range(args.jobs)}
        wait_bound(binds, args)
        cpu = thread_cpu("controllers") - cpu0
        stop.set()
        loop.join(10)
        embedded.controllers.join(10)
        extra = {"apply_s": round(t - began, 3), "reconciles": embedded.controllers.reconciles}
        embedded.store.close()
    return figures("embedded", args, submitted, binds, began, cpu, extra)


def run_kubernetes(args: argparse.Namespace) -> dict:
    from hack.lib.fake_apiserver import FakeApiServer, node
    from scheduler.modes.kubernetes import mode
    from scheduler.modes.kubernetes.mode import KubernetesMode

    with FakeApiServer(history=max(10_000, args.jobs * (args.pods + 4))) as api:
        for n in range(args.nodes):
            api.put(node(f"n{n:04d}", allocatable={"cpu": "64", "memory": "256Gi", "pods": "110"}))
        cache, stop = ClusterCache(), threading.Event()
        kube = mode.start(cache, api.client(), stop, resync=3600, qps=args.qps, burst=args.qps, sync_timeout=120)
        scheduler = Scheduler(cache, effects=kube.effects, config=default_config(), clock=lambda: datetime.now(UTC))
        binds = Binds(kube.effects)
        kube.start_controllers(wait_for_admission=lambda: True)
        loop = threading.Thread(target=scheduler.run, name="schedule", daemon=True,
                                kwargs={"interval": args.interval, "stop": stop, "active": kube.leading,
                                        "early": KubernetesMode.early_cycles})
        loop.start()
        client = api.client()
        from kubernetes.client import CustomObjectsApi
        jobs = CustomObjectsApi(client)
        cpu0 = thread_cpu("controllers")
        began = time.perf_counter()
        submitted: dict[str, float] = {}
        for i in range(args.jobs):
            jobs.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "default", "jobs",
                                                 job_manifest(i, args.pods))
            submitted[f"job-{i:05d}"] = time.perf_counter()
        created_s = time.perf_counter() - began
        wait_bound(binds, args)
        cpu = thread_cpu("controllers") - cpu0
        stop.set()
        loop.join(10)
        kube.close()
    return figures("kubernetes", args, submitted, binds, began, cpu, {"create_s": round(created_s, 3)})


RUNNERS: dict[str, Callable[[argparse.Namespace], dict]] = {"embedded": run_embedded, "kubernetes": run_kubernetes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=8, help="pods per Job (one task)")
    parser.add_argument("--nodes", type=int, default=100, help="nodes of 64 CPUs and 256 GiB")
    parser.add_argument("--interval", type=float, default=1.0, help="the scheduling interval (serve's default 1 s)")
    parser.add_argument("--qps", type=int, default=1000, help="Kubernetes mode: the client's rate limit")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.pods < 1 or args.nodes < 1 or args.interval <= 0:
        parser.error("--jobs, --pods and --nodes must be at least 1, --interval more than 0")
    if args.jobs * args.pods * 0.5 > args.nodes * 64:
        parser.error(f"{args.jobs * args.pods} pods of 500m do not fit on {args.nodes} nodes of 64 CPUs")
    from scheduler.builtins import register_builtins
    from scheduler.cycle import tune_gc
    register_builtins()
    tune_gc(50_000, 20, 100)  # as serve does
    import logging
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in (MODES if args.mode == "all" else (args.mode,)):
        print(json.dumps(RUNNERS[name](args)), flush=True)


if __name__ == "__main__":
    main()
