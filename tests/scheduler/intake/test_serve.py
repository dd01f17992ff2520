"""``python -m scheduler serve`` as a real process: ports, health, metrics, reports, shutdown."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from agent.client import ClientOptions, ReportClient
from hack.lib.processes import free_port, scrape, start_serve, wait_port
from tests.support.wire import full_report, running_client, wait_for


def start(*args: str, port_file: Path) -> subprocess.Popen:
    return start_serve(*args, port_file=port_file, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_end_to_end(tmp_path: Path) -> None:
    metrics_port = free_port()
    port_file = tmp_path / "port"
    proc = start("--insecure", "--listen", "127.0.0.1:0", "--register-nodes", "--metrics-port", str(metrics_port),
                 port_file=port_file)
    try:
        port = wait_port(port_file, proc, 20)

        async def report() -> None:
            client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.1, insecure=True))
            client.publish(full_report("node-a"))
            async with running_client(client):
                await wait_for(lambda: client.stats["acked"] >= 2, 10)

        asyncio.run(report())
        base = f"http://127.0.0.1:{metrics_port}"
        assert urllib.request.urlopen(f"{base}/healthz", timeout=5).read() == b"ok\n"
        assert scrape(f"{base}/metrics")["scoria_scheduler_reports_total"] >= 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("args,needle", [
    (["--insecure", "--listen", "0.0.0.0:0"], "would accept node reports from anyone"),
    (["--listen", "127.0.0.1:0"], "choose TLS"),
    (["--tls-cert", "x.pem"], "--tls-cert and --tls-key go together"),
    (["--insecure", "--stale-intervals", "0"], "--stale-intervals"),
])
def test_serve_refuses_bad_settings(tmp_path: Path, args: list[str], needle: str) -> None:
    proc = start(*args, "--metrics-port", "0", port_file=tmp_path / "port")
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 2 and needle in err
