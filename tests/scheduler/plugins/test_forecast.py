"""The forecast plugin: offline pods with an expected duration kept off nodes whose predicted headroom ends first."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from proto.codec import report_from_json
from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.framework.config import ConfigError
from scheduler.framework.keeper import take_snapshot
from scheduler.framework.session import Session
from scheduler.history.learning import LoadHistory
from scheduler.plugins.forecast import STALE
from tests.support.builders import pod, report
from tests.support.sessions import config_with, task

HOUR, DAY, WEEK = 3600, 86400, 7 * 86400
MONDAY = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
NOW = MONDAY + 12 * HOUR  # Monday 12:00 UTC
NAN = math.nan
DURATION = "scoria.io/expected-duration"


def node_report(name: str, *, batch_cpu: int = 72_000, age: float = 0.0) -> dict:
    """100 cores and 256Gi; 25 cores and 64Gi in use, 5 cores and 8Gi of it by an offline pod: 20 cores online."""
    stamp = datetime.fromtimestamp(NOW - age, UTC).isoformat()
    return report(name, zones=[50, 50], zoneMemory="128Gi", cpuUsed=25, memoryUsed="64Gi", batchCpu=batch_cpu,
                  batchMemory="96Gi", sampleTime=stamp, pods=[{"uid": f"{name}-be", "qos": "BE", "cpu": 5,
                                                                 "memory": "8Gi"}])


def learn(history: LoadHistory, node: str, cpu, memory=lambda day, hour: NAN, weeks: int = 3) -> LoadHistory:
    """Hourly samples for ``weeks`` weeks before Monday 00:00: ``cpu(day, hour)`` percent (day 0 a Monday)."""
    for day in range(7 * weeks):
        for hour in range(24):
            t = MONDAY - weeks * WEEK + day * DAY + hour * HOUR
            history.observe(node, t, cpu(day % 7, hour), memory(day % 7, hour))
    history.close_finished(NOW)
    return history


def peak_at(peak_hour: int, peak: float = 90.0, base: float = 20.0):
    return lambda day, hour: peak if hour == peak_hour else base


def offline(name: str, duration: str | None = "2h", cpu: int = 8000, memory: str | None = None, **kw) -> dict:
    extra = {"kubernetes.io/batch-cpu": cpu}
    if memory:
        extra["kubernetes.io/batch-memory"] = memory
    return pod(name, cpu=None, memory=None, extra=extra,
               annotations={DURATION: duration} if duration else None, **kw)


def session(reports: list[dict], pods: list[dict], history: LoadHistory | None,
            plugins: tuple[str, ...] = ("predicates", "colocation", "forecast"), extra: str = "") -> Session:
    cache = ClusterCache()
    for doc in reports:
        r = report_from_json(doc)
        cache.accept_report(r, r.identity.sample_time_ns / 1e9, register=True, capacity_key=repr(r.capacity))
    for doc in pods:
        cache.upsert(parse_object(doc, "test"))
    cache.history = history
    ssn = Session(take_snapshot(cache, now=NOW), config_with(*plugins, extra=extra),
                  now=datetime.fromtimestamp(NOW, UTC), effects=CacheEffects(cache))
    ssn.open()
    return ssn


def fits(ssn: Session, key: str) -> dict[str, bool]:
    t = task(ssn, key)
    mask = ssn.plugins["forecast"].predicate(t, ssn.nodes.free(t))
    return dict(zip(ssn.nodes.names, mask.tolist(), strict=True))


def why(ssn: Session, key: str) -> str:
    t = task(ssn, key)
    return ssn.explain(t, ssn.nodes.free(t))


# -- which pods -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("doc", [
    pod("online", cpu="8", annotations={DURATION: "2h"}),
    offline("no-duration", duration=None),
    pod("best-effort", cpu=None, memory=None, annotations={DURATION: "2h"}),
], ids=["online pod", "offline without a duration", "no batch request"])
def test_other_pods_pass_untouched(doc: dict) -> None:
    history = learn(LoadHistory(), "a", peak_at(13, peak=100))
    ssn = session([node_report("a", batch_cpu=0)], [doc], history)
    assert fits(ssn, f"default/{doc['metadata']['name']}") == {"a": True}


# -- the window ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("duration,peak_hour,fit", [
    ("2h", 13, False), ("30m", 13, True), ("1h", 13, True), ("1h1s", 13, False), ("2h", 14, True),
    ("2h1s", 14, False), ("48h", 11, False), ("2h", 12, False),
], ids=lambda v: str(v))
def test_a_peak_inside_the_run_refuses_the_node(duration: str, peak_hour: int, fit: bool) -> None:
    history = learn(LoadHistory(), "a", peak_at(peak_hour))  # 72 + 20 - 90 = 2 cores at the peak
    ssn = session([node_report("a")], [offline("job", duration)], history)
    assert fits(ssn, "default/job") == {"a": fit}


def test_a_node_without_the_peak_takes_it() -> None:
    history = learn(learn(LoadHistory(), "a", peak_at(13)), "b", peak_at(13, peak=20))
    ssn = session([node_report("a"), node_report("b")], [offline("job")], history)
    assert fits(ssn, "default/job") == {"a": False, "b": True}
    assert why(ssn, "default/job") == ("0/2 nodes are available: 1 node(s) had predicted online peak at 13:00 UTC "
                                        "leaving 2 cores of kubernetes.io/batch-cpu, but the pod runs 2h")


def test_hours_without_history_stay_as_now() -> None:
    ssn = session([node_report("a", batch_cpu=9000), node_report("b", batch_cpu=7000)], [offline("job", "8h")], None)
    assert fits(ssn, "default/job") == {"a": True, "b": False}
    history = learn(LoadHistory(), "a", lambda day, hour: 95 if day == 3 else 20)  # only Thursdays are busy
    ssn = session([node_report("a", batch_cpu=9000)], [offline("job", "8h")], history)
    assert fits(ssn, "default/job") == {"a": True}


def test_a_refused_node_after_admitted_ones_is_explained() -> None:
    """The refused nodes are a subset: the explanation reads each one's own capacity (it indexed the subset's
    capacity with the nodes' positions, an IndexError that failed every cycle with such a pod)."""
    history = learn(learn(LoadHistory(), "a", peak_at(13, peak=20)), "b", peak_at(13))
    ssn = session([node_report("a", batch_cpu=0), node_report("b"), node_report("c", batch_cpu=0)],
                  [offline("job")], history, plugins=("forecast",))
    assert fits(ssn, "default/job") == {"a": False, "b": False, "c": False}
    assert why(ssn, "default/job") == (
        "0/3 nodes are available: 2 node(s) had at most 0 cores of kubernetes.io/batch-cpu free for offline pods now, "
        "1 node(s) had predicted online peak at 13:00 UTC leaving 2 cores of kubernetes.io/batch-cpu, but the pod "
        "runs 2h")
    ssn = session([node_report("a"), node_report("b")], [offline("job")], history, plugins=("forecast",))
    assert fits(ssn, "default/job") == {"a": True, "b": False}
    assert why(ssn, "default/job") == ("0/2 nodes are available: 1 node(s) had predicted online peak at 13:00 UTC "
                                        "leaving 2 cores of kubernetes.io/batch-cpu, but the pod runs 2h")


def test_the_current_hour_counts_on_no_more_than_offered_now() -> None:
    history = learn(LoadHistory(), "a", lambda day, hour: 0.0)  # history says idle; it is not, now
    ssn = session([node_report("a")], [offline("job", "30m", cpu=80_000)], history, plugins=("forecast",))
    assert fits(ssn, "default/job") == {"a": False}
    assert why(ssn, "default/job") == ("0/1 nodes are available: 1 node(s) had 72 cores of kubernetes.io/batch-cpu "
                                        "free for offline pods now")


def test_batch_requests_already_placed_count() -> None:
    history = learn(LoadHistory(), "a", peak_at(13, peak=80))  # 72 + 20 - 80 = 12 cores at 13:00
    running = offline("running", duration=None, cpu=6000, nodeName="a")
    ssn = session([node_report("a")], [running, offline("job")], history)
    assert fits(ssn, "default/job") == {"a": False}
    assert "leaving 6 cores of kubernetes.io/batch-cpu, but the pod runs 2h" in why(ssn, "default/job")
    ssn = session([node_report("a")], [offline("job")], history)
    assert fits(ssn, "default/job") == {"a": True}


def test_placements_in_the_session_count() -> None:
    history = learn(LoadHistory(), "a", peak_at(13, peak=80))
    ssn = session([node_report("a")], [offline("first"), offline("second")], history)
    first = task(ssn, "default/first")
    assert fits(ssn, "default/second") == {"a": True}
    ssn.nodes.place(first, 0)
    assert fits(ssn, "default/second") == {"a": False}


def test_a_stale_node_is_refused_with_its_reason() -> None:
    history = learn(LoadHistory(), "a", peak_at(13, peak=20))
    ssn = session([node_report("a", age=600)], [offline("job")], history, plugins=("forecast",))
    assert fits(ssn, "default/job") == {"a": False}
    assert why(ssn, "default/job") == f"0/1 nodes are available: 1 {STALE}"


def test_memory_peaks_count_too() -> None:
    history = learn(LoadHistory(), "a", peak_at(13, peak=20), memory=peak_at(13, peak=90, base=25))
    ssn = session([node_report("a")], [offline("job", memory="10Gi")], history)
    assert fits(ssn, "default/job") == {"a": False}  # 96Gi + 56Gi - 230.4Gi: nothing left
    assert "peak at 13:00 UTC leaving 0Gi of kubernetes.io/batch-memory, but the pod runs 2h" in why(ssn, "default/job")
    ssn = session([node_report("a")], [offline("job")], history)  # no memory request: memory does not matter
    assert fits(ssn, "default/job") == {"a": True}


def test_reasons_group_nodes_by_their_first_short_hour() -> None:
    history = LoadHistory()
    for name, peak in (("a", 90), ("b", 88)):
        learn(history, name, peak_at(13, peak=peak))
    learn(history, "c", lambda day, hour: 95 if day == 1 and hour == 9 else 20)  # Tuesdays 09:00
    ssn = session([node_report(n) for n in "abc"], [offline("job", "30h")], history)
    assert why(ssn, "default/job") == (
        "0/3 nodes are available: 2 node(s) had predicted online peak at 13:00 UTC leaving at most 4 cores of "
        "kubernetes.io/batch-cpu, but the pod runs 30h, 1 node(s) had predicted online peak at Tue 09:00 UTC "
        "leaving 0 cores of kubernetes.io/batch-cpu, but the pod runs 30h")


# -- arguments ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments,fit", [
    ("", False), ("forecast.quantile: 0.5", True), ("forecast.weeks: 2", True), ("forecast.weeks: 3", False),
])
def test_quantile_and_weeks(arguments: str, fit: bool) -> None:
    # Monday 13:00 was busy three weeks ago only
    history = LoadHistory()
    for week, peak in enumerate((90, 20, 20)):
        for hour in range(24):
            history.observe("a", MONDAY - (3 - week) * WEEK + hour * HOUR, peak if hour == 13 else 20, NAN)
    history.close_finished(NOW)
    if arguments:
        arguments = f"    arguments: {{{arguments}}}"
    extra = "\n" + arguments if arguments else ""
    ssn = session([node_report("a")], [offline("job")], history, plugins=("predicates", "colocation"),
                  extra=f"  - name: forecast{extra}")
    assert fits(ssn, "default/job") == {"a": fit}


@pytest.mark.parametrize("arguments,needle", [
    ("forecast.quantile: 2", "must be at most 1"), ("forecast.weeks: 0", "must be at least 1"),
    ("forecast.horizon: 3h", "unknown argument 'forecast.horizon'"),
])
def test_bad_arguments_are_refused(arguments: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        config_with("predicates", extra=f"  - name: forecast\n    arguments: {{{arguments}}}")


def test_the_prediction_uses_the_nodes_capacity() -> None:
    history = learn(LoadHistory(), "a", peak_at(13, peak=50))
    ssn = session([node_report("a")], [offline("job")], history)
    plugin = ssn.plugins["forecast"]
    online, capacity, batch = plugin.current()
    assert online[:, 0].tolist() == [20_000, 56 * 2**30] and capacity[0, 0] == 100_000 and batch[0, 0] == 72_000
    assert np.allclose(plugin.predicted(2 * HOUR, capacity)[0, 0], [20_000, 50_000])
