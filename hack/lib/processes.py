"""Real processes for tests and benchmarks: a free port, ``python -m scheduler serve`` started and waited
for, a process stopped gracefully (killed if it will not) or timed from SIGTERM to its exit, Prometheus
text read back, a process's CPU time, a request to the embedded scheduler's control socket.
(``hack/bench/`` imports this module too.)"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(*args: str, port_file: Path, **popen) -> subprocess.Popen:
    """``python -m scheduler serve --port-file PORT_FILE ARGS…`` from the repository root."""
    return subprocess.Popen([sys.executable, "-m", "scheduler", "serve", "--port-file", str(port_file), *args],
                            cwd=ROOT, **popen)


class ServeFailed(RuntimeError):
    pass


def wait_port(port_file: Path, proc: subprocess.Popen, timeout: float) -> int:
    """The agent port ``serve`` wrote to ``port_file``; ServeFailed if it exits or takes over ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text())
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr is not None else ""
            raise ServeFailed(f"serve exited with {proc.returncode}: {stderr}")
        time.sleep(0.05)
    raise ServeFailed(f"serve did not write its port within {timeout:g} s")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    """``sig`` to a running process, SIGKILL if it has not exited within ``timeout``; its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def sigterm_timed(proc: subprocess.Popen, timeout: float) -> tuple[str, float]:
    """SIGTERM to ``proc``, then its output read to the end: its standard error (as ``communicate`` gives it)
    and the seconds it took to exit.  ``subprocess.TimeoutExpired`` after ``timeout``: the caller kills it."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout)
    return err, time.monotonic() - t0


def scrape(url: str, timeout: float = 10) -> dict[str, float]:
    """Prometheus text from ``url`` as {sample with labels: value}; lines that are not samples are skipped."""
    out = {}
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        for line in resp.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
    return out


class ControlError(OSError):
    """The control API answered with an error status (``status``, the server's message)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


def control(sock: Path, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
            timeout: float = 10):
    """The JSON answer of ``serve --embedded``'s control API at Unix socket ``sock``; OSError when it cannot
    be reached, ControlError (an OSError) when it answers with an error."""

    from scheduler.modes.embedded.client import UnixConnection  # the CLI's own transport

    conn = UnixConnection(sock, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
    except http.client.HTTPException as exc:
        raise OSError(f"not an HTTP answer: {exc!r}") from None
    finally:
        conn.close()
    if resp.status >= 400:
        try:
            message = json.loads(data).get("error")
        except (ValueError, AttributeError):
            message = data.decode(errors="replace")
        raise ControlError(resp.status, message)
    return json.loads(data or b"null")


def cpu_seconds(proc: psutil.Process) -> float:
    """User plus system CPU time of ``proc`` so far."""
    t = proc.cpu_times()
    return t.user + t.system
