"""Delta reports: the scheduler's merge, its refusals, and the agent's client sending them over real gRPC."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import time

import pytest

from agent.client import ClientOptions, ReportClient
from proto import codec
from proto.delta import delta_for
from proto.model import ContainerUsage, Gpu, NodeReport, NumaZone, PodUsage, QosLevel, ReportDelta
from scheduler.api.objects import Pod
from scheduler.cluster.cache import ClusterCache
from scheduler.intake.reports import KEPT_BASES, ReportIntake, StreamState
from scheduler.metrics import SchedulerMetrics
from tests.support.wire import changed_report, full_report, running_client, running_server, wait_for

NOW = 1_800_000_000.0
GI = 2**30
FULL = ReportDelta(0)  # a full report from an agent that sends deltas


def intake() -> ReportIntake:
    return ReportIntake(ClusterCache(), SchedulerMetrics(), register_nodes=True, clock=lambda: NOW)


def sample(sequence: int, **changes: object) -> NodeReport:
    r = changed_report(NOW, **changes)
    r.identity.sequence = sequence
    r.identity.sample_time_ns += sequence  # later reports are sampled later
    return r


def send(it: ReportIntake, stream: StreamState, decoder: codec.ReportDecoder, report: NodeReport,
         delta: ReportDelta | None = None):
    """``report`` as the client puts it on the wire (whole or as ``delta``), received as the server does."""
    message = codec.pb.NodeReport.FromString(codec.report_to_pb(report, delta).SerializeToString())
    return it.receive_message(stream, message, decoder)


def changes(report: NodeReport, sections: tuple[str, ...]) -> NodeReport:
    """``report`` with each named section changed (and every figure that is always sent)."""
    r = copy.deepcopy(report)
    r.load.cpu_used_cores += 1.25
    r.load.io_pressure.some_total_us += 7
    r.colocation.batch_cpu_millis += 100
    r.colocation.evictions = []
    if "capacity" in sections:
        r.capacity.memory_bytes += GI
        r.capacity.numa_zones[1].memory_bytes -= GI
    if "devices" in sections:
        r.devices.gpus[0].memory_used_bytes += GI
        r.devices.npus = []
    if "pods" in sections:
        r.load.pods[1].containers.append(ContainerUsage("fedcba987654", 0.125, 3))
        r.load.pods.append(PodUsage("pod-uid-4", "web", "frontend-1", QosLevel.LC, 0.5, GI))
        del r.load.pods[0]
    if "runtime" in sections:
        r.runtime[0].restarts += 1
        del r.runtime[1]
    return r


SECTIONS = ("capacity", "devices", "pods", "runtime")


@pytest.mark.parametrize("changed", [c for n in range(len(SECTIONS) + 1) for c in itertools.combinations(SECTIONS, n)],
                         ids=lambda c: "+".join(c) or "nothing")
def test_a_merged_delta_is_the_full_report(changed: tuple[str, ...]) -> None:
    """Whatever changed since the base, the scheduler keeps exactly what a full report would have given it."""
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    base = sample(1)
    d = send(it, stream, decoder, base, FULL)
    assert d.ack.code == 0 and d.ack.deltas  # the first report is acked, and the scheduler takes deltas
    report = changes(base, changed)
    report.identity.sequence, report.identity.sample_time_ns = 2, base.identity.sample_time_ns + 1
    delta = delta_for(report, base, 1)
    assert [name for name in SECTIONS if not getattr(delta, f"same_{name}")] == list(changed)
    assert send(it, stream, decoder, report, delta) is None  # accepted (acked later, as any report)
    kept = it.cache.telemetry["node-a"]
    assert kept.report == report
    assert (kept.cpu_used_cores, kept.batch_cpu_millis) == (report.load.cpu_used_cores,
                                                             report.colocation.batch_cpu_millis)
    full_it = intake()
    send(full_it, StreamState(), codec.ReportDecoder(), report)
    assert full_it.cache.telemetry["node-a"].report == kept.report
    assert full_it.cache.nodes["node-a"].allocatable == it.cache.nodes["node-a"].allocatable


def test_a_delta_is_smaller_on_the_wire() -> None:
    base = sample(1)
    report = changes(base, ())
    report.identity.sequence = 2
    whole = codec.report_to_pb(report).ByteSize()
    delta = codec.report_to_pb(report, delta_for(report, base, 1)).ByteSize()
    assert delta < whole / 4, (delta, whole)


def test_a_delta_before_any_full_report_is_refused_and_changes_nothing() -> None:
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    report = sample(1)
    d = send(it, stream, decoder, report, ReportDelta(7, True, True, True, True))
    assert d.ack.code == 3 and d.ack.message.startswith("delta.base_sequence: 7 is not a report")
    assert not d.ack.deltas
    assert not it.cache.telemetry and not it.cache.nodes and stream == StreamState()
    d = send(it, stream, decoder, sample(1, load__cpu_used_cores=-1.0), FULL)  # a refused full report, marked
    assert d.ack.code == 3 and stream == StreamState()
    assert it.metrics.reports_refused.labels("delta")._value.get() == 1
    assert send(it, stream, decoder, sample(2), FULL).ack.code == 0  # the full report that follows is taken


def test_a_delta_on_a_base_the_stream_does_not_keep_is_refused() -> None:
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    it.ack_every = 1
    assert send(it, stream, decoder, sample(1), FULL).ack.code == 0
    assert send(it, stream, decoder, sample(2), ReportDelta(1, True, True, True, True)).ack.code == 0
    for seq in (3, 4):
        assert send(it, stream, decoder, sample(seq), FULL).ack.code == 0
    assert sorted(stream.bases) == [3, 4] and KEPT_BASES == 2
    before = (it.cache.telemetry["node-a"], dataclasses.replace(stream, bases=dict(stream.bases)))
    d = send(it, stream, decoder, sample(5), ReportDelta(2, same_capacity=True))
    assert d.ack.code == 3 and "delta.base_sequence: 2" in d.ack.message
    assert (it.cache.telemetry["node-a"], stream) == before  # nothing changed, not even the stream
    # the previous base is still good: a delta sent while the newer ack was on its way
    assert send(it, stream, decoder, sample(5), ReportDelta(3, True, True, True, True)).ack.code == 0
    # another stream of the same node holds no base of its own
    d = send(it, StreamState(), codec.ReportDecoder(), sample(6), ReportDelta(5, True, True, True, True))
    assert d.ack.code == 3 and "delta.base_sequence" in d.ack.message


def test_a_merged_delta_is_checked_whole() -> None:
    """Sections taken from the base are checked against what changed: GPUs named in NUMA zone 1 are refused
    when the capacity that comes with the delta has one zone."""
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    base = sample(1)
    send(it, stream, decoder, base, FULL)
    report = sample(2)
    report.capacity.numa_zones = [NumaZone(0, list(range(8)), 32 * GI, [10])]
    for cpu in report.capacity.cpu_topology.cpus:
        cpu.numa_zone = 0
    report.devices.gpus = [dataclasses.replace(g, numa_node=1) for g in base.devices.gpus]
    base.devices = report.devices  # the base the agent holds says the same GPUs
    d = send(it, stream, decoder, report, ReportDelta(1, same_devices=True, same_pods=True, same_runtime=True))
    assert d.ack.code == 3 and d.ack.message.startswith("devices.gpus[0].numa_node"), d.ack.message
    assert it.cache.telemetry["node-a"].sample_time_ns == base.identity.sample_time_ns  # nothing changed
    bad = sample(3, load__cpu_used_cores=float("nan"))
    d = send(it, stream, decoder, bad, ReportDelta(1, True, True, True, True))
    assert d.ack.code == 3 and d.ack.message.startswith("load.cpu_used_cores")


def test_a_delta_drops_other_nodes_pods_without_touching_its_base() -> None:
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    base = sample(1)
    send(it, stream, decoder, base, FULL)
    kept_base = stream.bases[1].report
    it.cache.upsert(Pod("ml", "done-0", "pod-uid-8", {"cpu": 1000}, node_name="node-b", phase="Running"))
    assert send(it, stream, decoder, sample(2, colocation__evictions=[]),
                ReportDelta(1, True, True, True, True)) is None
    assert [p.uid for p in it.cache.telemetry["node-a"].report.runtime] == ["pod-uid-1"]
    assert [p.uid for p in kept_base.runtime] == ["pod-uid-1", "pod-uid-8"]  # the base is as it was received


def test_a_full_report_after_deltas_is_acked_at_once() -> None:
    """The agent sends a full report after a refusal or a lost ack; acked at once, it is the next base."""
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    send(it, stream, decoder, sample(1), FULL)
    assert send(it, stream, decoder, sample(2, colocation__evictions=[]), ReportDelta(1, True, True, True, True)) is None
    d = send(it, stream, decoder, sample(3, colocation__evictions=[]), FULL)
    assert d is not None and d.ack.code == 0 and d.ack.sequence == 3 and 3 in stream.bases


# -- the agent's client over real gRPC --------------------------------------------------------------------------

class Recorder:
    """Wraps the intake's receive_message: every message's stream, sequence and base."""

    def __init__(self, it: ReportIntake):
        self.seen: list[tuple[int, int, int]] = []
        receive = it.receive_message

        def recording(stream, message, decoder):
            self.seen.append((id(stream), message.identity.sequence, message.delta.base_sequence))
            return receive(stream, message, decoder)

        it.receive_message = recording  # type: ignore[method-assign]


async def _client_sends_deltas() -> None:
    async with running_server() as (_, it, port):
        recorder = Recorder(it)
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.01, insecure=True, full_every=25))
        published = full_report()
        published.colocation.evictions = []  # (evictions are the agent's news: sent until acked, then gone)
        client.publish(published)
        async with running_client(client):
            await wait_for(lambda: client.stats["sent"] >= 60, 10)
            # the agent's next picture: usage changed, one GPU's memory too
            changed = dataclasses.replace(
                published, identity=dataclasses.replace(published.identity, sample_time_ns=time.time_ns()),
                load=dataclasses.replace(published.load, cpu_used_cores=5.5),
                devices=dataclasses.replace(published.devices,
                                            gpus=[dataclasses.replace(published.devices.gpus[0], memory_used_bytes=GI),
                                                  published.devices.gpus[1]]))
            client.publish(changed)
            sent = client.stats["sent"]
            await wait_for(lambda: client.stats["sent"] >= sent + 3, 10)
            kept = it.cache.telemetry["node-a"].report
            seq = kept.identity.sequence
            assert kept == dataclasses.replace(changed, identity=dataclasses.replace(changed.identity, sequence=seq))
        bases = [base for _, _, base in recorder.seen]
        assert bases[0] == 0 and client.stats["refused"] == 0
        assert sum(1 for b in bases if b) == client.stats["deltas"] > 0.8 * len(bases)
        fulls = [seq for _, seq, base in recorder.seen if not base]
        assert fulls[:3] == [1, 26, 51]  # a full report every 25


def test_the_client_sends_deltas_that_merge_to_what_the_agent_published() -> None:
    asyncio.run(_client_sends_deltas())


async def _lost_acks() -> None:
    async with running_server() as (_, it, port):
        recorder = Recorder(it)
        it.ack_every = 10**9  # the scheduler acks the first report, then none: as if every ack were lost
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.01, insecure=True, delta_span=5,
                                            full_every=1000))
        client.publish(full_report())
        async with running_client(client):
            await wait_for(lambda: client.stats["sent"] >= 12, 10)
        bases = [base for _, _, base in recorder.seen]
        # acked full report 1, deltas on it up to 6 (5 reports past the base), then whole reports, each acked
        # at once as the new base (the stream has sent deltas): a delta on it follows
        assert bases[:8] == [0, 1, 1, 1, 1, 1, 0, 7], bases


def test_a_lost_ack_makes_the_client_send_a_full_report() -> None:
    asyncio.run(_lost_acks())


async def _reconnect() -> None:
    async with running_server() as (_, it, port):
        recorder = Recorder(it)
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.01, insecure=True, backoff_initial=0.01))
        client.publish(full_report())
        async with running_client(client):
            await wait_for(lambda: client.stats["deltas"] >= 3, 10)
            it.accepting = lambda: False  # the next report ends the stream (as a replica that stops leading)
            await wait_for(lambda: client.stats["connects"] >= 2, 10)
            it.accepting = lambda: True
            await wait_for(lambda: len({s for s, _, _ in recorder.seen}) >= 3, 10)
            await wait_for(lambda: client.stats["deltas"] >= 6, 10)
        firsts: dict[int, int] = {}
        for stream, _, base in recorder.seen:
            firsts.setdefault(stream, base)
        assert list(firsts.values()) == [0] * len(firsts)  # every stream starts with a full report
        assert client.stats["refused"] == 0


def test_a_reconnected_client_starts_with_a_full_report() -> None:
    asyncio.run(_reconnect())


def test_a_refused_report_makes_the_next_one_full() -> None:
    client = ReportClient(ClientOptions("127.0.0.1:1", insecure=True))
    client._base = (4, full_report(sequence=4))
    client._since_full = 3
    report = full_report(sequence=5)
    assert client._delta(report) == ReportDelta(4, True, True, True, True)
    from proto.model import Ack
    client._acknowledge(Ack(5, 3, "delta.base_sequence: 4 is not a report this stream acknowledged"))
    assert client._base is None and client._delta(full_report(sequence=6)) == FULL


def test_an_old_scheduler_gets_full_reports() -> None:
    """A scheduler whose acks do not say it takes deltas never gets one."""
    from proto.model import Ack
    client = ReportClient(ClientOptions("127.0.0.1:1", insecure=True))
    for seq in range(1, 5):
        assert client._delta(full_report(sequence=seq)) == FULL
        client._acknowledge(Ack(seq))
    assert client._base is None


def test_a_gpu_list_that_changed_is_sent() -> None:
    base = full_report(sequence=1)
    report = dataclasses.replace(base, devices=dataclasses.replace(
        base.devices, gpus=base.devices.gpus + [Gpu(2, "GPU-new")]))
    delta = delta_for(report, base, 1)
    assert not delta.same_devices and delta.same_capacity and delta.same_pods
    msg = codec.report_to_pb(report, delta)
    assert len(msg.devices.gpus) == 3 and not msg.HasField("capacity") and not msg.load.pods


def test_the_json_form_has_no_deltas() -> None:
    doc = codec.report_to_json(full_report())
    doc["delta"] = {"baseSequence": "3", "sameCapacity": True}
    with pytest.raises(ValueError, match="delta: a delta report exists only on an agent's stream"):
        codec.report_from_json(doc)


def test_a_stream_that_sends_no_deltas_keeps_no_copy_of_its_reports() -> None:
    """An agent that does not mark its full reports (an older one) never sends deltas: nothing is kept for it."""
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    it.ack_every = 2
    for seq in range(1, 6):
        send(it, stream, decoder, sample(seq))
    assert not stream.bases
    d = send(it, stream, decoder, sample(6), ReportDelta(5, True, True, True, True))
    assert d.ack.code == 3 and "delta.base_sequence" in d.ack.message
    assert send(it, stream, decoder, sample(7), FULL).ack.code == 0 and list(stream.bases) == [7]


def test_a_full_report_says_whether_its_agent_sends_deltas() -> None:
    report = sample(1)
    assert not codec.report_to_pb(report).HasField("delta")
    marked = codec.report_to_pb(report, FULL)
    assert marked.HasField("delta") and marked.delta.base_sequence == 0
    assert codec.report_from_pb(marked) == report
    assert codec.report_from_json(codec.report_to_json(report)) == report


def test_an_agent_whose_first_ack_came_late_bases_its_first_delta_on_a_later_one() -> None:
    """Under load the first ack can reach the agent after it sent ten more full reports; the next ack is its base."""
    it, stream, decoder = intake(), StreamState(), codec.ReportDecoder()
    acked = [seq for seq in range(1, 12)
             if send(it, stream, decoder, sample(seq, colocation__evictions=[]), FULL) is not None]
    assert acked == [1, 11] and sorted(stream.bases) == [1, 11]
    assert send(it, stream, decoder, sample(12, colocation__evictions=[]), ReportDelta(11, True, True, True, True)) is None


async def _first_ack() -> None:
    async with running_server() as (_, it, port):
        receive = it.receive_message
        holding = [True]

        def slow_to_accept(stream, message, decoder):  # as a scheduler still accepting a reconnect storm
            return None if holding[0] else receive(stream, message, decoder)

        it.receive_message = slow_to_accept  # type: ignore[method-assign]
        recorder = Recorder(it)
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.02, insecure=True))
        client.publish(full_report())
        async with running_client(client):
            await asyncio.sleep(0.15)  # seven intervals
            assert client.stats["sent"] == 1  # one report until it is acknowledged
            await wait_for(lambda: client.stats["sent"] == 2, 2)  # ten intervals on: tried again
            holding[0] = False
            await wait_for(lambda: client.stats["sent"] >= 10, 5)  # acknowledged: every interval
        assert [seq for _, seq, _ in recorder.seen][:2] == [1, 2]


def test_a_client_sends_one_report_until_the_stream_is_acknowledged() -> None:
    asyncio.run(_first_ack())
