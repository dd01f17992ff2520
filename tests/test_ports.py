"""Every listener checks its port first (issue 19 item 5): a port another program holds is one line naming the
flag that changes it, exit 2 and no traceback — for the scheduler's agent endpoint and /metrics and the agent's
/metrics — and nothing has started yet (an embedded agent has adopted, started or stopped no pod)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.lib.processes import ROOT
from proto.ports import PortInUse, check_port, port_problem


@pytest.fixture
def taken() -> Iterator[int]:
    """A port this test process listens on (so it is in use, and by whom is known)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, proc
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_taken_port_is_named_with_its_holder_and_the_flag(taken: int) -> None:
    assert port_problem("127.0.0.1", 0) is None
    problem = port_problem("127.0.0.1", taken)
    assert problem is not None and problem.startswith(f"127.0.0.1:{taken} is in use (by pid "), problem
    with pytest.raises(PortInUse, match=rf"^--listen 127.0.0.1:{taken}: 127.0.0.1:{taken} is in use .*; choose "
                                        r"another with --listen HOST:PORT$"):
        check_port("127.0.0.1", taken, flag="--listen")


def test_serve_with_its_metrics_port_taken_says_so_in_one_line(taken: int, tmp_path: Path) -> None:
    err = one_line(run("-m", "scheduler", "serve", "--embedded", "--state", str(tmp_path / "s"), "--metrics-port",
                       str(taken)), f"--metrics-port {taken}: 127.0.0.1:{taken} is in use",
                   "choose another with --metrics-port PORT (0 turns it off)")
    assert "pid" in err
    assert not (tmp_path / "s" / "store.sqlite").exists()  # refused before the store was opened


def test_serve_with_its_agent_port_taken_says_so_in_one_line(taken: int) -> None:
    """Found: ``serve`` on a busy gRPC port (50051) was a traceback ending in grpc's 'Failed to bind'."""
    one_line(run("-m", "scheduler", "serve", "--insecure", "--metrics-port", "0", "--listen", f"127.0.0.1:{taken}"),
             f"--listen 127.0.0.1:{taken}: 127.0.0.1:{taken} is in use", "choose another with --listen HOST:PORT")


def test_the_agent_with_its_metrics_port_taken_says_so_before_it_starts_anything(taken: int, tmp_path: Path) -> None:
    one_line(run("-m", "agent", "run", "--dry-run", "--pods-from", "none", "--no-devices", "--metrics-port",
                 str(taken)), f"--metrics-port {taken}: 127.0.0.1:{taken} is in use")
    # embedded: refused before the local runtime opens its state (it would adopt pods, and stop them on the way out)
    one_line(run("-m", "agent", "run", "--embedded", "--state", str(tmp_path / "agent"), "--cgroup-parent",
                 f"scoria-ports-{taken}", "--no-devices", "--metrics-port", str(taken)),
             f"--metrics-port {taken}")
    assert not (tmp_path / "agent").exists()
