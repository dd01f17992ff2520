"""Running actions on one session built from manifests, and reading what they did."""

from __future__ import annotations

import copy
from datetime import datetime

from scheduler.framework.config import SchedulerConfig, parse_config
from scheduler.framework.session import Session
from scheduler.framework.snapshot import TaskStatus
from tests.support.sessions import AT, open_session

# Volcano's preempt and reclaim unit tests put these plugins in one tier (preempt_test.go TestPreempt,
# reclaim_test.go TestReclaim); priority, gang and conformance always judge victims together here.
ONE_TIER = """
actions: "{actions}"
tiers:
- plugins: [{{name: conformance}}, {{name: gang}}, {{name: priority}}, {{name: proportion}}{extra}]
"""


def one_tier(actions: str, extra: str = "", configurations: str = "") -> SchedulerConfig:
    return parse_config(ONE_TIER.format(actions=actions, extra=extra) + configurations)


def with_(doc: dict, *, labels: dict | None = None, annotations: dict | None = None, **spec) -> dict:
    """A copy of a manifest with labels or annotations added and spec fields set."""
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    if labels:
        meta.setdefault("labels", {}).update(labels)
    if annotations:
        meta.setdefault("annotations", {}).update(annotations)
    doc["spec"].update(spec)
    return doc


def run(objs: list[dict], config: SchedulerConfig, *, at: datetime = AT) -> Session:
    """Open a session and run the configured actions once, in order (as Volcano's action tests do)."""
    ssn = open_session(objs, config, at=at)
    for action in config.build_actions():
        action.execute(ssn)
    return ssn


def evicted(ssn: Session) -> set[str]:
    return {task.pod.name for task, _ in ssn.evictions}


def bound(ssn: Session) -> dict[str, str]:
    """Pods bound in this session, by name, with their node."""
    return {t.pod.name: ssn.nodes.names[t.node] for job in ssn.jobs.values() for t in job.tasks.values()
            if t.uid in ssn.bound}


def pipelined(ssn: Session) -> dict[str, str]:
    """Pods left pipelined (room being made for them) at the end of the session, with their node."""
    return {t.pod.name: ssn.nodes.names[t.node] for job in ssn.jobs.values() for t in job.tasks.values()
            if t.status == TaskStatus.PIPELINED}
