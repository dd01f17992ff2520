"""``python -m scheduler serve``: the agents' gRPC endpoint, health, metrics and the scheduling loop.

The wire boundary on the scheduler side: one ``grpc.aio`` stream per agent,
decoded with :mod:`proto.codec` and handed to :class:`ReportIntake`.  TLS is
the default; with a client CA the agents must present certificates, and a
certificate names the node it may report for.  Plaintext is refused unless
asked for, and only on a loopback address unless forced.

A message that does not decode as a ``NodeReport`` (garbage, another message's
bytes) ends its own stream with ``INVALID_ARGUMENT`` and a short message naming
which message it was; nothing is logged above DEBUG for it, and no other stream
notices.  (gRPC's own deserializer would end the stream with ``UNKNOWN`` and log
a traceback for every such message.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from proto import codec
from proto.errors import InputError
from proto.localsock import check_socket_path, claim_socket_path, restrict_socket, unix_path
from proto.ports import check_port
from proto.scoria.v1 import agent_pb2_grpc
from scheduler.api.nodereport import bounded
from scheduler.intake.reports import CloseStream, ReportIntake, StreamState

log = logging.getLogger(__name__)
SERVICE = "scoria.v1.NodeAgent"


# Thousands of agents connect at once when the scheduler (re)starts. gRPC core cancels new streams
# while more than 1,000 wait for the application to accept them (3,000 hard): that turned every
# restart of a large fleet into a reconnect storm. Let them queue instead.
SERVER_OPTIONS = [
    ("grpc.max_concurrent_streams", 1 << 20),
    ("grpc.server.max_pending_requests", 1 << 20),
    ("grpc.server.max_pending_requests_hard_limit", 1 << 20),
    ("grpc.server_max_unrequested_time_in_server", 120),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


class ServeError(InputError):
    """A server setting that cannot work; the message says which and why."""


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path | None = None  # set: require client certificates (mTLS) naming the node


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_address(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServeError(f"--listen: expected HOST:PORT, got {listen!r}")
    return host, int(port)


def check_listen(listen: str) -> None:
    """PortInUse (one line, naming --listen) when the agents' TCP endpoint cannot be had."""
    host, port = split_address(listen)
    check_port(host, port, flag="--listen")


def peer_names(context: grpc.aio.ServicerContext) -> frozenset[str]:
    """Node names a client certificate speaks for: its CN (also as system:node:NAME) and DNS SANs."""
    auth = context.auth_context() or {}
    names = set()
    for raw in auth.get("x509_common_name", []):
        cn = raw.decode()
        names.add(cn.removeprefix("system:node:"))
    for raw in auth.get("x509_subject_alternative_name", []):
        names.add(raw.decode())
    return frozenset(names)


class Undecodable:
    """What the stream's deserializer hands on for bytes that are not a NodeReport."""

    __slots__ = ("error",)

    def __init__(self, error: str):
        self.error = error


def decode_report(data: bytes) -> Any:
    """A received message as a NodeReport, or :class:`Undecodable` (never raises: see the module docstring)."""
    try:
        return codec.pb.NodeReport.FromString(data)
    except DecodeError as exc:
        return Undecodable(str(exc) or "the wire format is corrupt")


def add_agent_service(service: AgentService, server: grpc.aio.Server) -> None:
    """Register ``NodeAgent`` as the generated code does, but with :func:`decode_report` as the deserializer."""
    handlers = {"Connect": grpc.stream_stream_rpc_method_handler(
        service.Connect, request_deserializer=decode_report,
        response_serializer=codec.pb.Directive.SerializeToString)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


class AgentService(agent_pb2_grpc.NodeAgentServicer):
    def __init__(self, intake: ReportIntake, *, check_identity: bool):
        self.intake = intake
        self.check_identity = check_identity

    async def Connect(self, request_iterator: AsyncIterator[Any],  # noqa: N802 - gRPC's name
                      context: grpc.aio.ServicerContext[Any, Any]) -> None:
        # read()/write() on the context: cheaper per message than an async-generator handler (request_iterator
        # is not read)
        stream = StreamState(allowed_names=peer_names(context) if self.check_identity else None, peer=context.peer())
        decoder = codec.ReportDecoder()
        read, write, receive = context.read, context.write, self.intake.receive_message
        received = 0
        try:
            while True:
                message = await read()
                # grpc-stubs declares EOFType but not the grpc.aio.EOF sentinel grpcio has
                if message is grpc.aio.EOF:  # type: ignore[attr-defined]
                    break
                received += 1
                if type(message) is Undecodable:
                    self.intake.metrics.report_refused("undecodable")
                    log.debug("undecodable message %d from %s: %s", received, stream.peer, message.error)
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                        bounded(f"message {received} is not a scoria.v1.NodeReport: {message.error}"))
                try:
                    # validated as received; the dataclasses are built only if something needs them
                    directive = receive(stream, message, decoder)
                except CloseStream as closed:
                    await context.abort(closed.code, closed.message)
                if directive is not None:
                    await write(codec.directive_to_pb(directive))
        finally:
            self.intake.release(stream)


def credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    try:
        pair = (tls.key.read_bytes(), tls.cert.read_bytes())
        ca = tls.client_ca.read_bytes() if tls.client_ca else None
    except OSError as exc:
        raise ServeError(f"cannot read TLS file: {exc}") from None
    return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=ca is not None)


class AgentServer:
    """The gRPC server with the agent service and standard health checking."""

    def __init__(self, intake: ReportIntake, *, listen: str, tls: TlsFiles | None, insecure: bool = False,
                 allow_insecure_remote: bool = False):
        # unix:PATH: a socket only the server's user can open (0600); the kernel is the authentication
        self.unix_path = unix_path(listen)
        if self.unix_path is not None:
            check_socket_path(self.unix_path, "--listen")
        else:
            host, _ = split_address(listen)
            if tls is None and not insecure:
                raise ServeError("choose TLS (--tls-cert and --tls-key), --insecure, or a unix: socket")
            if tls is None and not is_loopback(host) and not allow_insecure_remote:
                raise ServeError(f"--insecure on {host or 'all interfaces'} would accept node reports from anyone; "
                                 "listen on 127.0.0.1/::1 or a unix: socket, use TLS, or add --insecure-allow-remote")
            if tls is not None and tls.client_ca is None and not is_loopback(host) and not allow_insecure_remote:
                # encrypted, but nobody is asked who they are: any client could report as any node
                raise ServeError(f"TLS without --tls-client-ca on {host or 'all interfaces'} would let anyone report "
                                 "as any node; add --tls-client-ca (agents then prove their node), listen on a "
                                 "loopback address, or add --insecure-allow-remote")
        self.intake = intake
        self.listen = f"unix:{self.unix_path}" if self.unix_path is not None else listen
        self.tls = tls
        self.server: grpc.aio.Server | None = None
        # grpc_health.v1.health.aio.HealthServicer once started (grpc-stubs has no stub for the aio servicer)
        self.health: Any = None
        self.port = 0

    async def start(self) -> int:
        """Bind and serve (built here: grpc.aio needs the running event loop)."""
        self.server = grpc.aio.server(options=SERVER_OPTIONS)
        add_agent_service(AgentService(self.intake, check_identity=bool(self.tls and self.tls.client_ca)),
                          self.server)
        # grpc_health-stubs lacks health.aio (grpcio-health-checking's asyncio servicer, grpc_health.v1._async)
        self.health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        if self.unix_path is not None:  # grpc would replace a live server's socket: refuse that, clear a dead one's
            claim_socket_path(self.unix_path, "--listen")
        if self.unix_path is None:
            check_listen(self.listen)
        try:
            if self.tls:
                self.port = self.server.add_secure_port(self.listen, credentials(self.tls))
            else:
                self.port = self.server.add_insecure_port(self.listen)
        except RuntimeError:  # grpc says only "Failed to bind": taken since the check, or not this machine's address
            self.port = 0
        if not self.port:
            raise ServeError(f"--listen {self.listen}: cannot listen there (taken, or not an address of this machine); "
                             "choose another with --listen HOST:PORT")
        if self.unix_path is not None:
            restrict_socket(self.unix_path)
        await self.server.start()
        for service in ("", SERVICE):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info("agent endpoint on %s (%s)", self.listen if self.unix_path else f"port {self.port}",
                 "mTLS" if self.tls and self.tls.client_ca else "TLS" if self.tls else
                 "Unix socket, its owner only" if self.unix_path else "plaintext")
        return self.port

    async def stop(self, grace: float = 2.0) -> None:
        if self.server is None:
            return
        for service in ("", SERVICE):
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.stop(grace)
        if self.unix_path is not None:
            self.unix_path.unlink(missing_ok=True)


async def sweep_staleness(intake: ReportIntake, stop: asyncio.Event, every: float = 1.0) -> None:
    """Keep the stale-node gauge current and say when nodes go quiet or come back."""
    last = 0
    while not stop.is_set():
        stale = intake.count_stale()
        if stale != last:
            log.info("%d node(s) stale (no report for %d intervals)", stale, intake.cache.stale_intervals)
            last = stale
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            pass


async def serve_forever(server: AgentServer, intake: ReportIntake, *,
                        on_started: Callable[[int], object] | None = None) -> None:
    """Run until SIGINT/SIGTERM, then stop accepting, drain briefly and return."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    port = await server.start()
    if on_started:
        on_started(port)
    sweeper = asyncio.create_task(sweep_staleness(intake, stop))
    await stop.wait()
    log.info("shutting down")
    await server.stop()
    await sweeper
