"""The local runtime's rules, as tables and pure functions: pod phases, restarts, back-off.

Kubernetes' rules, as the kubelet applies them:

* a container that exits is restarted under ``restartPolicy`` Always (any exit
  code; the default) or OnFailure (a non-zero one), never under Never;
* restarts wait a back-off: 10 s, doubling per restart, at most 5 minutes; a
  container that ran ``reset_after`` (10 minutes) before exiting starts again at 10 s;
* the pod is Pending until a container was started, Running while any container
  runs or waits for its restart, then Succeeded when every container exited 0
  (reason Completed), else Failed (the first failed container's reason —
  Error, OOMKilled, StartError — and a message with its exit code);
* a pod evicted is Failed with reason Evicted; Succeeded and Failed are final.

Phase changes go through :func:`transition`, which refuses the ones the
table does not allow (a bug, never a silent change).
"""

from __future__ import annotations

from dataclasses import dataclass

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TRANSITIONS = {
    PENDING: frozenset({PENDING, RUNNING, SUCCEEDED, FAILED}),
    RUNNING: frozenset({RUNNING, SUCCEEDED, FAILED}),
    SUCCEEDED: frozenset({SUCCEEDED}),
    FAILED: frozenset({FAILED}),
}
TERMINAL = frozenset({SUCCEEDED, FAILED})

WAITING, ACTIVE, TERMINATED = "waiting", "running", "terminated"   # container states, as the report names them

COMPLETED, ERROR, OOM_KILLED, EVICTED, BACK_OFF = "Completed", "Error", "OOMKilled", "Evicted", "CrashLoopBackOff"
START_ERROR_EXIT = 128  # the exit code the kubelet reports for a container that could not be started


class InvalidTransition(ValueError):
    pass


def transition(current: str, new: str) -> str:
    """``new`` if the table allows it from ``current``; InvalidTransition otherwise."""
    if new not in TRANSITIONS.get(current, ()):
        raise InvalidTransition(f"pod phase {current} -> {new} is not allowed")
    return new


def restarts(policy: str, exit_code: int) -> bool:
    """Whether a container that exited with ``exit_code`` is started again under ``policy``."""
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


@dataclass(frozen=True)
class Backoff:
    initial: float = 10.0
    cap: float = 300.0
    reset_after: float = 600.0  # a run at least this long starts the back-off over

    def delay(self, step: int) -> float:
        """Seconds before restart number ``step + 1`` of a crash streak (step 0: the first restart)."""
        return min(self.cap, self.initial * (2 ** min(step, 40)))

    def next_step(self, step: int, ran_for: float) -> int:
        """The streak's step after a run of ``ran_for`` seconds: back to 0 after a long run."""
        return 0 if ran_for >= self.reset_after else step


@dataclass(frozen=True)
class ContainerView:
    """What the phase rule needs of one container."""

    name: str
    state: str                 # waiting, running, terminated
    exit_code: int = 0
    reason: str = ""           # terminated: Completed, Error, OOMKilled, StartError; waiting: CrashLoopBackOff
    message: str = ""
    attempted: bool = False    # started at least once (successfully or not)


def exit_reason(exit_code: int) -> str:
    return COMPLETED if exit_code == 0 else ERROR


def pod_phase(containers: list[ContainerView]) -> tuple[str, str, str]:
    """(phase, reason, message) of a pod whose containers stand as given."""
    if not any(c.attempted for c in containers):
        return PENDING, "", ""
    if any(c.state != TERMINATED for c in containers):
        backing_off = [c for c in containers if c.state == WAITING and c.reason == BACK_OFF]
        if backing_off:
            return RUNNING, BACK_OFF, backing_off[0].message
        return RUNNING, "", ""
    failed = [c for c in containers if c.exit_code != 0]
    if not failed:
        return SUCCEEDED, COMPLETED, ""
    first = failed[0]
    message = f"container {first.name} exited with code {first.exit_code}"
    if first.message:
        message += f": {first.message}"
    return FAILED, first.reason or ERROR, message
