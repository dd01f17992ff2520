"""The scheduler's Prometheus metrics, in one place, recorded through small methods.

Each :class:`SchedulerMetrics` owns its registry, so tests (and several
schedulers in one process) never share counters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_CYCLE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Setting(Protocol):
    """A configuration setting accepted without effect (``scheduler.framework.config.Unimplemented``)."""

    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def key(self) -> str: ...


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.cycle_seconds = Histogram("scoria_scheduler_cycle_seconds", "Duration of a scheduling cycle",
                                       buckets=_CYCLE_BUCKETS, registry=r)
        self.action_seconds = Histogram("scoria_scheduler_action_seconds", "Duration of one action in a cycle",
                                        ["action"], buckets=_CYCLE_BUCKETS, registry=r)
        self.binds = Counter("scoria_scheduler_binds_total", "Pods bound to nodes", registry=r)
        self.evictions = Counter("scoria_scheduler_evictions_total", "Pods evicted by the scheduler", registry=r)
        self.pending = Gauge("scoria_scheduler_pending_pods", "Pods left pending after the last cycle", registry=r)
        self.config_reloads = Counter("scoria_scheduler_config_reloads_total",
                                      "Configuration reload attempts by result (success, refused)", ["result"],
                                      registry=r)
        self.config_unimplemented_settings = Gauge(
            "scoria_scheduler_config_unimplemented",
            "Settings of the configuration in force that Volcano knows and Scoria accepts without acting on, by kind "
            "(plugin, action, configuration, metrics), name (the plugin, action or configuration entry) and key "
            "(the argument or option; empty for a placeholder plugin or a whole entry)",
            ["kind", "name", "key"], registry=r)
        self.reports = Counter("scoria_scheduler_reports_total", "Node reports accepted into the cache", registry=r)
        self.reports_refused = Counter("scoria_scheduler_reports_refused_total",
                                       "Node reports refused, by reason (content, order, identity, unknown-node, undecodable)",
                                       ["reason"], registry=r)
        self.entries_ignored = Counter(
            "scoria_scheduler_report_entries_ignored_total",
            "Per-pod entries of accepted reports ignored because they name a pod bound to another node, by field",
            ["field"], registry=r)
        self.report_latency = Histogram("scoria_scheduler_report_to_cache_seconds",
                                        "From the agent's sample time to the report being in the cache",
                                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=r)
        self.node_evictions = Counter("scoria_scheduler_node_evictions_total",
                                      "Evictions agents performed on their nodes, as reported", registry=r)
        self.agents_connected = Gauge("scoria_scheduler_agents_connected", "Agent streams open", registry=r)
        self.stale_nodes = Gauge("scoria_scheduler_stale_nodes",
                                 "Nodes whose reports stopped for longer than the staleness limit", registry=r)
        # Kubernetes mode
        self.kube_writes = Counter("scoria_scheduler_kube_writes_total",
                                   "Writes to the API server by kind (bind, eviction, status, event) and result "
                                   "(ok, refused, failed)", ["kind", "result"], registry=r)
        self.kube_lists = Counter("scoria_scheduler_kube_lists_total",
                                  "Full lists of a kind (the first, after a 410, on resync)", ["kind"], registry=r)
        self.kube_refused = Counter("scoria_scheduler_kube_objects_refused_total",
                                    "Objects from the API server that could not be used (the last good one kept)",
                                    ["kind"], registry=r)
        self.leader = Gauge("scoria_scheduler_leader", "1 while this replica holds the Lease and schedules",
                            registry=r)
        # the Volcano Job and PodGroup controllers (Kubernetes mode: the leader's)
        self.controller_reconciles = Counter("scoria_scheduler_controller_reconciles_total",
                                             "Reconciles of the Job and PodGroup controllers by result (quiet: nothing "
                                             "written, wrote, failed: some write refused and retried)", ["result"],
                                             registry=r)
        self.controller_seconds = Histogram("scoria_scheduler_controller_reconcile_seconds",
                                            "Duration of one reconcile of the controllers", registry=r)

    def kube_write(self, kind: str, result: str) -> None:
        self.kube_writes.labels(kind, result).inc()

    def controller_reconcile(self, *, seconds: float, writes: int, failures: int) -> None:
        self.controller_seconds.observe(seconds)
        self.controller_reconciles.labels("failed" if failures else "wrote" if writes else "quiet").inc()

    def cycle(self, *, seconds: float, binds: int, evictions: int, pending: int) -> None:
        self.cycle_seconds.observe(seconds)
        self.binds.inc(binds)
        self.evictions.inc(evictions)
        self.pending.set(pending)

    def action(self, name: str, seconds: float) -> None:
        self.action_seconds.labels(name).observe(seconds)

    def config_reload(self, result: str) -> None:
        self.config_reloads.labels(result).inc()

    def config_unimplemented(self, settings: Iterable[Setting]) -> None:
        """The configuration now in force: its settings without effect replace the last one's."""
        self.config_unimplemented_settings.clear()
        for s in settings:
            self.config_unimplemented_settings.labels(s.kind, s.name, s.key).inc()

    def report_accepted(self, latency: float, evictions: int = 0) -> None:
        self.reports.inc()
        self.report_latency.observe(latency)
        if evictions:
            self.node_evictions.inc(evictions)

    def report_refused(self, reason: str) -> None:
        self.reports_refused.labels(reason).inc()

    def report_entries_ignored(self, field: str, count: int) -> None:
        self.entries_ignored.labels(field).inc(count)
