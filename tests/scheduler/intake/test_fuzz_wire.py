"""Fuzzing the report endpoint through the real server (issue 13, items 2 and 8).

Mutated reports — protobuf-level garbage, flipped, cut and spliced bytes, and well-formed
reports with hostile values — go over mTLS with node-a's certificate to a running server with
embedded mode's pod actions, while node-b's agent (a real :class:`ReportClient`) reports beside
them.  Whatever arrives: no traceback is logged, no stream hangs, an answer or an error message
stays short, a refused report changes nothing, and nothing node-a says touches node-b's pod or
node-b's stream.  Bounded in examples and time so the suite stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.client import ClientOptions, ReportClient
from proto import codec
from proto.model import ContainerRuntime, Eviction, PodRuntime
from scheduler.api.loader import iter_text
from scheduler.cluster.cache import ClusterCache
from scheduler.intake.reports import ReportIntake
from scheduler.intake.server import AgentServer, TlsFiles
from scheduler.metrics import SchedulerMetrics
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Store
from tests.support.builders import pod
from tests.support.wire import full_report, running_client

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make certificates")


class Errors(logging.Handler):
    """Every record at ERROR or above, or carrying a traceback, from any logger in any thread."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


@dataclass
class Setup:
    certs: Path
    port: int
    intake: ReportIntake
    embedded: Embedded
    victim: Any  # node-b's pod
    canary: ReportClient  # node-b's agent
    channel: grpc.Channel  # node-a's certificate
    errors: Errors


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("fuzz-wire")
    certs = tmp / "certs"
    subprocess.run([str(ROOT / "hack" / "gen-certs.sh"), str(certs), "node-a", "node-b"], check=True,
                   capture_output=True)
    cache = ClusterCache()
    emb = Embedded(cache, Store(tmp / "store.sqlite"), agent_state=tmp / "agent")
    emb.apply(list(iter_text(yaml.safe_dump(pod("victim")), "victim.yaml")))
    victim = next(iter(cache.pods.values()))
    emb.effects.bind(victim, "node-b", {})
    emb.effects.flush()  # embedded binds land at the cycle's end, with its statuses
    intake = ReportIntake(cache, SchedulerMetrics(), register_nodes=True, pod_actions=emb.pod_actions)
    server = AgentServer(intake, listen="127.0.0.1:0",
                         tls=TlsFiles(certs / "server.pem", certs / "server-key.pem", certs / "ca.pem"))
    errors = Errors()
    logging.getLogger().addHandler(errors)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-server", daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    port = run(server.start())
    canary = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, ca=certs / "ca.pem",
                                        cert=certs / "node-b.pem", key=certs / "node-b-key.pem",
                                        server_name="localhost"))
    report = full_report("node-b")
    report.colocation.evictions = []
    report.runtime = [PodRuntime(victim.uid, "default", "victim", "Running", containers=[
        ContainerRuntime("main", "running", pid=1)])]
    canary.publish(report)
    canary_running = contextlib.AsyncExitStack()  # entered and left on the server's loop

    async def start_canary() -> None:
        await canary_running.enter_async_context(running_client(canary))

    run(start_canary())
    deadline = time.monotonic() + 10
    while not canary.stats["acked"] and time.monotonic() < deadline:
        time.sleep(0.02)
    creds = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes(), (certs / "node-a-key.pem").read_bytes(),
                                         (certs / "node-a.pem").read_bytes())
    channel = grpc.secure_channel(f"127.0.0.1:{port}", creds,
                                  options=[("grpc.ssl_target_name_override", "localhost")])
    try:
        yield Setup(certs, port, intake, emb, victim, canary, channel, errors)
    finally:
        channel.close()

        async def finish() -> None:
            await canary_running.aclose()
            await server.stop(0.2)

        run(finish())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        logging.getLogger().removeHandler(errors)


# -- what node-a sends ---------------------------------------------------------------------------------
def forged(victim_uid: str, sequence: int, **values: Any) -> bytes:
    """node-a's report, valid but for what it says of node-b's pod, with ``values`` set by path."""
    r = full_report("node-a", sequence=sequence)
    r.colocation.evictions = [Eviction(victim_uid, "default", "victim", "forged")]
    r.runtime = [PodRuntime(victim_uid, "default", "victim", "Succeeded", "Completed", "forged by node-a", 0, 1,
                            "/root/.ssh", [ContainerRuntime("main", "terminated")])]
    for path, value in values.items():
        target: Any = r
        *parts, last = path.split("__")
        for part in parts:
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        setattr(target, last, value)
    return codec.report_to_pb(r).SerializeToString()


edits = st.lists(st.one_of(
    st.tuples(st.just("set"), st.floats(0, 1), st.binary(min_size=1, max_size=1)),
    st.tuples(st.just("cut"), st.floats(0, 1), st.just(b"")),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=24)),
    st.tuples(st.just("repeat"), st.floats(0, 1), st.just(b"")),
), min_size=1, max_size=4)
VALUES = {
    "identity__node_name": st.sampled_from(["node-b", "", "NODE", "n" * 300_000]),
    "identity__sample_time_ns": st.integers(-400, 400).map(lambda s: time.time_ns() + s * 10**9),
    "identity__sequence": st.integers(0, 5),
    "runtime__0__phase": st.sampled_from(["Running", "Failed", "", "p" * 1_000_000]),
    "runtime__0__uid": st.sampled_from(["", "other", "pod-uid-1"]),
    "runtime__0__log_dir": st.sampled_from(["", "/etc", "../../x"]),
    "capacity__topology_policy": st.sampled_from(["", "x" * 2_000_000]),
    "load__cpu_used_cores": st.sampled_from([float("nan"), -1.0, float("inf"), 1e308]),
}
values = st.dictionaries(st.sampled_from(sorted(VALUES)), st.none(), max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: VALUES[k] for k in keys}))
message = st.one_of(
    st.tuples(st.just("raw"), st.binary(max_size=300)),
    st.tuples(st.just("edited"), edits),
    st.tuples(st.just("valued"), values),
)


def build(kind: str, spec: Any, victim_uid: str, sequence: int) -> bytes:
    if kind == "raw":
        return bytes(spec)
    if kind == "valued":
        return forged(victim_uid, sequence, **spec)
    data = bytearray(forged(victim_uid, sequence))
    for op, where, payload in spec:
        at = min(int(where * len(data)), max(len(data) - 1, 0))
        if op == "set" and data:
            data[at:at + 1] = payload
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = payload
        elif op == "repeat":
            data[at:at] = data[at:at + 64]
    return bytes(data)


def send(channel: grpc.Channel, messages: list[bytes]) -> tuple[grpc.StatusCode | None, str, list]:
    connect = channel.stream_stream("/scoria.v1.NodeAgent/Connect")
    replies = []
    try:
        for raw in connect(iter(messages), timeout=10):  # a hang fails here, as DEADLINE_EXCEEDED
            replies.append(codec.directive_from_pb(codec.pb.Directive.FromString(raw)))
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or "", replies
    return None, "", replies


def others(cache: ClusterCache) -> dict:
    """What node-a's reports could change: everything but node-b's own telemetry (its agent reports beside)."""
    return {name: t for name, t in cache.telemetry.items() if name != "node-b"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message, min_size=1, max_size=3))
def test_no_report_however_mutated_breaks_the_endpoint(setup: Setup, specs: list) -> None:
    s = setup
    messages = [build(kind, spec, s.victim.uid, k + 1) for k, (kind, spec) in enumerate(specs)]
    before, nodes = others(s.intake.cache), dict(s.intake.cache.nodes)
    victim_status = s.embedded.store.get("Pod", "default/victim").status
    code, details, replies = send(s.channel, messages)
    assert code in (None, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED), (code, details)
    assert len(details) <= 300 and all(len(d.ack.message) <= 300 for d in replies if d.ack)
    assert len(replies) <= len(messages)
    if not any(d.ack is not None and d.ack.code == 0 for d in replies):
        assert others(s.intake.cache) == before and dict(s.intake.cache.nodes) == nodes  # refused: nothing changed
    kept = s.intake.cache.telemetry.get("node-a")
    if kept is not None:
        report = kept.report
        assert s.victim.uid not in [p.uid for p in report.runtime] + [e.pod_uid for e in report.colocation.evictions]
    # node-b's pod and node-b's stream are as node-b's agent left them
    assert (s.victim.node_name, s.victim.phase) == ("node-b", "Running")
    assert s.embedded.store.get("Pod", "default/victim").status == victim_status
    assert s.canary.stats["connects"] == 1 and s.canary.connected
    assert not s.errors.records, [r.getMessage() for r in s.errors.records]
