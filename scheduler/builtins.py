"""The actions and plugins Scoria ships, registered by whoever starts the scheduler.

The framework's registries start empty and the framework imports no action or plugin: an entry
point (``python -m scheduler``, the benchmarks, the test suite) calls :func:`register_builtins`
once, and could register its own beside them.  Registering again is harmless.
"""

from __future__ import annotations

from scheduler.actions.allocate import Allocate
from scheduler.actions.backfill import Backfill
from scheduler.actions.enqueue import Enqueue
from scheduler.actions.preempt import Preempt
from scheduler.actions.reclaim import Reclaim
from scheduler.actions.shuffle import Shuffle
from scheduler.framework.plugin import Action, Plugin, register_action, register_plugin
from scheduler.plugins.binpack import Binpack
from scheduler.plugins.capacity import Capacity
from scheduler.plugins.cdp import CooldownProtection
from scheduler.plugins.colocation import Colocation
from scheduler.plugins.conformance import Conformance
from scheduler.plugins.deviceshare import DeviceShare
from scheduler.plugins.drf import DRF
from scheduler.plugins.extender import Extender
from scheduler.plugins.forecast import Forecast
from scheduler.plugins.gang import Gang
from scheduler.plugins.nodegroup import NodeGroup
from scheduler.plugins.nodeorder import NodeOrder
from scheduler.plugins.numaaware import NumaAware
from scheduler.plugins.overcommit import Overcommit
from scheduler.plugins.predicates import Predicates
from scheduler.plugins.priority import Priority
from scheduler.plugins.proportion import Proportion
from scheduler.plugins.resourcefit import ResourceStrategyFit
from scheduler.plugins.sla import SLA
from scheduler.plugins.tasktopology import TaskTopology
from scheduler.plugins.tdm import Tdm
from scheduler.plugins.usage import Usage

BUILTIN_ACTIONS: tuple[type[Action], ...] = (Enqueue, Allocate, Preempt, Reclaim, Backfill, Shuffle)
BUILTIN_PLUGINS: tuple[type[Plugin], ...] = (
    Priority, Gang, Conformance, Overcommit, DRF, Predicates, Proportion, Capacity, NodeOrder, Binpack,
    SLA, NumaAware, DeviceShare, Usage, Colocation, Tdm, Forecast, Extender,
    TaskTopology, NodeGroup, ResourceStrategyFit, CooldownProtection,
)


def register_builtins() -> None:
    """Put the shipped actions and plugins in the framework's registries."""
    for action in BUILTIN_ACTIONS:
        register_action(action)
    for plugin in BUILTIN_PLUGINS:
        register_plugin(plugin)
