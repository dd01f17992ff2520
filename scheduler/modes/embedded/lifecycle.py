"""Node lifecycle in embedded mode, as Kubernetes runs it: pure decisions, applied by :mod:`.mode`.

What kube-controller-manager's node lifecycle controller, its taint-eviction controller and
kube-apiserver's ``DefaultTolerationSeconds`` admission plugin do on a cluster, for nodes that exist
because an agent reports:

* **Conditions.**  A node is *Ready* while its agent reports and runs pods.  One whose agent has not
  reported for the grace period (``--node-monitor-grace-period``, 40 s as Kubernetes' default) is
  *Unknown* (``NodeStatusUnknown``); one whose agent reports but runs no pods — ``agent run --dry-run``,
  or an agent without ``--embedded`` — is *NotReady* (``AgentNotRunningPods``).  A node the store
  remembers and no agent has reported for since the scheduler started is *Unknown*
  (``NodeStatusNeverUpdated``) from the start: nothing is placed there until its agent is heard, but its
  pods are left as they are for one grace period, as its agent may simply be reconnecting.
* **Taints.**  Unknown carries ``node.kubernetes.io/unreachable``, NotReady
  ``node.kubernetes.io/not-ready``, each with ``NoSchedule`` and ``NoExecute``, from when the
  condition began.  A node that is not Ready takes no new pod whatever the pod tolerates (Volcano's
  snapshot leaves such nodes out).
* **Pods on it** turn *Unknown* (reason ``NodeLost``, or ``NodeNotReady``) once the condition is set.
* **Eviction** (the taint manager): a pod that does not tolerate a ``NoExecute`` taint of its node is
  evicted at once; one that tolerates them all stays for the least ``tolerationSeconds`` of the
  tolerations it uses (for ever when none sets one), counted from when the taint was added.  Every pod
  tolerates ``not-ready`` and ``unreachable`` for 300 s unless it says otherwise
  (``--default-not-ready-toleration-seconds``, ``--default-unreachable-toleration-seconds``, as
  kube-apiserver's admission adds them).

Ported cases: tests/fixtures/kube-controllers/nodelifecycle/ (taint_eviction_test.go's ``TestGetMinTolerationTime``,
defaulttolerationseconds' ``TestForgivenessAdmission``).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.objects import Taint, Toleration

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
LIFECYCLE_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT)
READY, NOT_READY, UNKNOWN = "Ready", "NotReady", "Unknown"
NEVER_HEARD, SILENT, NO_RUNTIME = "NodeStatusNeverUpdated", "NodeStatusUnknown", "AgentNotRunningPods"


@dataclass(frozen=True)
class LifecycleConfig:
    grace: float = 40.0                    # --node-monitor-grace-period
    not_ready_toleration: int = 300        # --default-not-ready-toleration-seconds
    unreachable_toleration: int = 300      # --default-unreachable-toleration-seconds


@dataclass(frozen=True)
class NodeCondition:
    status: str      # Ready, NotReady, Unknown
    reason: str
    message: str
    since: float     # when it began (Unix seconds): the NoExecute taints' time added

    @property
    def ready(self) -> bool:
        return self.status == READY

    @property
    def tainted(self) -> bool:
        """Whether its taints (and what they do to pods) are in force: not while a node is only unheard since
        the scheduler started."""
        return self.status != READY and self.reason != NEVER_HEARD


def node_condition(*, heard: float | None, runs_pods: bool, started: float, now: float, grace: float,
                   previous: NodeCondition | None = None) -> NodeCondition:
    """A node's condition at ``now``: ``heard`` is when its last report arrived (None: none since the scheduler
    started, at ``started``), ``runs_pods`` what that report said; ``previous`` keeps a condition's start."""
    if heard is None and now - started <= grace:
        cond = NodeCondition(UNKNOWN, NEVER_HEARD, f"no report from its agent since the scheduler started "
                                                   f"{now - started:.0f} s ago", started)
    elif heard is None or now - heard > grace:
        last = started if heard is None else heard
        cond = NodeCondition(UNKNOWN, SILENT, f"its agent has not reported for {now - last:.0f} s (grace period "
                                              f"{grace:g} s)", last + grace)
    elif not runs_pods:
        cond = NodeCondition(NOT_READY, NO_RUNTIME, "its agent runs no pods (agent run --dry-run, or without "
                                                    "--embedded): it only observes", now)
    else:
        cond = NodeCondition(READY, "AgentReady", "its agent reports and runs pods", now)
    if previous is not None and (previous.status, previous.reason) == (cond.status, cond.reason):
        return NodeCondition(cond.status, cond.reason, cond.message, previous.since)  # still the same condition
    return cond


def taints_for(cond: NodeCondition) -> tuple[Taint, ...]:
    """The taints the condition puts on its node (none while Ready or only unheard since start)."""
    if not cond.tainted:
        return ()
    key = UNREACHABLE_TAINT if cond.status == UNKNOWN else NOT_READY_TAINT
    return Taint(key, "", "NoSchedule"), Taint(key, "", "NoExecute")


def default_tolerations(tolerations: tuple[Toleration, ...], config: LifecycleConfig) -> tuple[Toleration, ...]:
    """``tolerations`` and what kube-apiserver's DefaultTolerationSeconds adds: ``not-ready`` and ``unreachable``
    ``NoExecute`` for their default seconds, each unless a toleration with that key (or none) and that effect
    (or none) is there already."""
    out = list(tolerations)
    for key, seconds in ((NOT_READY_TAINT, config.not_ready_toleration),
                         (UNREACHABLE_TAINT, config.unreachable_toleration)):
        if not any(t.key in (key, "") and t.effect in ("NoExecute", "") for t in tolerations):
            out.append(Toleration(key, "Exists", "", "NoExecute", seconds))
    return tuple(out)


def min_toleration_seconds(used: list[Toleration]) -> float:
    """The taint manager's getMinTolerationTime: 0 with none used (evict now), -1 when none sets seconds (never),
    else the least seconds (0 when one is <= 0)."""
    if not used:
        return 0
    least = None
    for t in used:
        if t.seconds is not None:
            if t.seconds <= 0:
                return 0
            least = t.seconds if least is None else min(least, t.seconds)
    return -1 if least is None else least


def eviction_time(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], since: float) -> float | None:
    """When a pod with ``tolerations`` (defaults included) goes from a node with ``taints`` added at ``since``;
    None: never (no NoExecute taint, or tolerated for ever)."""
    no_execute = [t for t in taints if t.effect == "NoExecute"]
    if not no_execute:
        return None
    used = []
    for taint in no_execute:
        match = next((t for t in tolerations if t.tolerates(taint)), None)
        if match is None:
            return since  # a NoExecute taint it does not tolerate: at once
        used.append(match)
    seconds = min_toleration_seconds(used)
    return None if seconds < 0 else since + seconds
