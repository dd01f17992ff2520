"""Build an open session from manifests, for plugin and framework unit tests."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.api.loader import node_report_from_doc
from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.framework.config import default_config, parse_config
from scheduler.framework.keeper import take_snapshot
from scheduler.framework.session import Session

AT = datetime(2026, 1, 1, 12, tzinfo=UTC)

TIERS = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
{plugins}
"""


def config_with(*plugins: str, extra: str = ""):
    """A one-tier config with the named plugins (``extra`` is appended verbatim under the tier)."""
    lines = "\n".join(f"  - name: {p}" for p in plugins)
    return parse_config(TIERS.format(plugins=lines) + extra)


def add_doc(cache: ClusterCache, doc: dict, at: datetime = AT) -> None:
    """One manifest into ``cache``, or a NodeReport document (``builders.report``) as sampled at ``at``,
    registering its node."""
    if doc.get("kind") == "NodeReport":
        _, r = node_report_from_doc(doc, "test")
        r.identity.sample_time_ns = int(at.timestamp() * 1e9)
        cache.accept_report(r, at.timestamp(), register=True, capacity_key=repr(r.capacity))
    else:
        cache.upsert(parse_object(doc, "test"))


def cache_of(manifests: list[dict]) -> ClusterCache:
    cache = ClusterCache()
    for doc in manifests:
        cache.upsert(parse_object(doc, "test"))
    return cache


def open_session(manifests: list[dict], config=None, *, at: datetime = AT) -> Session:
    cache = cache_of(manifests)
    ssn = Session(take_snapshot(cache), config or default_config(), now=at, effects=CacheEffects(cache))
    ssn.open()
    return ssn


def task(ssn: Session, key: str):
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.pod.key == key:
                return t
    raise KeyError(key)


def node_index(ssn: Session, name: str) -> int:
    return ssn.nodes.pos[name]
