"""Leader election on a ``coordination.k8s.io/v1`` Lease, so two scheduler replicas can run and only one binds.

The rules are client-go's:

* a replica takes the Lease when it does not exist, or when its holder has
  not renewed it for ``lease_duration`` seconds *as this replica observed it*
  (the time a change of the record was last seen, on this replica's clock:
  no trust in other replicas' clocks);
* every write is an update at the resourceVersion read (optimistic
  concurrency): of two replicas racing, one gets 409 and stays follower;
* the leader renews every ``retry_period``; if it cannot renew for
  ``renew_deadline`` (shorter than ``lease_duration``) it stops leading at
  once, before any other replica may take over — so binding never overlaps,
  and the Binding subresource's own 409 catches anything in flight.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from proto.errors import InputError

log = logging.getLogger(__name__)


def _now() -> datetime:
    """The Lease's MicroTime fields are datetimes in the client's models; it writes them as RFC 3339."""
    return datetime.now(UTC)


class LeaderElector:
    def __init__(self, api_client: Any, *, name: str, namespace: str, identity: str | None = None,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[bool], None] | None = None,
                 on_step: Callable[[bool], None] | None = None):
        from kubernetes import client

        if not retry_period < renew_deadline < lease_duration:
            raise InputError("leader election: need retry-period < renew-deadline < lease-duration, got "
                             f"{retry_period} / {renew_deadline} / {lease_duration}")
        self.api = client.CoordinationV1Api(api_client)
        self.name, self.namespace = name, namespace
        self.identity = identity or f"{_hostname()}_{uuid.uuid4().hex[:8]}"
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.clock = clock
        self.on_change = on_change or (lambda leading: None)
        self.on_step = on_step or (lambda leading: None)  # after every step, with whether this replica leads
        # every call returns well within the renew deadline, or counts as failed
        self.timeout = (min(5.0, renew_deadline / 2), renew_deadline / 2)
        self._leading = False
        self._renewed_at: float | None = None  # when this replica last renewed, as leader
        self._observed: tuple[str, float] | None = None  # (holder@renewTime, when we first saw it)
        self.transitions = 0

    @property
    def is_leader(self) -> bool:
        """Leading, and renewed recently enough that no other replica can have taken over."""
        return (self._leading and self._renewed_at is not None
                and self.clock() - self._renewed_at < self.renew_deadline)

    def run(self, stop: threading.Event) -> None:
        """Try to acquire, then renew, every ``retry_period`` until ``stop``.

        The lease is not given up here: the owner calls :meth:`release` once its
        own writes are done, so no other replica starts meanwhile.
        """
        while not stop.is_set():
            self.step()
            stop.wait(self.retry_period)

    def step(self) -> bool:
        """One attempt to acquire or renew; returns whether this replica leads afterwards."""
        started = self.clock()  # a renewal holds from when it was asked, not from when the answer came
        try:
            leading = self._try()
        except Exception as exc:
            log.warning("leader election: %s", exc)
            leading = False
        if leading:
            self._renewed_at = started
        if not (self._leading and not leading and self.is_leader):  # else: a failed renewal inside the deadline
            self._set(leading and self.is_leader_at(self.clock()))
        self.on_step(self._leading)
        return self._leading

    def is_leader_at(self, now: float) -> bool:
        return self._renewed_at is not None and now - self._renewed_at < self.renew_deadline

    def _set(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.warning("leader election: %s %s (lease %s/%s)", self.identity,
                        "is now the leader" if leading else "stopped leading", self.namespace, self.name)
            self.on_change(leading)

    def _try(self) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create()
        spec = lease.spec
        if spec is None:  # a Lease someone else created without one: not a lock this replica can read
            raise RuntimeError(f"lease {self.namespace}/{self.name} has no spec")
        holder = spec.holder_identity or ""
        record = f"{holder}@{spec.renew_time}"
        now = self.clock()
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, now)
        duration = spec.lease_duration_seconds or self.lease_duration
        if holder and holder != self.identity and now - self._observed[1] < duration:
            return False  # someone else holds it and renews it
        taking = holder != self.identity
        if taking:
            spec.acquire_time = _now()
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.renew_time = _now()
        spec.lease_duration_seconds = int(self.lease_duration)
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 409:
                return False  # another replica wrote first
            raise
        self.transitions += taking
        return True

    def _create(self) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                              spec=client.V1LeaseSpec(holder_identity=self.identity, acquire_time=_now(),
                                                      renew_time=_now(),
                                                      lease_duration_seconds=int(self.lease_duration),
                                                      lease_transitions=0))
        try:
            self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def release(self) -> None:
        """Shutting down as leader: clear the holder so a follower takes over without waiting out the lease."""
        if not self._leading:
            self.on_step(False)
            return
        self._set(False)
        self.on_step(False)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
            spec = lease.spec
            if spec is not None and spec.holder_identity == self.identity:
                spec.holder_identity = ""
                spec.lease_duration_seconds = 1
                self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.timeout)
        except Exception as exc:
            log.info("leader election: could not release the lease (%s); it expires by itself", exc)


def _hostname() -> str:
    import socket
    return socket.gethostname()
