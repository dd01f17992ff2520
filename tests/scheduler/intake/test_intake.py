"""Report intake without gRPC: validation, ordering, identity, staleness — and fuzzing of all of it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proto.model import Gpu, NumaZone, PodUsage
from scheduler.api.nodereport import ReportLimits, check_report
from scheduler.api.objects import Pod
from scheduler.cluster.cache import ClusterCache
from scheduler.framework.keeper import take_snapshot
from scheduler.intake.reports import CloseStream, ReportIntake, StreamState
from scheduler.metrics import SchedulerMetrics
from tests.support.timebox import timeboxed
from tests.support.wire import changed_report

NOW = 1_800_000_000.0
THEIRS = "uid-theirs"  # a pod bound to node-b


def report(**changes):
    return changed_report(NOW, **changes)


def intake(register: bool = True, clock=lambda: NOW) -> ReportIntake:
    return ReportIntake(ClusterCache(), SchedulerMetrics(), register_nodes=register, clock=clock)


def test_refusal_changes_nothing_and_the_stream_goes_on() -> None:
    it = intake()
    stream = StreamState()
    d = it.receive(stream, report(load__cpu_used_cores=float("nan")))
    assert d.ack.code == 3 and "load.cpu_used_cores" in d.ack.message
    assert not it.cache.nodes and not it.cache.telemetry and it.cache.generation == 0
    d = it.receive(stream, report(identity__sequence=2))
    assert d.ack.code == 0 and "node-a" in it.cache.telemetry


def test_sequence_must_increase_on_a_stream() -> None:
    it = intake()
    stream = StreamState()
    assert it.receive(stream, report(identity__sequence=5)).ack.code == 0
    d = it.receive(stream, report(identity__sequence=5))
    assert d.ack.code == 3 and "identity.sequence: 5 is not after 5" in d.ack.message
    assert it.receive(stream, report(identity__sequence=6)).ack.code == 0
    # a rebooted node starts its sequence again
    assert it.receive(stream, report(identity__sequence=1, identity__boot_id="boot-new")).ack.code == 0


def test_a_stream_speaks_for_one_node() -> None:
    it = intake()
    stream = StreamState()
    it.receive(stream, report())
    d = it.receive(stream, report(identity__sequence=2, identity__node_name="node-b"))
    assert d.ack.code == 3 and "this stream reports for node 'node-a'" in d.ack.message
    assert "node-b" not in it.cache.telemetry


def test_older_sample_than_the_kept_one_is_refused_across_streams() -> None:
    it = intake()
    it.receive(StreamState(), report(identity__sample_time_ns=int((NOW - 1) * 1e9)))
    d = it.receive(StreamState(), report(identity__sample_time_ns=int((NOW - 2) * 1e9)))
    assert d.ack.code == 3 and "older than the report already kept" in d.ack.message


def test_certificate_names_the_node() -> None:
    it = intake()
    with pytest.raises(CloseStream) as closed:
        it.receive(StreamState(allowed_names=frozenset({"node-b"})), report())
    assert closed.value.code.name == "PERMISSION_DENIED" and not it.cache.telemetry
    assert it.receive(StreamState(allowed_names=frozenset({"node-a"})), report()).ack.code == 0


def test_unknown_node_without_registration() -> None:
    it = intake(register=False)
    d = it.receive(StreamState(), report())
    assert d.ack.code == 3 and "unknown to the scheduler" in d.ack.message and not it.cache.telemetry


def test_stale_telemetry_reads_as_unknown_never_as_idle() -> None:
    clock = [NOW]
    it = intake(clock=lambda: clock[0])
    it.receive(StreamState(), report())
    table = take_snapshot(it.cache, now=NOW + 2.9).nodes
    assert not table.stale[0] and table.usage_cpu[0] == 3750 and table.batch_cpu[0] == 2500
    table = take_snapshot(it.cache, now=NOW + 3.1).nodes  # three 1 s intervals without a report
    assert table.stale[0] and math.isnan(table.usage_cpu[0]) and math.isnan(table.batch_memory[0])
    clock[0] = NOW + 3.1
    assert it.count_stale() == 1
    assert it.metrics.registry.get_sample_value("scoria_scheduler_stale_nodes") == 1


def test_nodes_without_reports_have_unknown_telemetry() -> None:
    from scheduler.api.objects import Node
    cache = ClusterCache()
    cache.upsert(Node("quiet", {"cpu": 1000, "memory": 2**30, "pods": 10}))
    table = take_snapshot(cache, now=NOW).nodes
    assert table.stale[0] and np.isnan(table.batch_cpu).all()


def test_a_refused_report_in_a_nodes_name_never_ends_that_nodes_stream() -> None:
    """Issue 13 item 8: another client's bad or stale report for node-a leaves node-a's own stream alone."""
    it = intake()
    real = StreamState()
    assert it.receive(real, report(identity__sequence=1)).ack.code == 0
    for bad in (report(load__cpu_used_cores=float("nan")),  # bad content
                report(identity__sample_time_ns=int((NOW - 60) * 1e9)),  # older than what is kept
                report(identity__sample_time_ns=int((NOW + 290) * 1e9))):  # from the future
        other = StreamState()
        assert it.receive(other, bad).ack.code == 3
        assert other.node is None and other.last_sequence is None  # not even its own stream changed
    assert it.streams["node-a"] is real and not real.superseded
    assert it.receive(real, report(identity__sequence=2)).ack.code == 0  # no CloseStream


def test_only_an_accepted_report_replaces_a_nodes_stream() -> None:
    it = intake()
    old, new = StreamState(), StreamState()
    assert it.receive(old, report(identity__sequence=1)).ack.code == 0
    assert it.receive(new, report(identity__sequence=1)).ack.code == 0  # the agent reconnected
    assert it.streams["node-a"] is new
    with pytest.raises(CloseStream) as closed:
        it.receive(old, report(identity__sequence=2))
    assert closed.value.code.name == "ALREADY_EXISTS"


def test_a_refused_first_report_leaves_the_stream_unclaimed() -> None:
    it = intake()
    stream = StreamState()
    assert it.receive(stream, report(capacity__cpu_millis=0)).ack.code == 3
    assert (stream.node, stream.last_sequence, stream.boot_id, stream.checked_capacity) == (None, None, "", None)
    assert not it.streams and it.metrics.registry.get_sample_value("scoria_scheduler_agents_connected") == 0


@pytest.mark.parametrize("ahead,code", [(29, 0), (31, 3), (290, 3)])
def test_a_report_dated_ahead_beyond_the_skew_is_refused_and_cannot_poison_ordering(ahead: int, code: int) -> None:
    it = intake()
    d = it.receive(StreamState(), report(identity__sample_time_ns=int((NOW + ahead) * 1e9)))
    assert d.ack.code == code
    if code:
        assert "identity.sample_time_ns" in d.ack.message and "in the future" in d.ack.message
        assert not it.cache.telemetry
        assert it.receive(StreamState(), report()).ack.code == 0  # the genuine report is not "older"


HUGE = 3 * 2**20


@pytest.mark.parametrize("changes,field", [
    ({"capacity__numa_zones__0__distances": list(range(HUGE))}, "capacity.numa_zones[0].distances"),
    ({"identity__node_name": "n" * 10_000_000}, "identity.node_name"),
    ({"runtime__0__phase": "x" * HUGE}, "runtime[0].phase"),
    ({"runtime__1__uid": ""}, "runtime[1].uid"),
    ({"load__pods__1__uid": "pod-uid-1"}, "load.pods[1].uid"),
    ({"capacity__topology_policy": "p" * HUGE}, "capacity.topology_policy"),
    ({"devices__gpus__1__uuid": "GPU-0b3c"}, "devices.gpus[1]"),
], ids=["3-MiB-list", "10-MB-name", "3-MiB-phase", "empty-uid", "repeated-uid", "3-MiB-policy", "repeated-uuid"])
def test_a_refusal_is_short_and_names_the_field(changes: dict, field: str) -> None:
    it = intake()
    d = it.receive(StreamState(), report(**changes))
    assert d.ack.code == 3 and d.ack.message.startswith(field) and len(d.ack.message) <= 300, d.ack.message[:400]


def test_a_certificate_refusal_is_short_too() -> None:
    it = intake()
    with pytest.raises(CloseStream) as closed:
        it.receive(StreamState(allowed_names=frozenset({"node-b"})), report(identity__node_name="n" * 10_000_000))
    assert closed.value.code.name == "PERMISSION_DENIED" and len(closed.value.message) <= 300


def test_evictions_of_pods_bound_to_another_node_are_ignored() -> None:
    from proto.model import Eviction

    it = intake()
    it.cache.upsert(Pod("web", "theirs", THEIRS, {"cpu": 1000}, node_name="node-b", phase="Running"))
    d = it.receive(StreamState(), report(colocation__evictions=[Eviction(THEIRS, "web", "theirs", "forged"),
                                                                Eviction("uid-unknown", "ml", "x", "memory")]))
    assert d.ack.code == 0  # the report is kept; only the entry about node-b's pod is not
    assert [(n, e.pod_uid) for n, e in it.cache.node_evictions] == [("node-a", "uid-unknown")]
    assert [e.pod_uid for e in it.cache.telemetry["node-a"].report.colocation.evictions] == ["uid-unknown"]
    assert it.metrics.registry.get_sample_value("scoria_scheduler_report_entries_ignored_total",
                                                {"field": "colocation.evictions"}) == 1
    assert it.metrics.registry.get_sample_value("scoria_scheduler_node_evictions_total") == 1


# -- fuzzing ----------------------------------------------------------------------------------------
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12))
PATHS = [
    "identity__sequence", "identity__sample_time_ns", "identity__report_interval_ms", "capacity__cpu_millis",
    "capacity__memory_bytes", "load__cpu_used_cores", "load__memory_used_bytes", "load__pods__0__cpu_used_cores",
    "load__pods__1__memory_used_bytes", "load__cpu_pressure__full_avg60", "devices__gpus__0__memory_used_bytes",
    "devices__gpus__1__gpu_utilization_percent", "devices__gpus__0__numa_node", "devices__npus__0__hbm_used_bytes",
    "colocation__batch_cpu_millis", "colocation__batch_memory_bytes", "colocation__offline_cpu_quota_millis",
    "capacity__numa_zones__0__memory_bytes",
]


def _coerce(path: str, value):
    """Keep the field's Python type as the codec would produce it (ints stay ints)."""
    original = report()
    target = original
    for part in path.split("__"):
        target = target[int(part)] if part.isdigit() else getattr(target, part)
    if isinstance(target, int) and not isinstance(target, bool):
        return int(value) if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)) else -1
    return float(value)


mutations = st.lists(st.tuples(st.sampled_from(PATHS), numbers), max_size=4)
list_sizes = st.tuples(st.integers(0, 70), st.integers(0, 2100), st.integers(0, 300))
TEXT_PATHS = [
    "identity__node_name", "identity__boot_id", "capacity__topology_policy", "devices__gpus__0__uuid",
    "load__pods__0__uid", "runtime__0__uid", "runtime__1__uid", "runtime__0__phase", "runtime__0__log_dir",
    "runtime__1__containers__0__state", "colocation__evictions__0__pod_uid",
]
texts = st.one_of(st.text(max_size=12), st.sampled_from(["node-b", THEIRS, "pod-uid-1", "Succeeded", "running"]),
                  st.integers(0, 2_000_000).map(lambda n: "x" * n))
text_mutations = st.lists(st.tuples(st.sampled_from(TEXT_PATHS), texts), max_size=3)
skews = st.one_of(st.none(), st.integers(-400, 400))  # the sample's time, in seconds from now


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations, text_mutations, skews, list_sizes, st.booleans())
@example([], [("runtime__0__uid", THEIRS), ("colocation__evictions__0__pod_uid", THEIRS)], None, (2, 2, 0), False)
@example([], [("identity__node_name", "node-b"), ("runtime__0__uid", THEIRS)], None, (2, 2, 0), True)
@example([], [("runtime__0__phase", "x" * 3_000_000)], 290, (2, 2, 0), True)
@timeboxed()
def test_fuzzed_reports_never_crash_and_refusals_change_nothing(changes, text_changes, skew, sizes,
                                                                 fresh_stream) -> None:
    it = intake()
    it.cache.upsert(Pod("web", "theirs", THEIRS, {"cpu": 1000}, node_name="node-b", phase="Running"))
    stream = StreamState()
    it.receive(stream, report(identity__sequence=1))
    before = dict(it.cache.telemetry), dict(it.cache.nodes), it.cache.generation, dict(it.streams)
    changed = {p: _coerce(p, v) for p, v in changes}
    changed.update(text_changes)
    if skew is not None:
        changed["identity__sample_time_ns"] = int((NOW + skew) * 1e9)
    r = report(**{"identity__sequence": 2, **changed})
    gpus, pods, zones = sizes
    if gpus != 2:
        r.devices.gpus = [Gpu(i, f"GPU-{i}", memory_total_bytes=10, memory_used_bytes=i % 12) for i in range(gpus)]
    if pods != 2:
        r.load.pods = [PodUsage(f"u{i % (pods or 1)}") for i in range(pods)]
    if zones:
        r.capacity.numa_zones = [NumaZone(i, [i]) for i in range(zones)]
    target = StreamState() if fresh_stream else stream
    stream_before = dataclasses.replace(target)
    directive = it.receive(target, r)
    assert directive is None or len(directive.ack.message) <= 300  # None: accepted, acked later
    if directive is not None and directive.ack.code != 0:
        assert (it.cache.telemetry, dict(it.cache.nodes), it.cache.generation, it.streams) == before
        assert target == stream_before  # not even the stream changed
    else:
        assert check_report(r, now_ns=int(NOW * 1e9), limits=ReportLimits()) is None
        assert it.cache.telemetry[r.identity.node_name].report is r
        assert skew is None or skew <= 30
        if r.identity.node_name != "node-b":  # another node never keeps an entry about node-b's pod
            assert THEIRS not in [p.uid for p in r.runtime] + [e.pod_uid for e in r.colocation.evictions]
    theirs = it.cache.pods[THEIRS]
    assert (theirs.node_name, theirs.phase) == ("node-b", "Running")


def test_received_messages_are_validated_as_they_are() -> None:
    """The server checks the protobuf message itself; the dataclasses appear only on demand."""
    from proto import codec
    it = intake()
    stream = StreamState()
    decoder = codec.ReportDecoder()
    good = codec.report_to_pb(report(colocation__evictions=[]))
    decoded = []

    def decode():
        decoded.append(1)
        return decoder.decode(good)

    assert it.receive(stream, good, decode, decoder.capacity_key(good)).ack.code == 0
    assert decoded == [1]  # registering the node needed its capacity once
    good.identity.sequence = 2
    assert it.receive(stream, good, decode, decoder.capacity_key(good)) is None  # accepted, ack later
    assert decoded == [1]
    assert it.cache.telemetry["node-a"].report == decoder.decode(good) and decoded == [1, 1]
    bad = codec.report_to_pb(report(identity__sequence=3, load__pods__0__cpu_used_cores=float("nan")))
    d = it.receive(stream, bad, lambda: decoder.decode(bad), decoder.capacity_key(bad))
    assert d.ack.code == 3 and "load.pods[0].cpu_used_cores" in d.ack.message
    bad = codec.report_to_pb(report(identity__sequence=4, capacity__numa_zones__0__cpus=[0, 99]))
    d = it.receive(stream, bad, lambda: decoder.decode(bad), decoder.capacity_key(bad))
    assert d.ack.code == 3 and "CPU 99 is out of range" in d.ack.message  # a changed capacity is checked again


def test_a_report_without_a_node_name_is_refused_for_that() -> None:
    it = intake()
    d = it.receive(StreamState(), report(identity__node_name=""))
    assert d.ack.code == 3 and d.ack.message.startswith("identity.node_name: ") and "this stream" not in d.ack.message
