"""The agent's side of the wire: a reconnecting report stream to the scheduler.

:class:`ReportClient` keeps one stream open.  The agent calls
:meth:`ReportClient.publish` whenever it has a new picture of the node; the
client sends the latest one as soon as it connects and, once the scheduler
has acknowledged that one, every interval, numbering them, and hands every
directive to a callback.  While the
scheduler is away it keeps only the latest report (memory stays bounded) plus
the evictions not yet acknowledged (bounded too, oldest dropped first and
counted), and reconnects with exponential backoff and full jitter.

Delta reports (``deltas``, on by default): once the scheduler's acks say it
takes them, a report leaves out each section (capacity, devices, pods, runtime)
that is the same as in the last report the scheduler acknowledged, and names
that report as its base (:mod:`proto.delta`).  A full report goes instead on a
new stream (the base belongs to the stream), after a refusal, every
``full_every`` reports, and when no ack has come for ``delta_span`` reports (an
ack lost or late: the scheduler keeps only its last two acknowledged reports).

A report is sent again only while it is recent (``resend_for`` seconds after
the agent published it).  An agent whose loop stopped publishing — a tick that
fails every time, a loop stuck in the kernel — therefore goes quiet instead of
re-sending a frozen copy of its last good report: the scheduler sees the node
go stale and reads its figures as unknown, never as a healthy node's.

With :mod:`proto.codec` and :mod:`scheduler.intake.server` this is the wire boundary.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from proto import codec
from proto.delta import delta_for
from proto.errors import InputError
from proto.model import Ack, Directive, Eviction, NodeReport, ReportDelta
from proto.scoria.v1 import agent_pb2_grpc

if TYPE_CHECKING:
    from proto.scoria.v1 import agent_pb2

    ReportStream = grpc.aio.StreamStreamCall[agent_pb2.NodeReport, agent_pb2.Directive]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientOptions:
    target: str                       # host:port of the scheduler's agent endpoint, or unix:PATH
    interval: float = 1.0             # seconds between reports
    ca: Path | None = None            # CA that signed the scheduler's certificate: TLS
    cert: Path | None = None          # this node's client certificate (mTLS)
    key: Path | None = None
    server_name: str | None = None    # expected name in the scheduler's certificate, if not the target host
    insecure: bool = False            # plaintext (the scheduler must allow it)
    backoff_initial: float = 0.2
    backoff_max: float = 30.0
    # For this long after losing a working stream, waits stay under one report interval: a scheduler
    # restart costs at most an interval of reports; a longer outage backs off to backoff_max.
    fast_reconnect_window: float = 60.0
    max_pending_evictions: int = 1000
    # A published report is sent again, every interval, for at most this long (None: three intervals, at
    # least 10 s); then nothing is sent until the agent publishes a newer one.
    resend_for: float | None = None
    deltas: bool = True               # send delta reports to a scheduler that takes them
    full_every: int = 60              # with deltas: a full report at least every this many reports
    delta_span: int = 30              # with deltas: a full report when the base is this many reports old

    @property
    def report_lifetime(self) -> float:
        return self.resend_for if self.resend_for is not None else max(3 * self.interval, 10.0)


def channel_options(options: ClientOptions) -> list[tuple[str, object]]:
    """Our own backoff decides when to reconnect: give each channel its own connection (gRPC otherwise
    shares one per target process-wide, with its own 1 s+ reconnect backoff) and let it connect at once."""
    return [("grpc.use_local_subchannel_pool", 1),
            ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", int(options.backoff_max * 1000)),
            ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000)]


def channel_for(options: ClientOptions) -> grpc.aio.Channel:
    target = options.target
    extra = channel_options(options)
    # a unix: socket needs no TLS: the kernel lets only those the socket's mode allows connect (embedded mode)
    if options.insecure or (options.ca is None and target.startswith("unix:")):
        return grpc.aio.insecure_channel(target, options=extra)
    if options.ca is None:
        raise InputError("TLS needs the scheduler's CA (ca=...), or choose insecure")
    creds = grpc.ssl_channel_credentials(
        root_certificates=options.ca.read_bytes(),
        private_key=options.key.read_bytes() if options.key else None,
        certificate_chain=options.cert.read_bytes() if options.cert else None)
    if options.server_name:
        extra.append(("grpc.ssl_target_name_override", options.server_name))
    return grpc.aio.secure_channel(target, creds, options=extra)


def open_stream(channel: grpc.aio.Channel) -> ReportStream:
    """A raw report stream on ``channel`` (``write`` protobuf reports, ``read`` directives).

    For load generators that send many nodes' pre-encoded reports; agents use :class:`ReportClient`.
    """
    return agent_pb2_grpc.NodeAgentStub(channel).Connect()


def backoff_delay(attempt: int, initial: float, ceiling: float, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(ceiling, initial × 2^attempt)]."""
    return rng.uniform(0, min(ceiling, initial * (2 ** min(attempt, 30))))


class ReportClient:
    def __init__(self, options: ClientOptions, on_directive: Callable[[Directive], None] | None = None,
                 *, channel: grpc.aio.Channel | None = None, seed: int | None = None):
        self.options = options
        self.on_directive = on_directive or (lambda d: None)
        self._shared_channel = channel  # many simulated agents may share one channel
        self._lock = threading.Lock()
        self._latest: NodeReport | None = None
        self._published_at = 0.0   # monotonic time of the latest publish
        self._quiet = False        # the latest report is too old to send again (said once)
        self._evictions: deque[Eviction] = deque()
        self._in_flight: dict[int, int] = {}  # sequence -> evictions it carried
        self._sequence = 0
        self._rng = random.Random(seed)
        self._sent_at: dict[int, float] = {}
        self._healthy = False  # the current stream got an acknowledgement
        # deltas, this stream's: the last report the scheduler acknowledged as a base (sequence, report), the
        # reports sent since that may become one, reports since the last full one
        self._base: tuple[int, NodeReport] | None = None
        self._unacked_reports: dict[int, NodeReport] = {}
        self._since_full = 0
        self.connected = False
        self.stats = {"sent": 0, "acked": 0, "refused": 0, "connects": 0, "evictions_dropped": 0, "deltas": 0}
        self.last_refusal: str | None = None
        self.on_ack: Callable[[int, int, float], None] | None = None  # (sequence, code, seconds to ack)

    # -- what the agent calls --------------------------------------------------------------------
    def publish(self, report: NodeReport) -> None:
        """Make ``report`` the latest; its evictions are kept until a report carrying them is acknowledged."""
        with self._lock:
            for e in report.colocation.evictions:
                if len(self._evictions) >= self.options.max_pending_evictions:
                    self._evictions.popleft()
                    self.stats["evictions_dropped"] += 1
                self._evictions.append(e)
            self._latest, self._published_at = report, time.monotonic()
        if self._quiet:
            log.warning("the agent published a report again: sending reports again")
            self._quiet = False

    @property
    def pending_evictions(self) -> int:
        return len(self._evictions)

    # -- the stream ---------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Keep a stream open until ``stop`` is set, reconnecting with backoff.

        The backoff starts again from its first step after a stream that was
        acknowledged, and stays under one interval for a while after that, so a
        scheduler restart costs a short wait, not the tail of an earlier outage.
        """
        attempt = 0
        lost_at = -float("inf")
        while not stop.is_set():
            channel = None
            self._healthy = False
            try:
                # inside the try: certificates not mounted yet (a Secret still being filled) are a retry, not
                # a silent end of reporting
                channel = self._shared_channel or channel_for(self.options)
                await self._stream(channel, stop)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.PERMISSION_DENIED:
                    log.error("scheduler refused this node's identity: %s", exc.details())
                else:
                    log.info("stream to %s ended: %s %s", self.options.target, exc.code().name, exc.details())
            except (OSError, ValueError) as exc:
                log.warning("cannot connect to %s: %s", self.options.target, exc)
            finally:
                self.connected = False
                if self._shared_channel is None and channel is not None:
                    await channel.close(None)  # no grace: what is still in flight is cancelled
            if stop.is_set():
                break
            if self._healthy:
                attempt, lost_at = 0, time.monotonic()
            else:
                attempt += 1
            recent = time.monotonic() - lost_at < self.options.fast_reconnect_window
            ceiling = min(self.options.backoff_max, self.options.interval) if recent else self.options.backoff_max
            delay = backoff_delay(attempt, self.options.backoff_initial, ceiling, self._rng)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                pass

    async def _stream(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        """One stream: the latest report at once, then — once the scheduler acknowledged it — every interval
        (at a steady pace, not an interval after each write)."""
        call = open_stream(channel)
        self.stats["connects"] += 1
        self._in_flight.clear()
        self._sent_at.clear()
        self._base, self._since_full = None, 0  # a new stream starts with a full report
        self._unacked_reports.clear()
        reader = asyncio.create_task(self._read(call))
        stopper = asyncio.create_task(stop.wait())
        # between reports: one future, woken by the interval's timer or by the stream or the client ending (what
        # asyncio.wait does, without its per-call set-up: a simulated fleet runs thousands of these)
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()

        def poke(_: object = None) -> None:
            if not wake.done():
                wake.set_result(None)

        reader.add_done_callback(poke)
        stopper.add_done_callback(poke)
        next_at, sent_at = loop.time(), -float("inf")
        try:
            while not reader.done() and not stopper.done():
                # until the stream's first report is acknowledged, nothing more (but a retry after ten
                # intervals): a scheduler still accepting thousands of reconnecting streams would find a
                # backlog of stale reports queued on each, and read them all
                if (self._healthy or loop.time() - sent_at >= 10 * self.options.interval) and await self._send(call):
                    sent_at = loop.time()
                if reader.done() or stopper.done():  # ended while the report was being written
                    break
                # every interval from the stream's start; a late report is not made up for with a burst
                next_at = max(next_at + self.options.interval, loop.time())
                wake = loop.create_future()
                timer = loop.call_at(next_at, poke)
                try:
                    await wake
                finally:
                    timer.cancel()
        finally:
            stopper.cancel()
            if not reader.done():
                call.cancel()
            try:
                await reader  # re-raises how the stream ended (AioRpcError), unless we cancelled it
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # this task itself is being cancelled: never swallow that (asyncio.run would wait for ever)

    async def _send(self, call: ReportStream) -> bool:
        """Send the latest report (False: none recent enough to send)."""
        with self._lock:
            latest = self._latest
            if latest is None or not self._recent():
                return False
            self._sequence += 1
            evictions = list(self._evictions)
            report = dataclasses.replace(
                latest, identity=dataclasses.replace(latest.identity, sequence=self._sequence),
                colocation=dataclasses.replace(latest.colocation, evictions=evictions))
            self._in_flight[self._sequence] = len(evictions)
        delta = self._delta(report) if self.options.deltas else None
        message = codec.report_to_pb(report, delta)
        self._sent_at[report.identity.sequence] = time.monotonic()
        await call.write(message)
        self.stats["sent"] += 1
        return True

    def _delta(self, report: NodeReport) -> ReportDelta:
        """How to send ``report``: as a delta on the acknowledged base, or whole (``base_sequence`` 0, which tells
        the scheduler to keep it as a base); keeps it as a base to be."""
        sequence, options = report.identity.sequence, self.options
        unacked = self._unacked_reports
        unacked[sequence] = report
        while len(unacked) > options.delta_span:  # no ack for a while: those will not become bases
            del unacked[next(iter(unacked))]
        base = self._base
        if base is None or self._since_full >= options.full_every - 1 or sequence - base[0] > options.delta_span:
            self._since_full = 0
            return ReportDelta(0)
        self._since_full += 1
        self.stats["deltas"] += 1
        return delta_for(report, base[1], base[0])

    def _recent(self) -> bool:
        """Whether the latest report may still be sent (called under the lock)."""
        age = time.monotonic() - self._published_at
        if age <= self.options.report_lifetime:
            return True
        if not self._quiet:
            log.warning("the agent has published no report for %.0fs: not sending its last one again (the "
                        "scheduler will read this node's figures as unknown until the agent reports again)", age)
            self._quiet = True
        return False

    async def _read(self, call: ReportStream) -> None:
        async for message in call:
            directive = codec.directive_from_pb(message)
            if directive.ack is not None:
                self._acknowledge(directive.ack)
                self._healthy = self.connected = True
            self.on_directive(directive)

    def _acknowledge(self, ack: Ack) -> None:
        """An OK ack covers this report and every earlier one on the stream (refusals are acked at once); with
        ``deltas`` it makes the report the base of the deltas that follow.  After a refusal the next report is
        sent whole."""
        sequence, code, message = ack.sequence, ack.code, ack.message
        carried = self._in_flight.pop(sequence, 0)
        unacked = self._unacked_reports
        if unacked:
            acked = unacked.pop(sequence, None) if code == 0 else None
            if acked is not None and ack.deltas:
                self._base = (sequence, acked)
            for s in [s for s in unacked if s < sequence]:
                del unacked[s]
        if code != 0:
            self._base = None
        sent = self._sent_at.pop(sequence, None)
        if code == 0:
            self.stats["acked"] += 1
            with self._lock:  # the evictions that report carried have arrived (earlier ones carried fewer)
                for _ in range(min(carried, len(self._evictions))):
                    self._evictions.popleft()
                self._in_flight = {s: max(0, n - carried) for s, n in self._in_flight.items() if s > sequence}
                self._sent_at = {s: t for s, t in self._sent_at.items() if s > sequence}
        else:
            self.stats["refused"] += 1
            if message != self.last_refusal:
                log.warning("scheduler refused report %d: %s", sequence, message)
            self.last_refusal = message
        if self.on_ack and sent is not None:
            self.on_ack(sequence, code, time.monotonic() - sent)
