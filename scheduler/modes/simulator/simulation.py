"""Run the real scheduler on manifests with a fixed clock and report what it did.

The simulator is the contract later checks use: the same cache, session,
actions and plugins as the live scheduler, fed from YAML, with the clock
fixed at ``--at``; it runs cycles until one changes nothing (or exactly
``--cycles N``) and reports every pod, PodGroup and queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from proto.vocab.placement import DEVICES_ANNOTATION, NUMA_NODES_ANNOTATION, decode_devices, decode_zones
from proto.vocab.quantity import format_quantity
from scheduler.api.loader import Workload
from scheduler.api.manifests import ManifestError
from scheduler.api.nodereport import check_report
from scheduler.api.objects import Pod
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import SchedulerConfig, default_config, load_config
from scheduler.framework.snapshot import DEFAULT_SCHEDULER_NAMES
from scheduler.history.learning import LoadHistory
from scheduler.modes.simulator.controllers import SimulatedControllers, load_with_controllers
from scheduler.modes.table import text_table

log = logging.getLogger(__name__)
MAX_CYCLES = 1000


@dataclass
class Simulation:
    cache: ClusterCache
    pod_order: list[str]
    group_order: list[str]
    cycles: int
    scheduled: int
    seconds: float
    jobs: list[dict] = field(default_factory=list)  # Volcano Jobs' status, when there are any

    def to_dict(self) -> dict:
        cache = self.cache
        pods = []
        for uid in self.pod_order:
            pod = cache.pods.get(uid)
            if pod is None:
                continue  # deleted by a controller (a Job's pod killed or scaled away)
            pods.append({"namespace": pod.namespace, "name": pod.name, "node": pod.node_name or None,
                         "phase": pod.phase, "reason": pod.reason, "evicted": pod.evicted, **placement(pod)})
        groups = []
        for key in self.group_order:
            g = cache.podgroups.get(key)
            if g is None:
                continue
            groups.append({"namespace": g.namespace, "name": g.name, "queue": g.queue, "phase": g.phase,
                           "conditions": [{"type": c.type, "status": c.status, "reason": c.reason,
                                           "message": c.message} for c in g.conditions]})
        queues = [{"name": q.name, "allocated": queue_resources(q.allocated)} for q in cache.queues.values()]
        out = {"pods": pods, "podGroups": groups, "queues": queues,
               "stats": {"cycles": self.cycles, "pods_scheduled": self.scheduled, "seconds": round(self.seconds, 6)}}
        if self.jobs:
            out["jobs"] = self.jobs
        return out


def placement(pod: Pod) -> dict:
    """``numaNodes`` (zone ids) and ``devices`` (uuid, index, resource, memoryMiB, cores) of a placed pod."""
    if not pod.node_name:
        return {"numaNodes": None, "devices": []}
    zones = pod.annotations.get(NUMA_NODES_ANNOTATION)
    grants = pod.annotations.get(DEVICES_ANNOTATION)
    return {"numaNodes": list(decode_zones(zones)) if zones else None,
            "devices": [{"resource": g.resource, "uuid": g.uuid, "index": g.index, "memoryMiB": g.memory_mib,
                         "cores": g.cores} for g in decode_devices(grants)] if grants else []}


def queue_resources(allocated: dict[str, int]) -> dict[str, float | int]:
    """``cpu`` in cores (float), memory in bytes, other resources as counts."""
    out: dict[str, float | int] = {"cpu": allocated.get("cpu", 0) / 1000, "memory": allocated.get("memory", 0)}
    for name, amount in sorted(allocated.items()):
        if name not in out:
            out[name] = amount
    return out


def simulate(paths: Iterable[str | Path], *, config: SchedulerConfig | None = None, at: datetime,
             cycles: int | None = None, scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES) -> Simulation:
    """Load, schedule and return the final state; ManifestError/ConfigError on bad input.

    Pending pods are scheduled when their ``spec.schedulerName`` is unset or one of ``scheduler_names``.
    """
    config = config or default_config()
    names = frozenset(scheduler_names)
    work = load_with_controllers(paths, scheduler_names=names)
    cache = ClusterCache.from_workload(work)
    feed_history(cache, work, at)
    feed_reports(cache, work, at)
    scheduler = Scheduler(cache, config=config, clock=lambda: at, scheduler_names=names)
    controllers = SimulatedControllers.start(cache, work, at, scheduler_names=names,
                                             wait_for_admission="enqueue" in config.actions)
    scheduled, ran = 0, 0
    start = time.perf_counter()
    limit = cycles if cycles is not None else MAX_CYCLES
    while True:
        # the controllers act before each cycle (a Job's PodGroup and pods, dependsOn, scaling) and after the last
        wrote = controllers.reconcile() if controllers is not None else 0
        if ran >= limit:
            if cycles is None:
                log.warning("stopped after %d cycles without settling", MAX_CYCLES)
            break
        result = scheduler.run_once()
        ran += 1
        scheduled += result.binds
        if cycles is None and not result.changed and not wrote:
            break
    pods, groups = [p.uid for p in work.pods], [g.key for g in work.podgroups]
    jobs: list[dict] = []
    if controllers is not None:
        pods += controllers.host.created_pods
        groups += [k for k in controllers.host.created_groups if k not in groups]
        jobs = controllers.job_report()
    return Simulation(cache, pods, groups, ran, scheduled, time.perf_counter() - start, jobs)


def feed_history(cache: ClusterCache, work: Workload, at: datetime) -> None:
    """Learn each NodeLoadHistory document's samples as the live scheduler learns reports: one mechanism.

    The samples go through ``LoadHistory.observe`` in time order (at most one
    a minute per node kept) and every hour that ended before ``at`` is closed,
    so a week of hourly samples is a week of history.  Without such documents
    the cache keeps no history.  A sample after ``at`` is refused.
    """
    docs = work.scoria.get("NodeLoadHistory", ())
    if not docs:
        return
    history = cache.history = LoadHistory()
    now = at.timestamp()
    for name, doc in docs:
        samples = doc.samples()
        late = [t for t, _, _ in samples if t > now]
        if late:
            stamp = datetime.fromtimestamp(late[0], UTC).isoformat()
            raise ManifestError(work.sources[("NodeLoadHistory", name)], f"NodeLoadHistory {name}",
                                f"spec.series: a sample at {stamp} is after the simulated time {at.isoformat()}")
        for t, cpu, memory in samples:
            history.observe(name, t, cpu, memory)
    history.close_finished(now)


def feed_reports(cache: ClusterCache, work: Workload, at: datetime) -> None:
    """Give the cache each NodeReport as if it had just arrived over the protocol.

    A report without ``identity.sampleTimeNs`` was sampled at ``at``; one
    sampled earlier ages like a real one (stale after the cache's number of
    its report intervals).  A report for a node no Node object defines
    registers that node, as ``serve --register-nodes`` does.
    """
    now_ns = int(at.timestamp() * 1e9)
    for name, report in work.scoria.get("NodeReport", ()):
        if not report.identity.sample_time_ns:
            report.identity.sample_time_ns = now_ns
        problem = check_report(report, now_ns=now_ns)
        if problem:
            raise ManifestError(work.sources[("NodeReport", name)], f"NodeReport {name}", problem)
        cache.accept_report(report, report.identity.sample_time_ns / 1e9, register=True,
                            capacity_key=repr(report.capacity))


def load_config_or_default(path: str | None) -> SchedulerConfig:
    return load_config(path) if path else default_config()


def render_table(sim: Simulation) -> str:
    data = sim.to_dict()
    placed = any(p["numaNodes"] is not None or p["devices"] for p in data["pods"])
    rows = [("NAMESPACE", "POD", "NODE", "STATUS") + (("NUMA", "DEVICES") if placed else ()) + ("REASON",)]
    for p in data["pods"]:
        status = "Evicted" if p["evicted"] else ("Bound" if p["node"] else "Pending")
        where: tuple[str, ...] = ()
        if placed:
            zones = ",".join(map(str, p["numaNodes"])) if p["numaNodes"] is not None else "-"
            where = (zones, ",".join(_device_label(d) for d in p["devices"]) or "-")
        rows.append((p["namespace"], p["name"], p["node"] or "-", status, *where, p["reason"] or ""))
    out = [text_table(rows)]
    if data["podGroups"]:
        out.append(text_table([("NAMESPACE", "PODGROUP", "QUEUE", "PHASE")] +
                          [(g["namespace"], g["name"], g["queue"], g["phase"]) for g in data["podGroups"]]))
    if data.get("jobs"):  # vcctl job list's columns
        out.append(text_table([("NAMESPACE", "JOB", "PHASE", "MIN", "PENDING", "RUNNING", "SUCCEEDED", "FAILED",
                                "RETRYCOUNT")] +
                              [(j["namespace"], j["name"], j["phase"], str(j["minAvailable"]), str(j["pending"]),
                                str(j["running"]), str(j["succeeded"]), str(j["failed"]), str(j["retryCount"]))
                               for j in data["jobs"]]))
    queue_rows = [("QUEUE", "CPU", "MEMORY", "OTHER")]
    for q in data["queues"]:
        alloc = dict(q["allocated"])
        cpu, mem = alloc.pop("cpu"), alloc.pop("memory")
        other = ", ".join(f"{k}={format_quantity(k, v)}" for k, v in alloc.items())
        queue_rows.append((q["name"], f"{cpu:g}", format_quantity("memory", mem), other or "-"))
    out.append(text_table(queue_rows))
    s = data["stats"]
    out.append(f"{s['pods_scheduled']} pod(s) scheduled in {s['cycles']} cycle(s), {s['seconds']:.3f}s")
    return "\n\n".join(out)


def _device_label(d: dict) -> str:
    """``gpu4`` for a whole device, ``gpu0:20000Mi/30%`` for a share of one."""
    kind = "gpu" if d["resource"] == "nvidia.com/gpu" else "npu"
    whole = d["cores"] == 100
    return f"{kind}{d['index']}" if whole else f"{kind}{d['index']}:{d['memoryMiB']}Mi/{d['cores']}%"
