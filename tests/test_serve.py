"""``python -m scheduler serve`` as a real process: ports, health, metrics, reports, shutdown."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agent.client import ClientOptions, ReportClient

from .wire import full_report, wait_for

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(*args: str, port_file: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scheduler", "serve", "--port-file", str(port_file), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_file(path: Path, proc: subprocess.Popen, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        if proc.poll() is not None:
            raise AssertionError(f"serve exited: {proc.stderr.read()}")
        time.sleep(0.05)
    raise TimeoutError("serve did not start")


def test_serve_end_to_end(tmp_path: Path) -> None:
    metrics_port = free_port()
    port_file = tmp_path / "port"
    proc = start("--insecure", "--listen", "127.0.0.1:0", "--register-nodes", "--metrics-port", str(metrics_port),
                 port_file=port_file)
    try:
        port = wait_file(port_file, proc)

        async def report() -> None:
            client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.1, insecure=True))
            client.publish(full_report("node-a"))
            stop = asyncio.Event()
            task = asyncio.create_task(client.run(stop))
            await wait_for(lambda: client.stats["acked"] >= 2, 10)
            stop.set()
            await task

        asyncio.run(report())
        base = f"http://127.0.0.1:{metrics_port}"
        assert urllib.request.urlopen(f"{base}/healthz", timeout=5).read() == b"ok\n"
        metrics = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
        accepted = [line for line in metrics.splitlines() if line.startswith("scoria_scheduler_reports_total ")]
        assert accepted and float(accepted[0].split()[1]) >= 2
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
