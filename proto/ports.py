"""Checking a TCP port before listening on it, and saying in one line what is wrong and how to change it.

Every listener of the scheduler and the agent (gRPC for agents, ``/metrics`` and ``/healthz``) asks
:func:`check_port` first.  A port that another program holds is an input error, not a traceback:

    error: --metrics-port 9090: 127.0.0.1:9090 is in use (by pid 4242: python3 -m http.server 9090); choose
    another with --metrics-port PORT (0 turns it off)

Who holds it comes from the kernel's socket table (``psutil``), as far as this user may see it.
"""

from __future__ import annotations

import errno
import socket

from proto.errors import InputError


class PortInUse(InputError):
    """A port this process was told to listen on cannot be had; the message names the flag that changes it."""


def port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (``in use (by pid …)``, ``permission denied``…), or None.

    Binds a probe socket the way the servers will (``SO_REUSEADDR``: a port in TIME_WAIT is free) and
    closes it at once; port 0 (any free port) is always fine."""
    if port == 0:
        return None
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OverflowError:
        return f"port {port} is not a port (0-65535)"
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            who = holder(port)
            return f"{_where(host, port)} is in use" + (f" (by {who})" if who else " by another program")
        return f"cannot listen on {_where(host, port)} ({exc.strerror or exc})"
    return None


def check_port(host: str, port: int, *, flag: str, also: str = "") -> None:
    """PortInUse naming ``flag`` (and what else, ``also``, would change it) when ``host:port`` is not free."""
    problem = port_problem(host, port)
    if problem is not None:
        value = f"{host}:{port}" if flag == "--listen" else str(port)
        raise PortInUse(f"{flag} {value}: {problem}; choose another with {flag} "
                        f"{'HOST:PORT' if flag == '--listen' else 'PORT'}{also}")


def holder(port: int) -> str | None:
    """``pid N: its command line`` of the process listening on TCP ``port``, when this user can see it."""
    import psutil

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                try:
                    command = " ".join(" ".join(psutil.Process(conn.pid).cmdline()).split())  # one line
                except psutil.Error:
                    command = ""
                command = command if len(command) <= 120 else command[:120] + "…"
                return f"pid {conn.pid}" + (f": {command}" if command else "")
    except (psutil.Error, OSError):  # who holds it is a courtesy; the refusal stands without it
        return None
    return None


def _where(host: str, port: int) -> str:
    shown = host or "0.0.0.0"
    return f"[{shown}]:{port}" if ":" in shown else f"{shown}:{port}"
