"""colocation: offline pods fit against what the node's agent offers them now, online pods against allocatable.

Offline (BE) pods request ``kubernetes.io/batch-cpu`` (millicores) and
``kubernetes.io/batch-memory`` (bytes).  The capacity for those is the batch
allocatable the node's agent last reported — what online work leaves idle,
recomputed every second — rather than a figure patched into the Node object
long ago; the scheduler subtracts the batch requests of the pods it already
placed there.  A node whose report is stale (or missing) offers no batch
resources: silence is not idleness.  A node whose agent says it is evicting
offline work, or whose agent has gone silent, takes no new offline pod,
whatever it requests.  Online pods are untouched: they fit against the node's
allocatable as usual (predicates).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_REPORTED = {BATCH_CPU: "batch_cpu", BATCH_MEMORY: "batch_memory"}  # resource -> NodeTable row of reports


class Colocation(Plugin):
    name = "colocation"
    hooks = ("predicate", "predicate_reasons")

    def adjust_nodes(self, ssn: Session) -> None:
        nodes = ssn.nodes
        for resource, attr in _REPORTED.items():
            col = ssn.index.column.get(resource)
            if col is not None:  # NaN where the report is stale or missing: fits nothing, explained here
                nodes.set_capacity(col, getattr(nodes, attr))

    def open(self, ssn: Session) -> None:
        nodes = ssn.nodes
        self.stale = nodes.stale
        reported = np.array([name in ssn.snapshot.telemetry for name in nodes.names], dtype=bool)
        self.silent = nodes.stale & reported  # an agent that reported once and stopped
        self.evicting = nodes.evicting
        self.batch_cols = [ssn.index.column[r] for r in _REPORTED if r in ssn.index.column]

    def _needs_batch(self, task: TaskInfo) -> bool:
        return any(task.req[c] > 0 for c in self.batch_cols)

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        mask = np.ones(self.stale.size, dtype=bool)
        if task.facts.offline:
            mask &= ~(self.evicting | self.silent)
        if self._needs_batch(task):
            mask &= ~self.stale
        return mask

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        if task.facts.offline:
            count_reason(reasons, "node(s) were evicting offline work", among & self.evicting)
            count_reason(reasons, "node(s) had no fresh report of batch resources", among & self.silent)
            among = among & ~(self.evicting | self.silent)
        if self._needs_batch(task):
            count_reason(reasons, "node(s) had no fresh report of batch resources", among & self.stale)
        return reasons
