"""shuffle: evict the running tasks plugins want gone, with no preemptor in sight (Volcano's name).

The plugins say who through the ``victim_tasks`` hook (tdm: preemptable
pods on revocable nodes whose window has closed), each with its reason; the
evictions go through one statement, committed at once.  A task that is no
longer running (already being released, or placed only in this session) is
left alone.
"""

from __future__ import annotations

import logging

from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.snapshot import TaskStatus
from scheduler.framework.statement import Statement

log = logging.getLogger(__name__)


class Shuffle(Action):
    name = "shuffle"
    periodic = True  # a tdm window closes as time passes, with nothing pending

    def execute(self, ssn: Session) -> None:
        stmt = Statement(ssn)
        for task, reason in ssn.victim_tasks():
            if task.status != TaskStatus.RUNNING:
                log.debug("shuffle: skipping %s (%s, not running)", task.pod.key, task.status.name)
                continue
            stmt.evict(task, reason)
            log.info("shuffle: evicting %s: %s", task.pod.key, reason)
        stmt.commit()
