"""What a run mode gives ``python -m scheduler serve``: one small interface instead of flags tested
all over the wiring.

:class:`Mode` itself is the plain mode — the cache is the whole cluster (nodes come from the agents'
reports when ``--register-nodes`` is given) and decisions land in it.  ``serve --kubernetes`` uses
:class:`scheduler.modes.kubernetes.mode.KubernetesMode` and ``serve --embedded``
:class:`scheduler.modes.embedded.mode.EmbeddedMode`; the CLI picks one in one place and the rest of
``serve`` only talks to this interface.

The order ``serve`` follows: construct the mode (checks its settings; nothing runs yet), ask it for
a load-history store, :meth:`Mode.start` it on the cache (it returns the effects the scheduler
writes through), :meth:`Mode.attach` the scheduler once it exists, schedule while
:meth:`Mode.leading`, answer ``/readyz`` with :meth:`Mode.ready`, and :meth:`Mode.close` after
the scheduling loop has stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.cluster.cache import ClusterCache

if TYPE_CHECKING:
    from scheduler.cluster.effects import Effects
    from scheduler.cycle import Scheduler
    from scheduler.history import HistoryStore
    from scheduler.metrics import SchedulerMetrics

#: a node's report in, the pod actions (START/STOP/EVICT) for that node out
PodActions = Callable[[str, Any], list]


class Mode:
    """The plain mode: the scheduler's cache is the cluster."""

    name = "plain"
    #: whether the scheduling loop runs a cycle as soon as new work arrived (Scheduler.run's ``early``) rather
    #: than only every interval: where work comes in batches (an apply, a controllers' commit)
    early_cycles = True

    def __init__(self, *, register_nodes: bool = False) -> None:
        #: whether a report from an unknown node creates it (no API server or store that lists nodes)
        self.register_nodes = register_nodes

    def history_store(self) -> HistoryStore | None:
        """Where the load history lives when ``--state-dir`` does not say (None: in memory only)."""
        return None

    def start(self, cache: ClusterCache, stop: threading.Event, metrics: SchedulerMetrics) -> Effects | None:
        """Fill the cache from the mode's source and start its threads; the effects the scheduler
        writes through (None: straight into the cache)."""
        return None

    def attach(self, scheduler: Scheduler) -> None:
        """The scheduler exists: start what serves requests against it (embedded: the control API)."""

    def pod_actions(self) -> PodActions | None:
        """What runs where, told to each node in answer to its report (None: the node decides itself)."""
        return None

    def leading(self) -> bool:
        """Whether this replica schedules now (and accepts reports)."""
        return True

    def ready(self) -> bool:
        """What ``/readyz`` answers."""
        return True

    def close(self, scheduler: Scheduler) -> None:
        """Shut down after the scheduling loop has stopped: finish writes, release what is held."""
