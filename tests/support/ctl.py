"""The embedded CLI run in this process against a control server: ``python -m scheduler ARGV --server …``."""

from __future__ import annotations

import contextlib
import io

from scheduler.cli import build_parser
from scheduler.modes.embedded import client
from scheduler.modes.embedded.server import ControlServer


def ctl(server: str | ControlServer, *argv: str) -> tuple[int, str, str]:
    """(status, stdout, stderr) of the CLI with ``ARGV --server SERVER`` (a ControlServer: its socket)."""
    address = server if isinstance(server, str) else f"unix://{server.socket_path}"
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args([*argv, "--server", address])
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = client.run(args)
    return status, out.getvalue(), err.getvalue()
