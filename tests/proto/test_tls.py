"""TLS and mutual TLS between agents and the scheduler, with certificates from hack/gen-certs.sh."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.client import ClientOptions, ReportClient
from scheduler.cluster.cache import ClusterCache
from scheduler.intake.reports import ReportIntake
from scheduler.intake.server import AgentServer, ServeError, TlsFiles
from scheduler.metrics import SchedulerMetrics
from tests.support.wire import full_report, running_client, running_server, wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make certificates")


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    subprocess.run([str(ROOT / "hack" / "gen-certs.sh"), str(out), "node-a", "node-b"], check=True,
                   capture_output=True)
    return out


def options(certs: Path, port: int, node: str | None) -> ClientOptions:
    return ClientOptions(f"127.0.0.1:{port}", interval=0.05, ca=certs / "ca.pem",
                         cert=certs / f"{node}.pem" if node else None, key=certs / f"{node}-key.pem" if node else None,
                         server_name="localhost", backoff_initial=0.05, backoff_max=0.2)


async def attempt(certs: Path, *, tls: TlsFiles, cert_for: str | None, reports_as: str, wait: float = 1.5):
    """Run one client briefly; return (client, intake)."""
    async with running_server(tls=tls) as (_, intake, port):
        client = ReportClient(options(certs, port, cert_for))
        client.publish(full_report(reports_as))
        async with running_client(client):
            try:
                await wait_for(lambda: client.stats["acked"] >= 1, wait)
            except TimeoutError:
                pass
        return client, intake


def mtls(certs: Path) -> TlsFiles:
    return TlsFiles(certs / "server.pem", certs / "server-key.pem", certs / "ca.pem")


def test_mtls_accepts_the_node_its_certificate_names(certs: Path) -> None:
    client, intake = asyncio.run(attempt(certs, tls=mtls(certs), cert_for="node-a", reports_as="node-a"))
    assert client.stats["acked"] >= 1 and "node-a" in intake.cache.telemetry


def test_mtls_refuses_reporting_for_another_node(certs: Path) -> None:
    client, intake = asyncio.run(attempt(certs, tls=mtls(certs), cert_for="node-a", reports_as="node-b", wait=0.5))
    assert client.stats["acked"] == 0 and not intake.cache.telemetry
    refused = intake.metrics.registry.get_sample_value("scoria_scheduler_reports_refused_total",
                                                       {"reason": "identity"})
    assert refused >= 1


def test_mtls_refuses_a_client_without_certificate(certs: Path) -> None:
    client, intake = asyncio.run(attempt(certs, tls=mtls(certs), cert_for=None, reports_as="node-a", wait=0.5))
    assert client.stats["acked"] == 0 and not intake.cache.telemetry and client.stats["connects"] >= 1


def test_server_only_tls_accepts_any_node(certs: Path) -> None:
    tls = TlsFiles(certs / "server.pem", certs / "server-key.pem")
    client, intake = asyncio.run(attempt(certs, tls=tls, cert_for=None, reports_as="node-b"))
    assert client.stats["acked"] >= 1 and "node-b" in intake.cache.telemetry


def test_tls_client_refuses_a_server_it_does_not_trust(certs: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run([str(ROOT / "hack" / "gen-certs.sh"), str(other)], check=True, capture_output=True)
    tls = TlsFiles(other / "server.pem", other / "server-key.pem")
    client, intake = asyncio.run(attempt(certs, tls=tls, cert_for=None, reports_as="node-a", wait=0.5))
    assert client.stats["acked"] == 0 and not intake.cache.telemetry


@pytest.mark.parametrize("listen,insecure,remote,error", [
    ("0.0.0.0:0", True, False, "would accept node reports from anyone"),
    ("10.1.2.3:0", True, False, "would accept node reports from anyone"),
    ("127.0.0.1:0", False, False, "choose TLS"),
    ("nonsense", True, False, "expected HOST:PORT"),
])
def test_insecure_only_on_loopback(listen: str, insecure: bool, remote: bool, error: str) -> None:
    intake = ReportIntake(ClusterCache(), SchedulerMetrics())
    with pytest.raises(ServeError, match=error):
        AgentServer(intake, listen=listen, tls=None, insecure=insecure, allow_insecure_remote=remote)


def test_tls_without_client_certificates_only_on_loopback(certs: Path) -> None:
    """Server-only TLS asks nobody who they are: on a reachable address anyone could report as any node."""
    intake = ReportIntake(ClusterCache(), SchedulerMetrics())
    tls = TlsFiles(cert=certs / "server.pem", key=certs / "server-key.pem")
    for listen in ("0.0.0.0:0", "10.1.2.3:0"):
        with pytest.raises(ServeError, match="would let anyone report as any node; add --tls-client-ca"):
            AgentServer(intake, listen=listen, tls=tls)
    AgentServer(intake, listen="127.0.0.1:0", tls=tls)
    AgentServer(intake, listen="0.0.0.0:0", tls=TlsFiles(tls.cert, tls.key, client_ca=certs / "ca.pem"))
    AgentServer(intake, listen="0.0.0.0:0", tls=tls, allow_insecure_remote=True)


def test_insecure_remote_can_be_forced() -> None:
    intake = ReportIntake(ClusterCache(), SchedulerMetrics())
    AgentServer(intake, listen="0.0.0.0:0", tls=None, insecure=True, allow_insecure_remote=True)


def test_a_node_certificate_cannot_speak_for_another_nodes_pods(certs: Path, tmp_path: Path) -> None:
    """Issue 13 item 2: node-a, with its own valid certificate, says node-b's pod succeeded and keeps its logs
    in /root/.ssh; node-a's certificate reporting as node-b is refused on that stream only."""
    import yaml

    from proto.model import ContainerRuntime, PodRuntime
    from scheduler.api.loader import iter_text
    from scheduler.modes.embedded.mode import Embedded
    from scheduler.modes.embedded.store import Store
    from tests.support.builders import pod

    cache = ClusterCache()
    emb = Embedded(cache, Store(tmp_path / "store.sqlite"), agent_state=tmp_path / "agent")
    emb.apply(list(iter_text(yaml.safe_dump(pod("web")), "web.yaml")))
    web = next(iter(cache.pods.values()))
    emb.effects.bind(web, "node-b", {})
    emb.effects.flush()  # embedded binds land at the cycle's end, with its statuses

    def report(node: str, phase: str, log_dir: str, message: str = ""):
        r = full_report(node)
        r.colocation.evictions = []
        r.runtime = [PodRuntime(web.uid, "default", "web", phase, "Completed" if message else "", message, 0, 1,
                                log_dir, [ContainerRuntime("main", "running" if phase == "Running" else "terminated")])]
        return r

    def status() -> dict:
        return emb.store.get("Pod", "default/web").status

    async def scenario() -> None:
        intake = ReportIntake(cache, SchedulerMetrics(), register_nodes=True, pod_actions=emb.pod_actions)
        server = AgentServer(intake, listen="127.0.0.1:0", tls=mtls(certs))
        port = await server.start()
        stop = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as running:
                b = ReportClient(options(certs, port, "node-b"))
                b.publish(report("node-b", "Running", ""))
                await running.enter_async_context(running_client(b, stop))
                await wait_for(lambda: b.stats["acked"] >= 1 and "runtime" in status(), 5)
                recorded = status()
                a = ReportClient(options(certs, port, "node-a"))
                a.publish(report("node-a", "Succeeded", "/root/.ssh", "forged by node-a"))
                await running.enter_async_context(running_client(a, stop))
                as_b = ReportClient(options(certs, port, "node-a"))  # node-a's certificate, node-b's name
                as_b.publish(report("node-b", "Succeeded", "/root/.ssh", "forged by node-a"))
                await running.enter_async_context(running_client(as_b, stop))
                await wait_for(lambda: a.stats["acked"] >= 1 and as_b.stats["connects"] >= 2, 5)
                acked_b = b.stats["acked"]
                await asyncio.sleep(0.3)  # several more forged reports
                assert (web.node_name, web.phase, web.reason) == ("node-b", "Running", None)
                assert status() == recorded and status()["phase"] == "Running"
                assert status()["runtime"]["logDir"] == str(tmp_path / "agent" / "logs" / f"default_web_{web.uid}")
                assert intake.metrics.registry.get_sample_value("scoria_scheduler_report_entries_ignored_total",
                                                                {"field": "runtime"}) >= 1
                assert as_b.stats["acked"] == 0  # refused, and only on its own stream:
                assert b.connected and b.stats["connects"] == 1 and b.stats["refused"] == 0
                await wait_for(lambda: b.stats["acked"] > acked_b, 5)
                assert intake.streams["node-b"] is not None and intake.streams["node-a"] is not None
        finally:
            await server.stop(0.2)

    asyncio.run(scenario())
