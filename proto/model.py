"""The wire contract as plain dataclasses: what the agent and the scheduler pass around.

One dataclass per message of ``proto/scoria/v1/agent.proto``, with the same
field names and units.  :mod:`proto.codec` converts between these and the
generated protobuf classes; nothing else touches the generated code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class MigMode(IntEnum):
    UNSUPPORTED = 0
    DISABLED = 1
    ENABLED = 2


class GpuTopologyLevel(IntEnum):
    """NVML's common-ancestor levels between two GPUs, nearest first."""

    UNKNOWN = 0
    INTERNAL = 1
    SINGLE = 2
    MULTIPLE = 3
    HOSTBRIDGE = 4
    NODE = 5
    SYSTEM = 6


class QosLevel(IntEnum):
    UNSPECIFIED = 0
    LC = 1
    HLS = 2
    LS = 3
    BE = 4


@dataclass(slots=True)
class Identity:
    node_name: str
    agent_version: str = ""
    boot_id: str = ""
    sequence: int = 0
    sample_time_ns: int = 0
    report_interval_ms: int = 1000
    runs_pods: bool = False  # embedded mode: the agent runs the pods bound to its node (not a --dry-run observer)


@dataclass(slots=True)
class NumaZone:
    id: int
    cpus: list[int] = field(default_factory=list)
    memory_bytes: int = 0
    distances: list[int] = field(default_factory=list)


@dataclass(slots=True)
class LogicalCpu:
    id: int
    socket: int = 0
    core: int = 0
    numa_zone: int = 0


@dataclass(slots=True)
class CpuTopology:
    sockets: int = 0
    cores: int = 0
    threads_per_core: int = 0
    cpus: list[LogicalCpu] = field(default_factory=list)


@dataclass(slots=True)
class Capacity:
    cpu_millis: int = 0
    memory_bytes: int = 0
    numa_zones: list[NumaZone] = field(default_factory=list)
    cpu_topology: CpuTopology = field(default_factory=CpuTopology)
    topology_policy: str = ""  # the kubelet's topology manager policy; "" unknown


@dataclass(slots=True)
class DeviceProcess:
    pid: int
    memory_bytes: int = 0
    pod_uid: str = ""
    container: str = ""


@dataclass(slots=True)
class GpuLink:
    peer_index: int
    nvlinks: int = 0
    level: GpuTopologyLevel = GpuTopologyLevel.UNKNOWN


@dataclass(slots=True)
class Gpu:
    index: int
    uuid: str
    model: str = ""
    memory_total_bytes: int = 0
    memory_used_bytes: int = 0
    gpu_utilization_percent: float = 0.0
    memory_utilization_percent: float = 0.0
    numa_node: int = -1
    healthy: bool = True
    health_detail: str = ""
    mig_mode: MigMode = MigMode.UNSUPPORTED
    processes: list[DeviceProcess] = field(default_factory=list)
    links: list[GpuLink] = field(default_factory=list)


@dataclass(slots=True)
class Npu:
    id: int
    chip: int = 0
    model: str = ""
    hbm_total_bytes: int = 0
    hbm_used_bytes: int = 0
    aicore_utilization_percent: float = 0.0
    healthy: bool = True
    health_detail: str = ""
    numa_node: int = -1
    processes: list[DeviceProcess] = field(default_factory=list)


@dataclass(slots=True)
class Devices:
    gpus: list[Gpu] = field(default_factory=list)
    npus: list[Npu] = field(default_factory=list)


@dataclass(slots=True)
class Pressure:
    some_avg10: float = 0.0
    some_avg60: float = 0.0
    full_avg10: float = 0.0
    full_avg60: float = 0.0
    some_total_us: int = 0
    full_total_us: int = 0


@dataclass(slots=True)
class ContainerUsage:
    name: str
    cpu_used_cores: float = 0.0
    memory_used_bytes: int = 0


@dataclass(slots=True)
class PodUsage:
    uid: str
    namespace: str = ""
    name: str = ""
    qos: QosLevel = QosLevel.UNSPECIFIED
    cpu_used_cores: float = 0.0
    memory_used_bytes: int = 0
    containers: list[ContainerUsage] = field(default_factory=list)
    cpu_pressure: Pressure | None = None     # None: the pod's cgroup has no PSI files
    memory_pressure: Pressure | None = None


@dataclass(slots=True)
class Load:
    cpu_used_cores: float = 0.0
    memory_used_bytes: int = 0
    cpu_pressure: Pressure = field(default_factory=Pressure)
    memory_pressure: Pressure = field(default_factory=Pressure)
    io_pressure: Pressure = field(default_factory=Pressure)
    pods: list[PodUsage] = field(default_factory=list)


@dataclass(slots=True)
class Eviction:
    pod_uid: str
    namespace: str = ""
    name: str = ""
    reason: str = ""
    time_ns: int = 0


@dataclass(slots=True)
class Colocation:
    batch_cpu_millis: int = 0
    batch_memory_bytes: int = 0
    offline_cpu_quota_millis: int | None = None  # None: unlimited
    evictions: list[Eviction] = field(default_factory=list)
    qos_profile: str = ""
    evicting: bool = False


@dataclass(slots=True)
class ContainerTermination:
    """How one run of a container ended."""

    exit_code: int = 0
    reason: str = ""
    message: str = ""
    started_ns: int = 0
    finished_ns: int = 0


@dataclass(slots=True)
class ContainerRuntime:
    name: str
    state: str = "waiting"  # waiting, running, terminated
    exit_code: int = 0
    restarts: int = 0
    pid: int = 0
    reason: str = ""  # waiting: BackOff, StartError; terminated: Completed, Error, OOMKilled
    message: str = ""
    started_ns: int = 0
    finished_ns: int = 0
    last_termination: ContainerTermination | None = None  # how the run before this one ended (kubectl's Last State)


@dataclass(slots=True)
class PodRuntime:
    """Embedded mode: a pod the agent's local runtime holds, as it stands."""

    uid: str
    namespace: str = ""
    name: str = ""
    phase: str = "Pending"  # Pending, Running, Succeeded, Failed
    reason: str = ""
    message: str = ""
    restarts: int = 0
    started_ns: int = 0
    log_dir: str = ""
    containers: list[ContainerRuntime] = field(default_factory=list)


@dataclass(slots=True)
class NodeReport:
    identity: Identity
    capacity: Capacity = field(default_factory=Capacity)
    devices: Devices = field(default_factory=Devices)
    load: Load = field(default_factory=Load)
    colocation: Colocation = field(default_factory=Colocation)
    runtime: list[PodRuntime] = field(default_factory=list)  # embedded mode: the pods the agent runs


@dataclass(slots=True, frozen=True)
class ReportDelta:
    """What a delta report leaves out: each ``same_*`` section is as in the acknowledged report ``base_sequence``
    (0: none, a full report from an agent that sends deltas)."""

    base_sequence: int
    same_capacity: bool = False
    same_devices: bool = False
    same_pods: bool = False     # load.pods (and each pod's containers and pressure)
    same_runtime: bool = False


@dataclass(slots=True)
class Ack:
    sequence: int
    code: int = 0  # a gRPC status code
    message: str = ""
    deltas: bool = False  # OK acks: the scheduler takes delta reports based on this report


@dataclass(slots=True)
class QosProfile:
    name: str
    digest: str = ""
    yaml: str = ""


class PodActionKind(IntEnum):
    UNSPECIFIED = 0
    START = 1
    STOP = 2
    EVICT = 3


@dataclass(slots=True)
class PodAction:
    kind: PodActionKind
    pod_uid: str
    namespace: str = ""
    name: str = ""
    reason: str = ""
    pod_json: str = ""
    grace_period_seconds: int = 0


@dataclass(slots=True)
class Directive:
    ack: Ack | None = None
    qos_profile: QosProfile | None = None
    pod_actions: list[PodAction] = field(default_factory=list)
