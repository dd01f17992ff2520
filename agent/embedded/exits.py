"""What happens when a container ends: its exit noticed, its restart decided, the pod's phase updated.

The exit code comes from the process the agent started, else from the
wrapper's exit file (an exit while the agent was down), else it is unknown
(137, as the kubelet says); a SIGKILL while the cgroup's OOM kill count rose
is OOMKilled.  A container that may start again under the pod's
``restartPolicy`` waits its back-off (:class:`~agent.embedded.phase.Backoff`);
during a stop it does not, and during the agent's shutdown it waits for the
agent's next start.  Phases change only through the table of :mod:`.phase`.
"""

from __future__ import annotations

import logging

from agent.embedded import podcgroups
from agent.embedded.context import LOGGER, RuntimeContext
from agent.embedded.held import HeldPod
from agent.embedded.phase import (
    ACTIVE,
    BACK_OFF,
    FAILED,
    OOM_KILLED,
    START_ERROR_EXIT,
    TERMINAL,
    TERMINATED,
    WAITING,
    ContainerView,
    InvalidTransition,
    exit_reason,
    pod_phase,
    restarts,
    transition,
)
from agent.embedded.podns import SETUP_FAILED
from agent.embedded.process import JOIN_FAILED, SIGKILL, Handle, signal_container
from agent.embedded.records import SHUTDOWN, ContainerRecord
from agent.embedded.spec import START_ERROR

log = logging.getLogger(LOGGER)

UNKNOWN_EXIT = 137  # what the kubelet reports for a container whose end it did not see


def poll(host: RuntimeContext, pod: HeldPod, now: float) -> None:
    """Notice the containers that ended since the last look."""
    for c in pod.record.containers:
        if c.state != ACTIVE:
            continue
        handle = pod.handles.get(c.name)
        if handle is not None and handle.alive():
            continue
        code, reason, message = _exit_of(host, pod, c, handle)
        strays = podcgroups.members(host.backend, c.cgroup)
        if strays:  # the main process is gone: what it left behind goes too, as with a container's pid 1
            signal_container(None, strays, SIGKILL)
        if pod.record.stopping is not None and pod.record.stopping.kind == SHUTDOWN and not message:
            message = "stopped by the agent's shutdown"
        exited(host, pod, c, code, now, reason=reason, message=message)
        log.info("local runtime: pod %s container %s exited with code %d%s", pod.record.key, c.name, code,
                 f" ({reason})" if reason else "")


def exited(host: RuntimeContext, pod: HeldPod, c: ContainerRecord, code: int, now: float, *, reason: str = "",
           message: str = "") -> None:
    """Record that container ``c`` ended with ``code``, and decide its restart."""
    ran_for = max(0.0, now - c.started_at) if c.started_at else 0.0
    pod.handles.pop(c.name, None)
    c.state, c.exit_code, c.finished_at, c.pid, c.pid_start = TERMINATED, code, now, 0, 0.0
    c.reason, c.message = reason or exit_reason(code), message
    # kept apart from what follows (a back-off, the next run): kubectl's Last State after a restart
    c.prior_exit, c.last_exit = c.last_exit, {"exit_code": code, "reason": c.reason, "message": message,
                                              "started_at": c.started_at, "finished_at": now}
    pod.dirty = True
    stopping = pod.record.stopping
    if stopping is not None and stopping.kind != SHUTDOWN:
        return
    if pod.spec is None or not restarts(pod.spec.restart_policy, code):
        return
    if stopping is not None:  # the agent's shutdown: starts again when the agent does, as after a reboot
        c.state, c.reason, c.next_start_at = WAITING, BACK_OFF, now
        c.message = f"restarting container {c.name} after the agent's shutdown"
        return
    step = host.backoff.next_step(c.backoff_step, ran_for)
    delay = host.backoff.delay(step)
    c.backoff_step = step + 1
    c.state, c.reason, c.next_start_at = WAITING, BACK_OFF, now + delay
    c.message = f"back-off {delay:g}s restarting container {c.name} (exited with code {code}" + \
                (f": {message})" if message else ")")


def _exit_of(host: RuntimeContext, pod: HeldPod, c: ContainerRecord, handle: Handle | None) -> tuple[int, str, str]:
    text = host.state.read_exit(pod.record.uid, c.name)
    if text == JOIN_FAILED:
        return START_ERROR_EXIT, START_ERROR, f"could not enter cgroup {c.cgroup}"
    if text == SETUP_FAILED:
        return START_ERROR_EXIT, START_ERROR, "could not set up the pod's namespaces (its log says why)"
    if handle is not None and handle.returncode is not None:
        code = handle.returncode
    elif text is not None and text.lstrip("-").isdigit():
        code = int(text)
    elif pod.record.stopping is not None and pod.record.stopping.killed:
        return UNKNOWN_EXIT, "", "killed after its grace period"
    else:
        return UNKNOWN_EXIT, "", ("exit status unknown: the process was gone when the agent looked "
                                  "(killed together with its wrapper, or the machine restarted)")
    if code == 128 + int(SIGKILL) and oom_kills(host, pod, c) > c.oom_kills:
        return code, OOM_KILLED, "killed by the kernel's OOM killer (memory limit)"
    return code, "", ""


def oom_kills(host: RuntimeContext, pod: HeldPod, c: ContainerRecord) -> int:
    """OOM kills counted so far in the container's cgroup and its pod's."""
    return podcgroups.oom_kills(host.backend, c.cgroup) + podcgroups.oom_kills(host.backend, pod.record.cgroup)


def update_phase(pod: HeldPod) -> None:
    """The pod's phase as its containers now stand (not while it is being stopped, never out of a final one)."""
    r = pod.record
    if r.stopping is not None or pod.terminal:
        return
    phase, reason, message = pod_phase([ContainerView(c.name, c.state, c.exit_code, c.reason, c.message,
                                                      c.attempted) for c in r.containers])
    if (phase, reason, message) == (r.phase, r.reason, r.message):
        return
    try:
        r.phase = transition(r.phase, phase)
    except InvalidTransition as exc:
        log.error("local runtime: pod %s: %s", r.key, exc)
        return
    r.reason, r.message, pod.dirty = reason, message, True
    if phase in TERMINAL:
        log.info("local runtime: pod %s %s (%s)%s", r.key, phase, reason, f": {message}" if message else "")


def fail(pod: HeldPod, reason: str, message: str) -> None:
    """The pod becomes Failed with ``reason`` and ``message``, as the phase table allows."""
    log.error("local runtime: pod %s failed: %s: %s", pod.record.key, reason, message)
    try:
        pod.record.phase = transition(pod.record.phase, FAILED)
    except InvalidTransition as exc:
        log.error("local runtime: pod %s: %s", pod.record.key, exc)
        return
    pod.record.reason, pod.record.message, pod.dirty = reason, message, True
