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
on_allocate        (task) -> None                              event (task placed or pipelined)
on_deallocate      (task) -> None                              event (placement undone or evicted)
=================  ==========================================  ================================
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from scheduler.framework.args import Arg, Args, parse_args

if TYPE_CHECKING:
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
    "victim_tasks": "enabledVictim",
}
# Every flag Volcano's PluginOption accepts; those without a hook here are accepted and checked as booleans.
KNOWN_FLAGS = frozenset(f for f in HOOK_FLAGS.values() if f) | {
    "enableNamespaceOrder", "enableHierarchy", "enableBestNode", "enableTargetJob", "enableReservedNodes",
    "EnabledClusterOrder", "enabledClusterOrder",
}


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
        return parse_args(cls.arguments, raw)

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
        return parse_args(cls.arguments, raw)

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
