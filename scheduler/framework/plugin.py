"""Plugins, actions and the registries that name them.

A plugin is a small class in its own module under ``scheduler/plugins``.  It
names the hooks it implements in ``hooks``; the session calls only those,
and only where the config's Volcano-style ``enable*`` flag for the hook is
not false.  Hook signatures (all optional):

=================  ==========================================  ================================
hook               signature                                   combined across plugins as
=================  ==========================================  ================================
job_order          (a, b) -> int                               first non-zero, tier by tier
task_order         (a, b) -> int                               first non-zero
queue_order        (a, b) -> int                               first non-zero
job_valid          (job) -> str | None (refusal reason)        first refusal
job_ready          (job) -> bool                               all must agree
job_pipelined      (job) -> Vote                               Volcano's vote per tier
job_starving       (job) -> bool                               all must agree
job_enqueueable    (job) -> Vote                               Volcano's vote per tier
job_enqueued       (job) -> None                               event
predicate          (task, avail) -> bool mask over nodes       AND (and the session's own resource
                                                               fit, whatever plugins are configured)
predicate_reasons  (task, avail, among) -> Counter             explains the predicate's refusals
node_order         (task, nodes: index array | None) -> scores sum (None: all nodes; a node's
                   (None: no opinion on this task)              score may depend on that node only;
                                                               optional ``score_key(task)`` lets
                                                               the session cache scores per shape)
preemptable        (preemptor, candidates) -> list | None      intersect within a tier; the first
reclaimable        (reclaimer, candidates) -> list | None        tier with victims decides (None
                                                                 abstains; none: next tier)
evictable          (task) -> bool: could it be a victim at all   some tier with the preemptable/
                   (a cheap necessary condition of the hooks      reclaimable hook has none refusing:
                   above, for the vectorised prefilter)           lets actions skip nodes with no victims
victim_key         (preemptor) -> hashable: what the plugin's     combined per hook, like evictable;
                   victim answer reads of the preemptor           keys the "no room" memo
overused           (queue) -> str | None (reason)              any
allocatable        (queue, task) -> str | None (reason)        first refusal
preemptive         (queue, task) -> bool                       all must agree (default: not overused)
victim_tasks       (session) -> [(task, reason)]               union (the shuffle action evicts them)
victim_queue_order (a, b, preemptor queue) -> int: <0 when     first non-zero; else the reverse of
                   a's tasks are evicted before b's             queue order (Volcano's VictimQueueOrderFn)
on_allocate        (task) -> None                              event (task placed or pipelined)
on_deallocate      (task) -> None                              event (placement undone or evicted)
=================  ==========================================  ================================
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from scheduler.framework.args import Arg, Args, acts_on, parse_args

if TYPE_CHECKING:
    import numpy as np

    from scheduler.framework.session import Session

# hook -> the Volcano flag that turns it off (None: always on)
HOOK_FLAGS: dict[str, str | None] = {
    "job_order": "enableJobOrder", "task_order": "enableTaskOrder", "queue_order": "enableQueueOrder",
    "job_valid": None, "job_ready": "enableJobReady", "job_pipelined": "enableJobPipelined",
    "job_starving": "enableJobStarving", "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued", "predicate": "enablePredicate", "predicate_reasons": "enablePredicate",
    "node_order": "enableNodeOrder", "preemptable": "enablePreemptable", "reclaimable": "enableReclaimable",
    "overused": "enabledOverused", "allocatable": "enabledAllocatable", "preemptive": "enablePreemptive",
    "evictable": None, "victim_key": None, "on_allocate": None, "on_deallocate": None,
    "victim_tasks": "enabledVictim", "victim_queue_order": None,
}
# Every option of Volcano's PluginOption (pkg/scheduler/conf/scheduler_conf.go; YAML is case-sensitive there), and
# enableNamespaceOrder, which older Volcano releases read.  Those with a hook above turn it off; enableHierarchy and
# enableNamespaceOrder are read by the plugins that support them (check_flags refuses them elsewhere where it
# matters); the rest name Volcano hooks Scoria does not have (HOOKLESS_FLAGS): accepted, and warned about on a
# plugin Scoria runs (a placeholder plugin is warned about as a whole).
HOOKLESS_FLAGS: dict[str, str] = {
    "enableBestNode": "bestNode", "enableTargetJob": "targetJob", "enableReservedNodes": "reservedNodes",
    "enabledClusterOrder": "clusterOrder", "enabledHyperNodeOrder": "hyperNodeOrder",
    "enabledSubJobReady": "subJobReady", "enabledSubJobPipelined": "subJobPipelined",
    "enabledSubJobOrder": "subJobOrder", "enabledHyperNodeGradient": "hyperNodeGradient",
    # Volcano's e2e helpers write this spelling (test/e2e/util/configmap.go); Volcano's scheduler ignores it
    "EnabledClusterOrder": "clusterOrder",
}
KNOWN_FLAGS = frozenset(f for f in HOOK_FLAGS.values() if f) | {"enableHierarchy", "enableNamespaceOrder"} \
    | frozenset(HOOKLESS_FLAGS)

# -- what Volcano's configuration may say --------------------------------------------------------------------
# Every argument key Volcano reads, per plugin (pkg/scheduler/plugins/*/), and keys its user guides still show
# from older releases, each with why Scoria does not act on it ("": not implemented).  A key ending in "." is a
# prefix.  Keys a Scoria plugin declares as an Arg are implemented and take precedence; the rest are accepted,
# warned about and counted (scheduler.framework.config); a key in neither is refused with a suggestion.
_GPU_MODES = "Scoria shares GPUs through volcano.sh/vgpu-* (deviceshare.VGPUEnable)"
_DRA = "dynamic resource allocation is not implemented"
_NODEORDER_SCORES = "Scoria's nodeorder does not implement this score"
VOLCANO_PLUGIN_ARGUMENTS: dict[str, dict[str, str]] = {
    "binpack": dict.fromkeys(("binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources",
                              "binpack.resources."), ""),
    "capacity": {"ancestorReclaimLevel": "", "capacity.DynamicResourceAllocationEnable": _DRA,
                 "capacity.DRAConsumableCapacityEnable": _DRA},
    "cdp": {},
    "conformance": {},
    "deviceshare": {
        "deviceshare.GPUSharingEnable": _GPU_MODES, "deviceshare.GPUNumberEnable": _GPU_MODES,
        "deviceshare.NodeLockEnable": "", "deviceshare.VGPUEnable": "",
        "deviceshare.AscendMindClusterVNPUEnable": "Ascend NPUs are given whole",
        "deviceshare.AscendHAMiVNPUEnable": "Ascend NPUs are given whole",
        "deviceshare.SchedulePolicy": "", "deviceshare.ScheduleWeight": "", "deviceshare.GPUExclusiveRules": "",
        "deviceshare.KnownGeometriesCMName": "no vNPU templates",
        "deviceshare.KnownGeometriesCMNamespace": "no vNPU templates",
    },
    "drf": {},
    "extender": dict.fromkeys(("extender.urlPrefix", "extender.httpTimeout", "extender.onSessionOpenVerb",
                               "extender.onSessionCloseVerb", "extender.predicateVerb", "extender.prioritizeVerb",
                               "extender.preemptableVerb", "extender.reclaimableVerb", "extender.queueOverusedVerb",
                               "extender.jobEnqueueableVerb", "extender.jobEnqueuedVerb", "extender.jobReadyVerb",
                               "extender.allocateFuncVerb", "extender.deallocateFuncVerb", "extender.ignorable",
                               "extender.managedResources"), ""),
    "gang": {},
    "network-topology-aware": dict.fromkeys((
        "weight", "hypernode.binpack.cpu", "hypernode.binpack.memory", "hypernode.binpack.resources",
        "hypernode.binpack.resources.", "hypernode.binpack.normal-pod.enable", "hypernode.binpack.normal-pod.fading",
        "hypernode.gradient.evict.max-hypernodes"), ""),
    "nodegroup": {"strict": "", "enablePreferredOrder": ""},
    "nodeorder": {
        **dict.fromkeys(("nodeaffinity.weight", "leastrequested.weight", "balancedresource.weight",
                         "mostrequested.weight", "tainttoleration.weight"), ""),
        **dict.fromkeys(("podaffinity.weight", "imagelocality.weight", "podtopologyspread.weight",
                         "selectorspread.weight"), _NODEORDER_SCORES),  # selectorspread: older releases
    },
    "numa-aware": {"weight": ""},
    "overcommit": {"overcommit-factor": ""},
    "pdb": {},
    "predicates": {
        **{f"predicate.{name}Enable": "" for name in (
            "NodeAffinity", "NodePorts", "TaintToleration", "PodAffinity", "NodeVolumeLimits", "VolumeZone",
            "PodTopologySpread", "VolumeBinding", "Cache")},
        "predicate.DynamicResourceAllocationEnable": _DRA,
        **dict.fromkeys(("volumebinding.bindTimeoutSeconds", "volumebinding.shape", "volumebinding.weight"),
                        "Scoria does not bind volumes"),
        "dynamicresources.filterTimeoutSeconds": _DRA,
        # older releases: GPU sharing (read as deviceshare's, see scheduler.framework.config) and proportional
        # resources were predicates' then
        "predicate.GPUSharingEnable": "", "predicate.GPUNumberEnable": "",
        "predicate.ProportionalEnable": "", "predicate.resources": "", "predicate.resources.": "",
    },
    "priority": {},
    "proportion": {},
    "rescheduling": {"interval": "", "metricsPeriod": "", "strategies": "",
                     # shown in Volcano's rescheduling design, read by no release
                     "queueSelector": "", "labelSelector": ""},
    "resource-strategy-fit": dict.fromkeys(("resourceStrategyFitWeight", "resources", "proportional", "sra"), ""),
    "resourcequota": {},
    "sla": {"sla-waiting-time": ""},
    "task-topology": {"task-topology.weight": ""},
    "tdm": {"tdm.revocable-zone.": "", "tdm.evict.period": ""},
    "usage": {"usage.weight": "", "cpu.weight": "", "memory.weight": "", "thresholds": "",
              "estimator": "Scoria estimates pods placed since the last report with estimatedScalingFactors"},
}
# Volcano plugins Scoria does not have and will not: a configuration naming one loads, and the plugin is a
# placeholder that does nothing, named in a warning.
PLACEHOLDER_PLUGINS: dict[str, str] = {
    "network-topology-aware": "Scoria does not schedule by network topology (HyperNodes)",
    "pdb": "Scoria does not consult PodDisruptionBudgets when it chooses victims",
    "rescheduling": "Scoria does not reschedule running pods by node utilisation",
    "resourcequota": "Scoria does not check namespace ResourceQuotas at admission",
}
# The argument keys Volcano's actions read (pkg/scheduler/actions/*/: configurations[].arguments), as above.
_CACHE = {"predicateErrorCacheEnable": ""}
VOLCANO_ACTION_ARGUMENTS: dict[str, dict[str, str]] = {
    "enqueue": {"overcommit-factor": "older Volcano releases read it; use the overcommit plugin's"},
    "allocate": _CACHE, "backfill": _CACHE, "reclaim": _CACHE,
    "preempt": {**_CACHE, **dict.fromkeys(("enableTopologyAwarePreemption", "topologyAwarePreemptWorkerNum",
                                          "minCandidateNodesPercentage", "minCandidateNodesAbsolute",
                                          "maxCandidateNodesAbsolute"), "")},
    "shuffle": {},
    "gangpreempt": {"maxDomains": "", "allowWholeBundle": ""},
    "gangreclaim": {"maxDomains": "", "allowWholeBundle": ""},
}
# Volcano actions Scoria does not run: refused in ``actions`` (an action that silently does nothing would leave
# work undone), accepted with a warning in ``configurations``.
MISSING_ACTIONS: dict[str, str] = {
    "gangpreempt": "Volcano's gang-aware preemption by hyper-node domain is not implemented; use preempt, whose "
                   "victims keep their jobs at their minimum",
    "gangreclaim": "Volcano's gang-aware reclaim by hyper-node domain is not implemented; use reclaim, whose "
                   "victims keep their jobs at their minimum",
}
# configurations[] entries that are not actions: (why Scoria does not read it, the keys Volcano reads there).
VOLCANO_CONFIGURATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "init-params": ("Volcano's Ascend MindCluster vNPU parameters; Scoria gives Ascend NPUs whole",
                    ("presetVirtualDevice", "useClusterInfoManager", "self-maintain-available-card",
                     "grace-over-time")),
}
# The top-level ``metrics`` block (SchedulerConfiguration.MetricsConfiguration; pkg/scheduler/metrics/source).
VOLCANO_METRICS_KEYS: dict[str, str] = dict.fromkeys((
    "type", "address", "interval", "tls.insecureSkipVerify", "elasticsearch.index", "elasticsearch.username",
    "elasticsearch.password", "elasticsearch.hostnameFieldName"),
    "Scoria reads node load from its agents' reports, not from a metrics server")


class VoteKind(IntEnum):
    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


class Vote(NamedTuple):
    kind: VoteKind
    reason: str = ""


PERMIT = Vote(VoteKind.PERMIT)
ABSTAIN = Vote(VoteKind.ABSTAIN)


def reject(reason: str) -> Vote:
    return Vote(VoteKind.REJECT, reason)


class Plugin:
    """Base class: subclasses set ``name``, ``hooks`` and ``arguments``.

    A plugin that counts resources of its own (NUMA zones, devices) sets
    ``predicate_modes``: its ``predicate`` then takes ``mode`` (``now``,
    ``future``, ``reach``; see ``Session.feasible``).
    """

    name: ClassVar[str] = ""
    hooks: ClassVar[tuple[str, ...]] = ()
    arguments: ClassVar[dict[str, Arg]] = {}
    predicate_modes: ClassVar[bool] = False

    def __init__(self, args: Args, flags: dict[str, bool] | None = None):
        self.args = args
        self.flags = flags or {}

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        """Typed arguments; keys Volcano reads that the plugin does not implement are listed as unimplemented."""
        return parse_args(cls.arguments, raw, VOLCANO_PLUGIN_ARGUMENTS.get(cls.name))

    @classmethod
    def implements(cls, key: str) -> bool:
        """Whether the argument ``key`` takes effect here (a plugin that reads more in ``parse`` says so too)."""
        return acts_on(cls.arguments, key)

    @classmethod
    def check_flags(cls, flags: dict[str, bool]) -> None:
        """Refuse (ValueError) a flag combination the plugin cannot honour."""

    def enabled(self, hook: str) -> bool:
        flag = HOOK_FLAGS[hook]
        return flag is None or self.flags.get(flag, True)

    def adjust_nodes(self, ssn: Session) -> None:
        """Change what nodes offer (``NodeTable.set_capacity``) before any plugin opens and totals are taken."""

    def open(self, ssn: Session) -> None:
        """Prepare per-session state (shares, attributes)."""

    def close(self, ssn: Session) -> None:
        """Write what the plugin concluded (conditions, reasons)."""

    def queue_deserved(self, queue: str) -> np.ndarray | None:
        """What the queue deserves this session, where the plugin shares the cluster between queues (proportion,
        capacity); None otherwise.  Shown to people (``get queues``, the web view), never decided on."""
        return None


class Action:
    """Base class of the actions (enqueue, allocate, preempt, reclaim, backfill)."""

    name: ClassVar[str] = ""
    arguments: ClassVar[dict[str, Arg]] = {}
    #: True for an action that acts on running pods as time passes (shuffle: a tdm window closing):
    #: the loop then runs a cycle now and then even when nothing is pending.
    periodic: ClassVar[bool] = False

    def __init__(self, args: Args):
        self.args = args

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        """Typed arguments; keys Volcano reads that the action does not implement are listed as unimplemented."""
        return parse_args(cls.arguments, raw, VOLCANO_ACTION_ARGUMENTS.get(cls.name))

    @classmethod
    def implements(cls, key: str) -> bool:
        """Whether the argument ``key`` takes effect here (a action that reads more in ``parse`` says so too)."""
        return acts_on(cls.arguments, key)

    def execute(self, ssn: Session) -> None:
        raise NotImplementedError


PLUGINS: dict[str, type[Plugin]] = {}
ACTIONS: dict[str, type[Action]] = {}


def register_plugin(cls: type[Plugin]) -> type[Plugin]:
    """Add a plugin under its name; names and hooks are checked.  The same class again is a no-op."""
    if PLUGINS.get(cls.name) is cls:
        return cls
    if not cls.name or cls.name in PLUGINS:
        raise ValueError(f"plugin name {cls.name!r} is empty or already registered")
    for hook in cls.hooks:
        if hook not in HOOK_FLAGS:
            raise ValueError(f"plugin {cls.name}: unknown hook {hook!r}")
        if not callable(getattr(cls, hook, None)):
            raise ValueError(f"plugin {cls.name}: names hook {hook!r} but does not define it")
    PLUGINS[cls.name] = cls
    return cls


def register_action(cls: type[Action]) -> type[Action]:
    """Add an action under its name.  The same class again is a no-op."""
    if ACTIONS.get(cls.name) is cls:
        return cls
    if not cls.name or cls.name in ACTIONS:
        raise ValueError(f"action name {cls.name!r} is empty or already registered")
    ACTIONS[cls.name] = cls
    return cls


def require_registered() -> None:
    """Refuse to read a configuration before anything is registered: that is a missing
    ``scheduler.builtins.register_builtins()`` at the entry point, not a bad configuration."""
    if not ACTIONS or not PLUGINS:
        raise RuntimeError("no actions or plugins registered: the entry point must call "
                           "scheduler.builtins.register_builtins() (or register its own) first")
