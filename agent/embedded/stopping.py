"""Stopping a pod: the grace-period state machine behind STOP, EVICT and the agent's shutdown.

A stop begins with SIGTERM to each container's process group (and every
process in its cgroups) and a deadline, the grace period from now
(:attr:`~agent.embedded.records.Stopping.deadline`, saved with the record).
Each step (:func:`advance`, from the runtime's tick) notices exits, SIGKILLs
once the deadline has passed — again each step while anything is left — and,
once nothing runs, removes the pod's cgroups and finishes by its kind:

* ``stop`` (deleted, or its final phase recorded): the pod is dropped;
* ``evict``: it stays, Failed with reason Evicted and the eviction's reason;
* ``shutdown`` (the agent's): it stays with its phase, to start again with the agent.

A pod already leaving that is stopped again is dropped when gone, with the
shorter of the two deadlines.  :func:`shutdown` stops every pod at once and
waits for them.
"""

from __future__ import annotations

import logging
import threading
import time

from agent.embedded import exits, podcgroups, podsetup
from agent.embedded.context import LOGGER, RuntimeContext
from agent.embedded.held import Held, HeldPod
from agent.embedded.phase import ACTIVE, EVICTED, TERMINATED, WAITING
from agent.embedded.process import SIGKILL, SIGTERM, signal_container
from agent.embedded.records import EVICT, SHUTDOWN, STOP, Stopping
from agent.embedded.spec import DEFAULT_GRACE

log = logging.getLogger(LOGGER)

SHUTDOWN_SLACK = 10.0  # seconds past the longest grace after which a shutdown gives up waiting
SHUTDOWN_POLL = 0.02


def own_grace(pod: HeldPod) -> float:
    """The pod's own grace period (``terminationGracePeriodSeconds``; the default for a pod that never parsed)."""
    return pod.spec.grace_seconds if pod.spec is not None else DEFAULT_GRACE


def stop(host: RuntimeContext, held: Held, pod: HeldPod, grace: float | None, reason: str) -> None:
    """STOP: TERM, KILL after ``grace`` (None: the pod's own), then dropped once nothing of it runs."""
    st = pod.record.stopping
    if st is not None:  # already leaving (an eviction): now it is dropped when gone
        st.kind = STOP if st.kind != SHUTDOWN else st.kind
        if grace is not None:
            st.deadline = min(st.deadline, host.clock() + grace)
        pod.dirty = True
        return
    if (pod.terminal or pod.spec is None) and cleanup(host, pod):
        held.drop(pod)
        return
    begin(host, held, pod, STOP, reason or "deleted", grace)


def evict(host: RuntimeContext, held: Held, pod: HeldPod, reason: str, grace: float | None, at_most: float | None) -> None:
    """EVICT: stopped as by STOP, then kept Failed/Evicted with ``reason``; a pod finished or leaving is left be."""
    if pod.terminal or pod.record.stopping is not None:
        return
    if grace is None:
        grace = own_grace(pod)
    if at_most is not None:
        grace = min(grace, at_most)
    log.warning("local runtime: evicting pod %s: %s", pod.record.key, reason)
    begin(host, held, pod, EVICT, reason, grace)


def begin(host: RuntimeContext, held: Held, pod: HeldPod, kind: str, reason: str, grace: float | None) -> None:
    """Start stopping the pod: SIGTERM now (SIGKILL too for a grace of 0), the deadline saved."""
    if grace is None:
        grace = own_grace(pod)
    now = host.clock()
    st = pod.record.stopping = Stopping(kind, reason, now + max(0.0, grace))
    held.save(pod)  # before any signal: an agent killed from here on finishes this stop when it comes back
    log.info("local runtime: stopping pod %s (%s), grace %gs", pod.record.key, kind, grace)
    _signal(host, pod, SIGTERM)
    if grace <= 0:
        _signal(host, pod, SIGKILL)
        st.killed = True
    advance(host, held, pod, now)
    held.save(pod)


def _signal(host: RuntimeContext, pod: HeldPod, sig: int) -> None:
    for c in pod.record.containers:
        signal_container(pod.handles.get(c.name), podcgroups.members(host.backend, c.cgroup), sig)


def advance(host: RuntimeContext, held: Held, pod: HeldPod, now: float) -> bool:
    """One step of a stop: notice exits, SIGKILL after the deadline, finish once nothing runs. True: done."""
    st = pod.record.stopping
    if st is None:  # not being stopped: nothing to advance
        return True
    exits.poll(host, pod, now)
    running = any(c.state == ACTIVE for c in pod.record.containers) or \
        any(podcgroups.members(host.backend, c.cgroup) for c in pod.record.containers)
    if running:
        if now >= st.deadline:
            if not st.killed:
                log.warning("local runtime: pod %s did not stop within its grace period; killing it",
                            pod.record.key)
            _signal(host, pod, SIGKILL)  # again each tick while anything is left
            st.killed, pod.dirty = True, True
        return False
    if not cleanup(host, pod):
        return False
    _finish(held, pod, st, now)
    return True


def _finish(held: Held, pod: HeldPod, st: Stopping, now: float) -> None:
    r = pod.record
    log.info("local runtime: pod %s stopped (%s)", r.key, st.kind)
    if st.kind == STOP:
        held.drop(pod)
        return
    for c in r.containers:  # a restart that was due never comes now
        if c.state == WAITING and st.kind == EVICT:
            c.state, c.finished_at = TERMINATED, c.finished_at or now
    r.stopping, pod.dirty = None, True
    if st.kind == EVICT:
        exits.fail(pod, EVICTED, st.reason)
    else:
        exits.update_phase(pod)
    held.save(pod)


def cleanup(host: RuntimeContext, pod: HeldPod) -> bool:
    """Remove the pod's cgroups, network namespace and files (nothing of it runs); False while the kernel still
    counts tasks."""
    path = pod.record.cgroup
    if not path:
        return podsetup.release(host, pod)
    if any(podcgroups.members(host.backend, c.cgroup) for c in pod.record.containers):
        for c in pod.record.containers:
            signal_container(None, podcgroups.members(host.backend, c.cgroup), SIGKILL)
        return False
    if not podcgroups.remove(host.backend, path):
        return False
    pod.record.cgroup, pod.dirty = "", True
    return podsetup.release(host, pod)


def shutdown(host: RuntimeContext, held: Held, grace: float | None, hurry: threading.Event) -> None:
    """Stop every pod (at most ``grace`` seconds each, else its own) and wait until nothing runs.

    ``hurry`` set meanwhile (a second Ctrl-C) makes every deadline now.  Gives up
    :data:`SHUTDOWN_SLACK` seconds after the longest grace (SIGKILLed by then, or
    stuck in the kernel); what is left is logged."""
    now, longest = host.clock(), 0.0
    for pod in held:
        wait = max(0.0, own_grace(pod) if grace is None else min(own_grace(pod), grace))
        if pod.record.stopping is not None:
            pod.record.stopping.deadline = min(pod.record.stopping.deadline, now + wait)
        elif pod.record.cgroup:
            begin(host, held, pod, SHUTDOWN, "agent shutdown", wait)
        longest = max(longest, wait)
    limit = time.monotonic() + longest + SHUTDOWN_SLACK
    while True:
        now = host.clock()
        pending = [p for p in held if p.record.stopping is not None]
        if not pending or time.monotonic() > limit:
            break
        for pod in pending:
            st = pod.record.stopping
            if hurry.is_set() and st is not None:
                st.deadline = min(st.deadline, now)
            advance(host, held, pod, now)
        time.sleep(SHUTDOWN_POLL)
    for pod in list(held):
        if pod.record.stopping is not None or not cleanup(host, pod):
            log.error("local runtime: pod %s still has processes or cgroups after shutdown", pod.record.key)
        held.save_if_dirty(pod)
