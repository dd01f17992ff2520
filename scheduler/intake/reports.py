"""Report intake: what the scheduler does with each report on an agent's stream, without gRPC.

:class:`ReportIntake` owns the per-stream state (which node a stream speaks
for, its last sequence number), checks each report (identity, ordering,
content), keeps accepted ones in the cache and answers with a directive.
:mod:`scheduler.intake.server` is the gRPC glue.

What a report can and cannot do:

* A refused report changes nothing — not the cache, not its own stream's state,
  not another stream — and is answered with an ``INVALID_ARGUMENT`` ack of at
  most :data:`~scheduler.api.nodereport.MAX_MESSAGE` characters on the same
  stream, which stays open.  A stream takes its node (and replaces an older
  stream of that node) only with its first *accepted* report, so a client that
  sends a bad or stale report in a node's name never ends that node's stream.
* Only a bad stream is closed: one whose client certificate does not name the
  node it reports for (``PERMISSION_DENIED``, that stream only), one replaced
  by a newer stream whose report was accepted for the same node
  (``ALREADY_EXISTS``), and every stream of a replica that is not the leader.
* A report speaks only of its own node's pods.  Per-pod entries that name a
  pod the scheduler knows as bound to another node are dropped before the
  report is kept (``colocation.evictions``, ``runtime``), counted in
  ``scoria_scheduler_report_entries_ignored_total{field}`` and logged once per
  stream; the rest of the report is kept, since a pod that just moved is no
  reason to lose a node's figures.  ``load.pods`` is left as it is: its usage
  only ever counts toward the reporting node's own load (which that node
  reports anyway), and nothing reads it by uid.
* A delta report (:mod:`proto.delta`) is merged onto its base — one of the
  last two reports this stream acknowledged, which the stream keeps — and the
  merged report is checked and kept like a full one; the sections it took from
  the base are not checked again.  A delta whose base this stream does not
  hold is refused (reason ``delta``), and the agent sends a full report next.
  Every OK ack says the scheduler takes deltas (``Ack.deltas``); only a stream
  whose agent marks its full reports as from one that sends deltas keeps bases.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import grpc

from proto.codec import ReportDecoder
from proto.delta import ReportView, merged
from proto.model import Ack, Directive, NodeReport, QosProfile
from scheduler.api.nodereport import ReportLimits, bounded, check_report, shown
from scheduler.cluster.cache import ClusterCache
from scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

OK = grpc.StatusCode.OK.value[0]
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]


class CloseStream(Exception):
    """The stream must end with this status (not a bad report: a bad stream)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        message = bounded(message)
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class StreamState:
    """One agent stream: the node it speaks for (from its first report) and what it sent last."""

    allowed_names: frozenset[str] | None = None  # from the client certificate (mTLS); None: not checked
    node: str | None = None
    boot_id: str = ""
    last_sequence: int | None = None
    profile_digest: str | None = None
    checked_capacity: object = None  # key of the capacity last validated on this stream
    unacked: int = 0  # accepted reports since the last ack
    superseded: bool = False
    peer: str = ""
    warned_foreign: bool = False  # said once that this stream named another node's pods
    takes_deltas: bool = False  # its agent marks its full reports as from one that sends deltas: keep bases
    sent_delta: bool = False  # a delta came on this stream: its full reports are acked at once (new bases)
    # the reports this stream acknowledged last (at most KEPT_BASES), by sequence: what deltas are based on
    bases: dict[int, Base] = field(default_factory=dict)


class Base(NamedTuple):
    """An acknowledged report a delta may be based on: as kept (a received message or a merged delta), and the
    key of its capacity."""

    report: Any
    capacity_key: Any  # bytes, as ReportDecoder.capacity_key gives them


#: acknowledged reports a stream keeps as bases: the agent's latest, and the one before for the deltas it sent
#: while the newer ack was on its way
KEPT_BASES = 2

#: a section that passed its checks before (taken from the base): (capacity, devices, pods, runtime)
_NOTHING_CHECKED = (False, False, False, False)


class ProfileSource:
    """The QoS profile file the scheduler hands to agents, re-read when it changes.

    Asked on every accepted report, so the file is looked at (one stat) at most
    every ``recheck`` seconds; a change reaches agents that much later at most.
    """

    def __init__(self, path: str | Path, *, recheck: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.path = Path(path)
        self.recheck, self.clock = recheck, clock
        self._stamp: tuple[float, int] | None = None
        self._checked_at: float | None = None
        self._profile: QosProfile | None = None
        self.current()

    def current(self) -> QosProfile | None:
        now = self.clock()
        if self._checked_at is not None and now - self._checked_at < self.recheck:
            return self._profile
        self._checked_at = now
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime, stat.st_size)
            if stamp != self._stamp:
                text = self.path.read_text()
                digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                self._profile = QosProfile(name=self.path.stem, digest=digest, yaml=text)
                self._stamp = stamp
        except OSError as exc:  # keep handing out the last good profile
            log.warning("cannot read QoS profile %s: %s; keeping the previous one", self.path, exc)
        return self._profile


@dataclass
class ReportIntake:
    cache: ClusterCache
    metrics: SchedulerMetrics
    register_nodes: bool = False
    limits: ReportLimits = field(default_factory=ReportLimits)
    profiles: ProfileSource | None = None
    clock: Callable[[], float] = time.time
    ack_every: int = 10
    # False while this replica does not schedule (not the leader): streams are closed so agents reconnect
    # to the one that does, and a stale replica never holds the reports the leader needs
    accepting: Callable[[], bool] = lambda: True
    # embedded mode: what the reporting node's agent should start, stop or evict (scheduler.modes.embedded.mode)
    pod_actions: Callable[[str, Any], list] | None = None
    streams: dict[str, StreamState] = field(default_factory=dict)

    def receive_message(self, stream: StreamState, message: Any, decoder: ReportDecoder) -> Directive | None:
        """A received ``NodeReport`` message, full or delta: :meth:`receive` with what it needs to decode it and
        (a delta) merged onto its base.  ``decoder`` is the stream's own."""
        d = message.delta
        if not d.base_sequence:
            key = decoder.capacity_key(message)
            return self._receive(stream, message, partial(decoder.decode, message, key), key,
                                 takes_deltas=stream.takes_deltas or message.HasField("delta"))
        base = stream.bases.get(d.base_sequence)
        if base is None:
            problem = (f"delta.base_sequence: {d.base_sequence} is not a report this stream acknowledged and "
                       "keeps; send the whole report", "delta")
            return self._receive(stream, message, None, None, problem=problem)
        view = merged(message, base.report)
        key = base.capacity_key if d.same_capacity else decoder.capacity_key(message)
        return self._receive(stream, view, partial(decoder.decode, view, key), key,
                             checked=(same_capacity := key == base.capacity_key, d.same_devices and same_capacity,
                                      d.same_pods, d.same_runtime))

    def receive(self, stream: StreamState, report: Any, decode: Callable[[], NodeReport] | None = None,
                capacity_key: object = None) -> Directive | None:
        """Check and keep one report; answer with a directive, or None when nothing needs saying.

        ``report`` is a NodeReport, or a received message with the same field
        names plus ``decode`` to build the NodeReport if it is ever needed and
        ``capacity_key`` (equal keys: the capacity did not change, and its
        checks are not repeated).  Raises CloseStream for bad streams.
        """
        return self._receive(stream, report, decode, capacity_key)

    def _receive(self, stream: StreamState, report: Any, decode: Callable[[], NodeReport] | None,
                 capacity_key: object, *, checked: tuple[bool, bool, bool, bool] | None = None,
                 problem: tuple[str, str] | None = None, takes_deltas: bool = False) -> Directive | None:
        """:meth:`receive`; ``checked``: a merged delta's sections taken from its base (None: a full report),
        ``problem``: why it is refused already, ``takes_deltas``: a full report marked as from an agent that
        sends deltas."""
        if not self.accepting():
            raise CloseStream(grpc.StatusCode.UNAVAILABLE, "this scheduler replica is not the leader: reconnect")
        if stream.superseded:
            raise CloseStream(grpc.StatusCode.ALREADY_EXISTS,
                              f"a newer stream from node {stream.node} replaced this one")
        now = self.clock()
        name = report.identity.node_name
        if stream.allowed_names is not None and name not in stream.allowed_names:
            self.metrics.report_refused("identity")
            raise CloseStream(grpc.StatusCode.PERMISSION_DENIED,
                              f"identity.node_name: the client certificate does not name node {shown(name)}")
        if capacity_key is None:
            capacity_key = id(report.capacity)
        if problem is None:
            problem = self._problem(stream, report, now, capacity_key, checked)
        dropped: list[tuple[str, list[str]]] = []
        if problem is None:
            dropped = self._drop_foreign(name, report)
            if not self.cache.accept_report(report, now, register=self.register_nodes, decode=decode,
                                            capacity_key=capacity_key):
                problem = (f"identity.node_name: node {name!r} is unknown to the scheduler (create the Node, or run "
                           "the scheduler with --register-nodes)", "unknown-node")
        seq = report.identity.sequence
        if problem is not None:
            message, reason = bounded(problem[0]), problem[1]
            self.metrics.report_refused(reason)
            log.debug("refused report %d from %s: %s", seq, stream.peer or shown(name), message)
            return Directive(ack=Ack(seq, INVALID_ARGUMENT, message))
        # accepted: only now does the stream take its node (and replace an older stream of it)
        first = stream.last_sequence is None
        self._claim(stream, name)
        stream.boot_id, stream.last_sequence = report.identity.boot_id, seq
        stream.checked_capacity = capacity_key
        if checked is not None:
            stream.sent_delta = True
        elif takes_deltas:
            stream.takes_deltas = True
        if dropped:
            self._ignored(stream, name, dropped)
        evictions = len(report.colocation.evictions)
        self.metrics.report_accepted(max(0.0, now - report.identity.sample_time_ns / 1e9), evictions=evictions)
        profile = self._profile_update(stream)
        actions = self.pod_actions(name, report) if self.pod_actions is not None else []
        stream.unacked += 1
        # evictions (ignored ones too) are acked at once: the agent resends them until they are
        evictions_sent = evictions or any(field_name == "colocation.evictions" for field_name, _ in dropped)
        # a full report from an agent that sends deltas: acked at once, it is the base of the deltas to come
        new_base = stream.sent_delta and checked is None
        if (first or evictions_sent or profile is not None or actions or new_base
                or stream.unacked >= self.ack_every):
            stream.unacked = 0
            self._keep_base(stream, report, capacity_key)
            return Directive(ack=Ack(seq, OK, deltas=True), qos_profile=profile, pod_actions=actions)
        return None

    @staticmethod
    def _keep_base(stream: StreamState, report: Any, capacity_key: object) -> None:
        """An acknowledged report becomes a base for deltas on a stream whose agent sends them (it marks its
        full reports so); an older agent's stream keeps no second copy of its reports (a full report is a few
        kilobytes; 10,000 nodes)."""
        if not stream.takes_deltas or type(report) is NodeReport:
            return
        bases = stream.bases
        bases[report.identity.sequence] = Base(report, capacity_key)
        while len(bases) > KEPT_BASES:
            del bases[min(bases)]

    def _claim(self, stream: StreamState, name: str) -> None:
        """The stream's first accepted report: it speaks for ``name`` from now on, and replaces an older one."""
        if stream.node is not None:
            return
        old = self.streams.get(name)
        if old is not None and old is not stream:
            old.superseded = True
        self.streams[name] = stream
        stream.node = name
        self.metrics.agents_connected.set(len(self.streams))

    def _problem(self, stream: StreamState, report: Any, now: float, capacity_key: object,
                 checked: tuple[bool, bool, bool, bool] | None) -> tuple[str, str] | None:
        ident = report.identity
        if stream.node is not None and ident.node_name != stream.node:  # None: nothing accepted yet
            return (f"identity.node_name: this stream reports for node {stream.node!r}, not {shown(ident.node_name)}",
                    "identity")
        if (stream.last_sequence is not None and ident.boot_id == stream.boot_id
                and ident.sequence <= stream.last_sequence):
            return (f"identity.sequence: {ident.sequence} is not after {stream.last_sequence}, the last one on "
                    "this stream", "order")
        kept = self.cache.telemetry.get(ident.node_name)
        if kept is not None and ident.sample_time_ns < kept.sample_time_ns:
            return ("identity.sample_time_ns: older than the report already kept for this node", "order")
        capacity, devices, pods, runtime = checked or _NOTHING_CHECKED
        message = check_report(report, now_ns=int(now * 1e9), limits=self.limits,
                               capacity_checked=capacity or capacity_key == stream.checked_capacity,
                               devices_checked=devices, pods_checked=pods, runtime_checked=runtime)
        if message:
            return message, "content"
        return None

    def _drop_foreign(self, node: str, report: Any) -> list[tuple[str, list[str]]]:
        """Drop the per-pod entries that name a pod bound to another node (see the module docstring);
        which, by field.

        Evictions are rare and the runtime list exists only in embedded mode, so
        this costs nothing on most reports.  The entries are deleted from the
        received report itself (a protobuf repeated field or a list), before
        anything keeps it; a merged delta gets a runtime list of its own instead
        (its list may be its base's).
        """
        pods = self.cache.pods
        lists: tuple[tuple[str, Any, Callable[[Any], str]], ...] = (
            ("colocation.evictions", report.colocation.evictions, _eviction_uid),
            ("runtime", getattr(report, "runtime", ()), _runtime_uid))
        dropped = []
        for field_name, entries, uid_of in lists:
            if not len(entries) or not pods:
                continue
            foreign = [k for k, entry in enumerate(entries)
                       if (pod := pods.get(uid_of(entry))) is not None and pod.node_name and pod.node_name != node]
            if foreign:
                dropped.append((field_name, [uid_of(entries[k]) for k in foreign]))
                if type(report) is ReportView and field_name == "runtime":  # maybe the base's list: leave it be
                    gone = set(foreign)
                    report.runtime = [e for k, e in enumerate(entries) if k not in gone]
                    continue
                for k in reversed(foreign):
                    del entries[k]
        return dropped

    def _ignored(self, stream: StreamState, node: str, dropped: list[tuple[str, list[str]]]) -> None:
        """Count what an accepted report said of other nodes' pods; say so once per stream."""
        for field_name, uids in dropped:
            self.metrics.report_entries_ignored(field_name, len(uids))
            if not stream.warned_foreign:
                stream.warned_foreign = True
                log.warning("node %s reported %d %s entr%s for pods bound to other nodes (%s): ignored "
                            "(said once per stream)", node, len(uids), field_name, "y" if len(uids) == 1 else "ies",
                            shown(uids))

    def _profile_update(self, stream: StreamState) -> QosProfile | None:
        profile = self.profiles.current() if self.profiles else None
        if profile is None or profile.digest == stream.profile_digest:
            return None
        stream.profile_digest = profile.digest
        return profile

    def release(self, stream: StreamState) -> None:
        """The stream ended: forget it (unless a newer stream already took its node)."""
        if stream.node is not None and self.streams.get(stream.node) is stream:
            del self.streams[stream.node]
            self.metrics.agents_connected.set(len(self.streams))

    def count_stale(self) -> int:
        now = self.clock()
        stale = sum(1 for t in list(self.cache.telemetry.values()) if t.stale(now, self.cache.stale_intervals))
        self.metrics.stale_nodes.set(stale)
        return stale


def _eviction_uid(entry: Any) -> str:
    return str(entry.pod_uid)


def _runtime_uid(entry: Any) -> str:
    return str(entry.uid)
