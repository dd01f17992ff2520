"""The agent-scheduler protocol over real gRPC on loopback sockets."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import filecmp
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from agent.client import ClientOptions, ReportClient, backoff_delay
from proto import codec
from proto.model import Ack, Directive, Eviction, PodAction, PodActionKind, QosProfile
from scheduler.intake.reports import ProfileSource
from tests.support.wire import full_report, running_client, running_server, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_match_the_proto(tmp_path: Path) -> None:
    """The committed *_pb2 files are exactly what hack/gen-proto.sh makes from the .proto files."""
    protos = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "proto").rglob("*.proto"))
    out = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", ".", f"--python_out={tmp_path}",
                          f"--pyi_out={tmp_path}", f"--grpc_python_out={tmp_path}", *protos],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*_pb2*.py*"))
    assert generated, "protoc produced nothing"
    for rel in generated:
        assert filecmp.cmp(tmp_path / rel, ROOT / rel, shallow=False), f"{rel} is stale: run hack/gen-proto.sh"


def test_codec_round_trip_of_every_field() -> None:
    report = full_report()
    assert codec.report_from_pb(codec.pb.NodeReport.FromString(codec.report_to_pb(report).SerializeToString())) == report
    assert codec.report_from_json(codec.report_to_json(report)) == report
    directive = Directive(Ack(7, 3, "bad"), QosProfile("night", "abc", "a: 1\n"),
                          [PodAction(PodActionKind.START, "u1", "ns", "p", "why", '{"spec": {}}', 30)])
    assert codec.directive_from_pb(codec.pb.Directive.FromString(
        codec.directive_to_pb(directive).SerializeToString())) == directive


def test_json_form_names_its_kind() -> None:
    doc = codec.report_to_json(full_report())
    assert doc["apiVersion"] == "scoria.io/v1" and doc["kind"] == "NodeReport"
    assert doc["identity"]["nodeName"] == "node-a" and doc["devices"]["gpus"][1]["migMode"] == "MIG_ENABLED"
    with pytest.raises(ValueError, match="cpuMillis"):
        codec.report_from_json({"capacity": {"cpuMillis": "lots"}})


async def _round_trip(tmp_path: Path) -> None:
    profile_file = tmp_path / "night.yaml"
    profile_file.write_text("thresholds: {cpu: 70}\n")
    async with running_server(profiles=ProfileSource(profile_file)) as (_, intake, port):
        directives: list[Directive] = []
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=30, insecure=True), directives.append)
        sent = full_report()
        client.publish(sent)
        async with running_client(client):
            await wait_for(lambda: client.stats["acked"] >= 1, 5)
            kept = intake.cache.telemetry["node-a"].report
            expected = dataclasses.replace(sent, identity=dataclasses.replace(sent.identity, sequence=1))
            assert kept == expected  # every field crossed the wire intact
            assert list(intake.cache.node_evictions) == [("node-a", sent.colocation.evictions[0])]
            profiles = [d.qos_profile for d in directives if d.qos_profile]
            assert len(profiles) == 1 and profiles[0].yaml == "thresholds: {cpu: 70}\n" and profiles[0].name == "night"
            assert all(d.ack.code == 0 for d in directives)
            assert client.pending_evictions == 0  # the eviction arrived, so the client let it go
            node = intake.cache.nodes["node-a"]
            # a node that registers by reporting offers the batch resources it reports, as its Node would
            assert node.allocatable == {"cpu": 8000, "memory": 32 * 2**30, "pods": 110, "nvidia.com/gpu": 1,
                                        "huawei.com/Ascend910": 1, "kubernetes.io/batch-cpu": 2500,
                                        "kubernetes.io/batch-memory": 6 * 2**30}


def test_round_trip_over_grpc(tmp_path: Path) -> None:
    asyncio.run(_round_trip(tmp_path))


async def _refusals_keep_the_stream() -> None:
    async with running_server() as (_, intake, port):
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True))
        bad = full_report()
        bad.load.cpu_used_cores = float("nan")
        client.publish(bad)
        async with running_client(client):
            await wait_for(lambda: client.stats["refused"] >= 2, 5)
            assert "load.cpu_used_cores" in client.last_refusal and "node-a" not in intake.cache.telemetry
            client.publish(full_report())
            await wait_for(lambda: "node-a" in intake.cache.telemetry, 5)
            assert client.stats["connects"] == 1  # the same stream carried the bad and the good reports
            refused = intake.metrics.registry.get_sample_value("scoria_scheduler_reports_refused_total",
                                                               {"reason": "content"})
            assert refused >= 2


def test_refused_report_leaves_stream_and_cache_alone() -> None:
    asyncio.run(_refusals_keep_the_stream())


async def _restart(tmp_path: Path) -> None:
    interval = 1.0
    clients, stop = [], asyncio.Event()  # one stop: the first client told stops them all
    async with contextlib.AsyncExitStack() as running:
        async with running_server() as (_, _, port):
            listen = f"127.0.0.1:{port}"
            for i in range(50):
                c = ReportClient(ClientOptions(listen, interval=interval, insecure=True), seed=i)
                c.publish(full_report(f"node-{i}"))
                clients.append(c)
                await running.enter_async_context(running_client(c, stop))
            await wait_for(lambda: all(c.stats["acked"] for c in clients), 10)
        await asyncio.sleep(0.3)  # the scheduler is gone for a moment
        async with running_server(listen=listen) as (_, intake, _):
            elapsed = await wait_for(lambda: len(intake.cache.telemetry) == 50, 2 * interval + 1)
            assert elapsed <= 2 * interval, f"cache complete only after {elapsed:.2f}s"
            assert all(c.stats["connects"] >= 2 for c in clients)


def test_fifty_clients_reconnect_after_a_server_restart(tmp_path: Path) -> None:
    asyncio.run(_restart(tmp_path))


async def _evictions_survive_disconnection() -> None:
    client = ReportClient(ClientOptions("127.0.0.1:1", interval=0.05, insecure=True, max_pending_evictions=3))
    for i in range(5):
        report = full_report(sequence=0)
        report.colocation.evictions = [Eviction(f"uid-{i}", reason="test")]
        client.publish(report)
    assert client.pending_evictions == 3 and client.stats["evictions_dropped"] == 2  # bounded, oldest first
    async with running_server() as (_, intake, port):
        client.options = dataclasses.replace(client.options, target=f"127.0.0.1:{port}")
        async with running_client(client):
            await wait_for(lambda: client.stats["acked"] >= 1, 5)
            kept = intake.cache.telemetry["node-a"].report.colocation.evictions
            assert [e.pod_uid for e in kept] == ["uid-2", "uid-3", "uid-4"]
            await wait_for(lambda: client.pending_evictions == 0, 2)


def test_latest_state_and_pending_evictions_are_kept_bounded_while_disconnected() -> None:
    asyncio.run(_evictions_survive_disconnection())


def test_backoff_grows_with_full_jitter_and_is_capped() -> None:
    import random
    rng = random.Random(1)
    samples = [[backoff_delay(a, 0.2, 5.0, rng) for _ in range(200)] for a in range(12)]
    assert all(0 <= d <= min(5.0, 0.2 * 2 ** a) for a, ds in enumerate(samples) for d in ds)
    assert max(samples[0]) < 0.21 and max(samples[11]) > 4.0  # grows, then the ceiling holds
    assert len({round(d, 6) for d in samples[5]}) > 150  # jittered, not lockstep


async def _unknown_node() -> None:
    async with running_server(register=False) as (_, intake, port):
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True))
        client.publish(full_report("stranger"))
        async with running_client(client):
            await wait_for(lambda: client.stats["refused"] >= 1, 5)
            assert "unknown to the scheduler" in client.last_refusal and not intake.cache.nodes


def test_unknown_node_is_refused_without_registration() -> None:
    asyncio.run(_unknown_node())


async def _superseded() -> None:
    async with running_server() as (_, intake, port):
        first = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True, backoff_initial=5))
        first.publish(full_report())
        # each client stops at the end of its block, pass or fail, within 15 s of being told to, while the server is
        # still up
        async with running_client(first, bound=15):
            await wait_for(lambda: first.stats["acked"] >= 1, 5)
            second = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True))
            second.publish(full_report())
            async with running_client(second, bound=15):
                await wait_for(lambda: second.stats["acked"] >= 1, 5)
                # the older stream was closed: seen as first disconnected, or as first on a stream of its own
                # again (after a healthy stream its reconnect delay stays under one 50 ms interval, so it may
                # be back before a poll sees it gone, and take the node back from second in turn)
                await wait_for(lambda: not first.connected or first.stats["connects"] >= 2, 15)
                assert intake.streams["node-a"] is not None and len(intake.streams) == 1


def test_a_newer_stream_from_the_same_node_replaces_the_old_one() -> None:
    asyncio.run(_superseded())


def test_cancelling_a_running_client_ends_it_at_once() -> None:
    """A client task cancelled while its stream is open ends (asyncio.run cancels what a failed test leaves
    running, and waits for it: a client that ran on would hang the suite)."""
    async def scenario() -> None:
        async with running_server() as (_, _, port):
            client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True))
            client.publish(full_report())
            task = asyncio.create_task(client.run(asyncio.Event()))
            await wait_for(lambda: client.stats["acked"] >= 1, 5)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=5)
            assert task in done and task.cancelled()

    asyncio.run(scenario())


def test_health_service_reports_serving() -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async def check() -> None:
        async with running_server() as (_, _, port), grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("", "scoria.v1.NodeAgent"):
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING

    asyncio.run(check())


def test_an_ack_covers_every_earlier_report() -> None:
    client = ReportClient(ClientOptions("127.0.0.1:1", insecure=True))
    for i in range(1, 4):
        report = full_report(sequence=0)
        report.colocation.evictions = [Eviction(f"uid-{i}")]
        client.publish(report)
    # three reports went out, each carrying every eviction pending when it left
    client._in_flight = {1: 1, 2: 2, 3: 3}
    client._sent_at = {1: 0.0, 2: 0.0, 3: 0.0}
    client._acknowledge(Ack(2))
    assert client.pending_evictions == 1 and client._in_flight == {3: 1} and set(client._sent_at) == {3}
    client._acknowledge(Ack(3))
    assert client.pending_evictions == 0 and not client._in_flight


def test_a_refusal_keeps_the_evictions() -> None:
    client = ReportClient(ClientOptions("127.0.0.1:1", insecure=True))
    report = full_report(sequence=0)
    client.publish(report)
    client._in_flight = {1: 1}
    client._acknowledge(Ack(1, 3, "bad report"))
    assert client.pending_evictions == 1 and client.stats["refused"] == 1 and client.last_refusal == "bad report"


def test_certificates_not_there_yet_are_retried_not_the_end_of_reporting(tmp_path: Path) -> None:
    async def scenario() -> None:
        options = ClientOptions("127.0.0.1:1", interval=0.05, ca=tmp_path / "ca.pem", cert=tmp_path / "node.pem",
                                key=tmp_path / "node-key.pem", backoff_initial=0.01, backoff_max=0.05)
        client = ReportClient(options)
        async with running_client(client, bound=5) as task:
            await asyncio.sleep(0.3)
            assert not task.done(), task.exception()  # still trying (the Secret may be filled in later)

    asyncio.run(scenario())


GARBAGE = [
    ("undecodable bytes", b"\xff\xff\xff\xff garbage"),
    ("bad UTF-8 in node_name", bytes([0x0A, 0x03, 0x0A, 0x01, 0xFF])),
    ("truncated report", codec.report_to_pb(full_report()).SerializeToString()[:-7]),
    ("a Directive", codec.directive_to_pb(Directive(Ack(1, 2, "hello"))).SerializeToString()),
    ("empty message", b""),
]


def _send_raw(port: int, messages: list[bytes]) -> tuple[grpc.StatusCode | None, str, list[Directive]]:
    """One stream of raw messages (the blocking client: grpc.aio's own may report its unsent writes as INTERNAL)."""
    replies: list[Directive] = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        connect = channel.stream_stream("/scoria.v1.NodeAgent/Connect")
        try:
            for raw in connect(iter(messages), timeout=10):
                replies.append(codec.directive_from_pb(codec.pb.Directive.FromString(raw)))
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or "", replies
    return None, "", replies


async def _garbage() -> dict[str, tuple[grpc.StatusCode | None, str, list[Directive]]]:
    async with running_server() as (_, intake, port):
        real = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True))
        real.publish(full_report())
        async with running_client(real):
            await wait_for(lambda: real.stats["acked"] >= 1, 5)
            outcomes = {name: await asyncio.to_thread(_send_raw, port, [data] * 3) for name, data in GARBAGE}
            assert set(intake.cache.telemetry) == {"node-a"}  # none of the garbage was kept
            acked = real.stats["acked"]
            await wait_for(lambda: real.stats["acked"] > acked, 5)
            assert real.stats["connects"] == 1 and real.connected  # the real agent never noticed
    return outcomes


def test_garbage_on_the_stream_ends_it_with_invalid_argument_and_no_traceback(caplog) -> None:
    """Issue 13 item 8: not UNKNOWN and a traceback per message, but INVALID_ARGUMENT and a short message."""
    import logging
    caplog.set_level(logging.INFO)
    outcomes = asyncio.run(_garbage())
    for name in ("undecodable bytes", "bad UTF-8 in node_name", "truncated report"):
        code, details, replies = outcomes[name]
        assert code == grpc.StatusCode.INVALID_ARGUMENT and not replies, (name, code, details)
        assert details.startswith("message 1 is not a scoria.v1.NodeReport") and len(details) <= 300
    for name in ("a Directive", "empty message"):  # they parse, as nonsense: refused like any bad report
        code, details, replies = outcomes[name]
        assert code is None and [d.ack.code for d in replies] == [3, 3, 3], (name, code, details)
        assert all(d.ack.message.startswith("identity.node_name") for d in replies)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text


async def _large_refusal() -> tuple[int, int]:
    async with running_server() as (_, _, port):
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True))
        bad = full_report()
        bad.capacity.numa_zones[0].distances = [10] * (3 * 2**20)  # a 3 MiB list on the wire
        client.publish(bad)
        async with running_client(client):
            await wait_for(lambda: client.stats["refused"] >= 2, 10)
        return len(client.last_refusal or ""), client.stats["connects"]


def test_a_refusal_never_echoes_a_large_value() -> None:
    """Issue 13 item 8: a 3 MiB list made a 6 MiB answer that broke the stream."""
    length, connects = asyncio.run(_large_refusal())
    assert 0 < length <= 300 and connects == 1
