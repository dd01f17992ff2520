"""The objects Scoria schedules, as plain dataclasses.

They mirror the parts of ``v1`` Node and Pod, ``scheduling.k8s.io/v1``
PriorityClass and ``scheduling.volcano.sh/v1beta1`` PodGroup and Queue that
scheduling reads.  Resource amounts are already canonical integers
(see :mod:`proto.vocab.quantity`).  Manifests become these objects in
:mod:`scheduler.api.manifests`; nothing here parses YAML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"  # a pod's task role in its job (annotation, else label), as Volcano Jobs write it
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
FILTER_EFFECTS = ("NoSchedule", "NoExecute")
DEFAULT_MAX_PODS = 110  # the kubelet's default --max-pods: a node that does not say otherwise


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def describe(self) -> str:
        """The form kube-scheduler prints: ``{key: value}``."""
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    # NoExecute: how long the pod stays on a node after the taint is added (None: for ever; <= 0: not at all)
    seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions``/``matchFields`` entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False  # a matchFields entry (only metadata.name is defined)


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """Requirements that must all hold (a nodeSelectorTerm)."""

    requirements: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists, DoesNotExist),
    all of which must hold.  With neither it selects every pod."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            have = labels.get(req.key)
            op = req.operator
            if op == "In" and have not in req.values:
                return False
            if op == "NotIn" and have is not None and have in req.values:
                return False
            if op == "Exists" and have is None:
                return False
            if op == "DoesNotExist" and have is not None:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One entry of a pod's ``spec.topologySpreadConstraints``, defaults filled in as kube-scheduler reads them."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule (a filter) or ScheduleAnyway (a score)
    selector: LabelSelector | None = None  # None: labelSelector not set (selects no pod)
    match_label_keys: tuple[str, ...] = ()
    min_domains: int = 1
    node_affinity_policy: str = "Honor"  # Honor: only nodes matching the pod's node affinity/selector count
    node_taints_policy: str = "Ignore"  # Honor: only nodes whose NoSchedule/NoExecute taints the pod tolerates

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == "DoNotSchedule"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One podAffinity/podAntiAffinity term, resolved against the pod that carries it.

    ``selector``: the labelSelector's requirements (matchLabels as ``In``), with
    matchLabelKeys and mismatchLabelKeys already merged in as the API server
    does (``In``/``NotIn`` the carrier's own value); None for no labelSelector,
    which matches no pod.  ``namespaces``: the namespaces whose pods the term
    looks at by name (the carrier's own when the term names none and has no
    namespaceSelector), None for all (``namespaceSelector: {}``).
    ``namespace_selector``: a non-empty namespaceSelector's requirements, matched
    against the labels of a pod's Namespace (None: none); a pod falls under
    the term when its namespace is listed or its Namespace's labels match.
    ``weight``: 1-100 for a preferred term, 0 for a required one.
    """

    topology_key: str
    selector: tuple[Requirement, ...] | None
    namespaces: tuple[str, ...] | None
    weight: int = 0
    namespace_selector: tuple[Requirement, ...] | None = None


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """``spec.affinity.podAffinity`` and ``podAntiAffinity``: required and preferred terms of each."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[PodAffinityTerm, ...] = ()
    anti_required: tuple[PodAffinityTerm, ...] = ()
    anti_preferred: tuple[PodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    """One ``containers[].ports[]`` entry with a ``hostPort``: what it takes on its node (kube's HostPortInfo)."""

    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"  # hostIP; 0.0.0.0 (the default) binds every address of the node


@dataclass(slots=True)
class Node:
    name: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    # False: left out of scheduling whatever a pod tolerates, as Volcano's snapshot leaves out nodes that are
    # not Ready (embedded mode: its agent stopped reporting, or runs no pods); its taints say why
    ready: bool = True


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    requests: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    # Required node affinity: the pod fits a node matching any term (None: no constraint).
    affinity_terms: tuple[SelectorTerm, ...] | None = None
    preferred_terms: tuple[tuple[int, SelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    priority_class_name: str = ""
    priority: int | None = None
    scheduler_name: str = ""
    node_name: str = ""
    phase: str = "Pending"
    created: datetime | None = None
    terminating: bool = False
    qos_class: str = "Burstable"  # Kubernetes' QoS class: Guaranteed, Burstable or BestEffort
    resource_version: str = ""  # metadata.resourceVersion as last seen (Kubernetes mode: write preconditions)
    # volcano.sh/preemptable (annotation, else label): False means never a victim of preempt or reclaim.
    preemptable: bool = True
    preemption_policy: str = "PreemptLowerPriority"  # spec.preemptionPolicy: Never never evicts anyone
    resource_claims: tuple[str, ...] = ()  # spec.resourceClaims[].name (dynamic resource allocation)
    spread_constraints: tuple[SpreadConstraint, ...] = ()  # spec.topologySpreadConstraints
    pod_affinity: PodAffinity | None = None  # inter-pod affinity and anti-affinity (None: no terms)
    # spec.schedulingGates[].name: while any is left the pod must not be scheduled (the API server refuses a bind)
    scheduling_gates: tuple[str, ...] = ()
    # hostPort entries of its containers and sidecar (restartable) init containers, as kube-scheduler counts them
    host_ports: tuple[HostPort, ...] = ()
    # Written by the scheduler.
    nominated_node: str = ""  # where preemption/reclaim made room for it (status.nominatedNodeName)
    reason: str | None = None
    evicted: bool = False
    bound_at: float | None = None  # Unix seconds when this scheduler bound it (None: bound elsewhere or before)
    # The PodGroup it belongs to (annotation scheduling.k8s.io/group-name), read once: it is hot.
    group_name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.group_name = self.annotations.get(GROUP_NAME_ANNOTATION, "")

    @property
    def api_uid(self) -> str:
        """``metadata.uid`` as its source gave it; "" for a pod read without one (its ``uid`` is then
        ``namespace/name``, which no real uid can be: uids hold no slash)."""
        return "" if "/" in self.uid else self.uid

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def task_role(self) -> str:
        """Its role in the job (``volcano.sh/task-spec``: annotation first, then label; "" when none)."""
        return self.annotations.get(TASK_SPEC_KEY) or self.labels.get(TASK_SPEC_KEY) or ""

    @property
    def best_effort(self) -> bool:
        """No resource requests at all: such pods wait for the backfill action."""
        return not any(self.requests.values())

    @property
    def critical(self) -> bool:
        return self.namespace == "kube-system" or self.priority_class_name in CRITICAL_PRIORITY_CLASSES

    @property
    def active(self) -> bool:
        """Holding (or about to hold) resources: neither finished nor evicted."""
        return not self.evicted and self.phase not in ("Succeeded", "Failed")


@dataclass(slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    transition: datetime | None = None


@dataclass(slots=True)
class PodGroup:
    namespace: str
    name: str
    queue: str = DEFAULT_QUEUE
    min_member: int = 1
    min_resources: dict[str, int] | None = None
    # spec.minTaskMember: per task role (volcano.sh/task-spec), how many must run for the job to run
    min_task_member: dict[str, int] = field(default_factory=dict)
    priority_class_name: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    created: datetime | None = None
    phase: str = "Pending"
    conditions: list[Condition] = field(default_factory=list)
    implicit: bool = False  # made for a pod without a group; never written back
    uid: str = ""  # metadata.uid where the source has one: a status write applies to this object only

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class QueueAffinity:
    """A Queue's ``spec.affinity``: node groups (node label ``volcano.sh/nodegroup-name``) its pods
    must or should run in (``nodeGroupAffinity``) and must or should avoid (``nodeGroupAntiAffinity``)."""

    required: tuple[str, ...] = ()  # nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution
    preferred: tuple[str, ...] = ()  # nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution
    anti_required: tuple[str, ...] = ()  # nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution
    anti_preferred: tuple[str, ...] = ()  # nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution


@dataclass(slots=True)
class Queue:
    name: str
    weight: int = 1
    priority: int = 0  # spec.priority: queues with a higher one are served (and protected) first
    capability: dict[str, int] = field(default_factory=dict)
    guarantee: dict[str, int] = field(default_factory=dict)
    deserved: dict[str, int] = field(default_factory=dict)
    reclaimable: bool = True
    parent: str = ""
    state: str = "Open"
    annotations: dict[str, str] = field(default_factory=dict)  # drf's hierarchy reads volcano.sh/hierarchy*
    allocated: dict[str, int] = field(default_factory=dict)
    implicit: bool = False
    affinity: QueueAffinity | None = None  # spec.affinity; None: not set (the nodegroup plugin may inherit one)


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server gives every namespace this label, its name


@dataclass(slots=True)
class Namespace:
    """A ``v1`` Namespace: its labels are what a pod affinity term's ``namespaceSelector`` matches.

    ``labels`` include ``kubernetes.io/metadata.name`` (the name), as the API
    server sets it on every namespace.  A namespace that pods use but no
    Namespace object describes has that label alone (:func:`namespace_labels`).
    """

    name: str
    labels: dict[str, str] = field(default_factory=dict)


def namespace_labels(name: str) -> dict[str, str]:
    """The labels of a namespace known only by name."""
    return {NAMESPACE_NAME_LABEL: name}


@dataclass(slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
