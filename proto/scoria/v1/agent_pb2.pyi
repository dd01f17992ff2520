from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MigMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MIG_UNSUPPORTED: _ClassVar[MigMode]
    MIG_DISABLED: _ClassVar[MigMode]
    MIG_ENABLED: _ClassVar[MigMode]

class GpuTopologyLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPO_UNKNOWN: _ClassVar[GpuTopologyLevel]
    TOPO_INTERNAL: _ClassVar[GpuTopologyLevel]
    TOPO_SINGLE: _ClassVar[GpuTopologyLevel]
    TOPO_MULTIPLE: _ClassVar[GpuTopologyLevel]
    TOPO_HOSTBRIDGE: _ClassVar[GpuTopologyLevel]
    TOPO_NODE: _ClassVar[GpuTopologyLevel]
    TOPO_SYSTEM: _ClassVar[GpuTopologyLevel]

class QosLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QOS_UNSPECIFIED: _ClassVar[QosLevel]
    QOS_LC: _ClassVar[QosLevel]
    QOS_HLS: _ClassVar[QosLevel]
    QOS_LS: _ClassVar[QosLevel]
    QOS_BE: _ClassVar[QosLevel]
MIG_UNSUPPORTED: MigMode
MIG_DISABLED: MigMode
MIG_ENABLED: MigMode
TOPO_UNKNOWN: GpuTopologyLevel
TOPO_INTERNAL: GpuTopologyLevel
TOPO_SINGLE: GpuTopologyLevel
TOPO_MULTIPLE: GpuTopologyLevel
TOPO_HOSTBRIDGE: GpuTopologyLevel
TOPO_NODE: GpuTopologyLevel
TOPO_SYSTEM: GpuTopologyLevel
QOS_UNSPECIFIED: QosLevel
QOS_LC: QosLevel
QOS_HLS: QosLevel
QOS_LS: QosLevel
QOS_BE: QosLevel

class NodeReport(_message.Message):
    __slots__ = ("identity", "capacity", "devices", "load", "colocation", "runtime", "delta")
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    COLOCATION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    identity: Identity
    capacity: Capacity
    devices: Devices
    load: Load
    colocation: Colocation
    runtime: _containers.RepeatedCompositeFieldContainer[PodRuntime]
    delta: ReportDelta
    def __init__(self, identity: _Optional[_Union[Identity, _Mapping]] = ..., capacity: _Optional[_Union[Capacity, _Mapping]] = ..., devices: _Optional[_Union[Devices, _Mapping]] = ..., load: _Optional[_Union[Load, _Mapping]] = ..., colocation: _Optional[_Union[Colocation, _Mapping]] = ..., runtime: _Optional[_Iterable[_Union[PodRuntime, _Mapping]]] = ..., delta: _Optional[_Union[ReportDelta, _Mapping]] = ...) -> None: ...

class ReportDelta(_message.Message):
    __slots__ = ("base_sequence", "same_capacity", "same_devices", "same_pods", "same_runtime")
    BASE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SAME_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    SAME_DEVICES_FIELD_NUMBER: _ClassVar[int]
    SAME_PODS_FIELD_NUMBER: _ClassVar[int]
    SAME_RUNTIME_FIELD_NUMBER: _ClassVar[int]
    base_sequence: int
    same_capacity: bool
    same_devices: bool
    same_pods: bool
    same_runtime: bool
    def __init__(self, base_sequence: _Optional[int] = ..., same_capacity: _Optional[bool] = ..., same_devices: _Optional[bool] = ..., same_pods: _Optional[bool] = ..., same_runtime: _Optional[bool] = ...) -> None: ...

class PodRuntime(_message.Message):
    __slots__ = ("uid", "namespace", "name", "phase", "reason", "message", "restarts", "started_ns", "log_dir", "containers")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    STARTED_NS_FIELD_NUMBER: _ClassVar[int]
    LOG_DIR_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    namespace: str
    name: str
    phase: str
    reason: str
    message: str
    restarts: int
    started_ns: int
    log_dir: str
    containers: _containers.RepeatedCompositeFieldContainer[ContainerRuntime]
    def __init__(self, uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., phase: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., restarts: _Optional[int] = ..., started_ns: _Optional[int] = ..., log_dir: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerRuntime, _Mapping]]] = ...) -> None: ...

class ContainerRuntime(_message.Message):
    __slots__ = ("name", "state", "exit_code", "restarts", "pid", "reason", "message", "started_ns", "finished_ns", "last_termination")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_NS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_TERMINATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: str
    exit_code: int
    restarts: int
    pid: int
    reason: str
    message: str
    started_ns: int
    finished_ns: int
    last_termination: ContainerTermination
    def __init__(self, name: _Optional[str] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., restarts: _Optional[int] = ..., pid: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., started_ns: _Optional[int] = ..., finished_ns: _Optional[int] = ..., last_termination: _Optional[_Union[ContainerTermination, _Mapping]] = ...) -> None: ...

class ContainerTermination(_message.Message):
    __slots__ = ("exit_code", "reason", "message", "started_ns", "finished_ns")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_NS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_NS_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    reason: str
    message: str
    started_ns: int
    finished_ns: int
    def __init__(self, exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., started_ns: _Optional[int] = ..., finished_ns: _Optional[int] = ...) -> None: ...

class Identity(_message.Message):
    __slots__ = ("node_name", "agent_version", "boot_id", "sequence", "sample_time_ns", "report_interval_ms", "runs_pods")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    REPORT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    RUNS_PODS_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    agent_version: str
    boot_id: str
    sequence: int
    sample_time_ns: int
    report_interval_ms: int
    runs_pods: bool
    def __init__(self, node_name: _Optional[str] = ..., agent_version: _Optional[str] = ..., boot_id: _Optional[str] = ..., sequence: _Optional[int] = ..., sample_time_ns: _Optional[int] = ..., report_interval_ms: _Optional[int] = ..., runs_pods: _Optional[bool] = ...) -> None: ...

class Capacity(_message.Message):
    __slots__ = ("cpu_millis", "memory_bytes", "numa_zones", "cpu_topology", "topology_policy")
    CPU_MILLIS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    NUMA_ZONES_FIELD_NUMBER: _ClassVar[int]
    CPU_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_POLICY_FIELD_NUMBER: _ClassVar[int]
    cpu_millis: int
    memory_bytes: int
    numa_zones: _containers.RepeatedCompositeFieldContainer[NumaZone]
    cpu_topology: CpuTopology
    topology_policy: str
    def __init__(self, cpu_millis: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., numa_zones: _Optional[_Iterable[_Union[NumaZone, _Mapping]]] = ..., cpu_topology: _Optional[_Union[CpuTopology, _Mapping]] = ..., topology_policy: _Optional[str] = ...) -> None: ...

class NumaZone(_message.Message):
    __slots__ = ("id", "cpus", "memory_bytes", "distances")
    ID_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISTANCES_FIELD_NUMBER: _ClassVar[int]
    id: int
    cpus: _containers.RepeatedScalarFieldContainer[int]
    memory_bytes: int
    distances: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, id: _Optional[int] = ..., cpus: _Optional[_Iterable[int]] = ..., memory_bytes: _Optional[int] = ..., distances: _Optional[_Iterable[int]] = ...) -> None: ...

class CpuTopology(_message.Message):
    __slots__ = ("sockets", "cores", "threads_per_core", "cpus")
    SOCKETS_FIELD_NUMBER: _ClassVar[int]
    CORES_FIELD_NUMBER: _ClassVar[int]
    THREADS_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    sockets: int
    cores: int
    threads_per_core: int
    cpus: _containers.RepeatedCompositeFieldContainer[LogicalCpu]
    def __init__(self, sockets: _Optional[int] = ..., cores: _Optional[int] = ..., threads_per_core: _Optional[int] = ..., cpus: _Optional[_Iterable[_Union[LogicalCpu, _Mapping]]] = ...) -> None: ...

class LogicalCpu(_message.Message):
    __slots__ = ("id", "socket", "core", "numa_zone")
    ID_FIELD_NUMBER: _ClassVar[int]
    SOCKET_FIELD_NUMBER: _ClassVar[int]
    CORE_FIELD_NUMBER: _ClassVar[int]
    NUMA_ZONE_FIELD_NUMBER: _ClassVar[int]
    id: int
    socket: int
    core: int
    numa_zone: int
    def __init__(self, id: _Optional[int] = ..., socket: _Optional[int] = ..., core: _Optional[int] = ..., numa_zone: _Optional[int] = ...) -> None: ...

class Devices(_message.Message):
    __slots__ = ("gpus", "npus")
    GPUS_FIELD_NUMBER: _ClassVar[int]
    NPUS_FIELD_NUMBER: _ClassVar[int]
    gpus: _containers.RepeatedCompositeFieldContainer[Gpu]
    npus: _containers.RepeatedCompositeFieldContainer[Npu]
    def __init__(self, gpus: _Optional[_Iterable[_Union[Gpu, _Mapping]]] = ..., npus: _Optional[_Iterable[_Union[Npu, _Mapping]]] = ...) -> None: ...

class Gpu(_message.Message):
    __slots__ = ("index", "uuid", "model", "memory_total_bytes", "memory_used_bytes", "gpu_utilization_percent", "memory_utilization_percent", "numa_node", "healthy", "health_detail", "mig_mode", "processes", "links")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPU_UTILIZATION_PERCENT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_UTILIZATION_PERCENT_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODE_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DETAIL_FIELD_NUMBER: _ClassVar[int]
    MIG_MODE_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    index: int
    uuid: str
    model: str
    memory_total_bytes: int
    memory_used_bytes: int
    gpu_utilization_percent: float
    memory_utilization_percent: float
    numa_node: int
    healthy: bool
    health_detail: str
    mig_mode: MigMode
    processes: _containers.RepeatedCompositeFieldContainer[DeviceProcess]
    links: _containers.RepeatedCompositeFieldContainer[GpuLink]
    def __init__(self, index: _Optional[int] = ..., uuid: _Optional[str] = ..., model: _Optional[str] = ..., memory_total_bytes: _Optional[int] = ..., memory_used_bytes: _Optional[int] = ..., gpu_utilization_percent: _Optional[float] = ..., memory_utilization_percent: _Optional[float] = ..., numa_node: _Optional[int] = ..., healthy: _Optional[bool] = ..., health_detail: _Optional[str] = ..., mig_mode: _Optional[_Union[MigMode, str]] = ..., processes: _Optional[_Iterable[_Union[DeviceProcess, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[GpuLink, _Mapping]]] = ...) -> None: ...

class GpuLink(_message.Message):
    __slots__ = ("peer_index", "nvlinks", "level")
    PEER_INDEX_FIELD_NUMBER: _ClassVar[int]
    NVLINKS_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    peer_index: int
    nvlinks: int
    level: GpuTopologyLevel
    def __init__(self, peer_index: _Optional[int] = ..., nvlinks: _Optional[int] = ..., level: _Optional[_Union[GpuTopologyLevel, str]] = ...) -> None: ...

class Npu(_message.Message):
    __slots__ = ("id", "chip", "model", "hbm_total_bytes", "hbm_used_bytes", "aicore_utilization_percent", "healthy", "health_detail", "numa_node", "processes")
    ID_FIELD_NUMBER: _ClassVar[int]
    CHIP_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    HBM_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    HBM_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    AICORE_UTILIZATION_PERCENT_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DETAIL_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODE_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    id: int
    chip: int
    model: str
    hbm_total_bytes: int
    hbm_used_bytes: int
    aicore_utilization_percent: float
    healthy: bool
    health_detail: str
    numa_node: int
    processes: _containers.RepeatedCompositeFieldContainer[DeviceProcess]
    def __init__(self, id: _Optional[int] = ..., chip: _Optional[int] = ..., model: _Optional[str] = ..., hbm_total_bytes: _Optional[int] = ..., hbm_used_bytes: _Optional[int] = ..., aicore_utilization_percent: _Optional[float] = ..., healthy: _Optional[bool] = ..., health_detail: _Optional[str] = ..., numa_node: _Optional[int] = ..., processes: _Optional[_Iterable[_Union[DeviceProcess, _Mapping]]] = ...) -> None: ...

class DeviceProcess(_message.Message):
    __slots__ = ("pid", "memory_bytes", "pod_uid", "container")
    PID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    pid: int
    memory_bytes: int
    pod_uid: str
    container: str
    def __init__(self, pid: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., pod_uid: _Optional[str] = ..., container: _Optional[str] = ...) -> None: ...

class Load(_message.Message):
    __slots__ = ("cpu_used_cores", "memory_used_bytes", "cpu_pressure", "memory_pressure", "io_pressure", "pods", "pod_details")
    CPU_USED_CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_PRESSURE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PRESSURE_FIELD_NUMBER: _ClassVar[int]
    IO_PRESSURE_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    POD_DETAILS_FIELD_NUMBER: _ClassVar[int]
    cpu_used_cores: float
    memory_used_bytes: int
    cpu_pressure: Pressure
    memory_pressure: Pressure
    io_pressure: Pressure
    pods: _containers.RepeatedCompositeFieldContainer[PodUsage]
    pod_details: _containers.RepeatedCompositeFieldContainer[PodDetail]
    def __init__(self, cpu_used_cores: _Optional[float] = ..., memory_used_bytes: _Optional[int] = ..., cpu_pressure: _Optional[_Union[Pressure, _Mapping]] = ..., memory_pressure: _Optional[_Union[Pressure, _Mapping]] = ..., io_pressure: _Optional[_Union[Pressure, _Mapping]] = ..., pods: _Optional[_Iterable[_Union[PodUsage, _Mapping]]] = ..., pod_details: _Optional[_Iterable[_Union[PodDetail, _Mapping]]] = ...) -> None: ...

class Pressure(_message.Message):
    __slots__ = ("some_avg10", "some_avg60", "full_avg10", "full_avg60", "some_total_us", "full_total_us")
    SOME_AVG10_FIELD_NUMBER: _ClassVar[int]
    SOME_AVG60_FIELD_NUMBER: _ClassVar[int]
    FULL_AVG10_FIELD_NUMBER: _ClassVar[int]
    FULL_AVG60_FIELD_NUMBER: _ClassVar[int]
    SOME_TOTAL_US_FIELD_NUMBER: _ClassVar[int]
    FULL_TOTAL_US_FIELD_NUMBER: _ClassVar[int]
    some_avg10: float
    some_avg60: float
    full_avg10: float
    full_avg60: float
    some_total_us: int
    full_total_us: int
    def __init__(self, some_avg10: _Optional[float] = ..., some_avg60: _Optional[float] = ..., full_avg10: _Optional[float] = ..., full_avg60: _Optional[float] = ..., some_total_us: _Optional[int] = ..., full_total_us: _Optional[int] = ...) -> None: ...

class PodUsage(_message.Message):
    __slots__ = ("uid", "namespace", "name", "qos", "cpu_used_cores", "memory_used_bytes")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    uid: str
    namespace: str
    name: str
    qos: QosLevel
    cpu_used_cores: float
    memory_used_bytes: int
    def __init__(self, uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., qos: _Optional[_Union[QosLevel, str]] = ..., cpu_used_cores: _Optional[float] = ..., memory_used_bytes: _Optional[int] = ...) -> None: ...

class PodDetail(_message.Message):
    __slots__ = ("uid", "containers", "cpu_pressure", "memory_pressure")
    UID_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    CPU_PRESSURE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PRESSURE_FIELD_NUMBER: _ClassVar[int]
    uid: str
    containers: _containers.RepeatedCompositeFieldContainer[ContainerUsage]
    cpu_pressure: Pressure
    memory_pressure: Pressure
    def __init__(self, uid: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerUsage, _Mapping]]] = ..., cpu_pressure: _Optional[_Union[Pressure, _Mapping]] = ..., memory_pressure: _Optional[_Union[Pressure, _Mapping]] = ...) -> None: ...

class ContainerUsage(_message.Message):
    __slots__ = ("name", "cpu_used_cores", "memory_used_bytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    cpu_used_cores: float
    memory_used_bytes: int
    def __init__(self, name: _Optional[str] = ..., cpu_used_cores: _Optional[float] = ..., memory_used_bytes: _Optional[int] = ...) -> None: ...

class Colocation(_message.Message):
    __slots__ = ("batch_cpu_millis", "batch_memory_bytes", "offline_cpu_quota_millis", "evictions", "qos_profile", "evicting")
    BATCH_CPU_MILLIS_FIELD_NUMBER: _ClassVar[int]
    BATCH_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_CPU_QUOTA_MILLIS_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    QOS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    EVICTING_FIELD_NUMBER: _ClassVar[int]
    batch_cpu_millis: int
    batch_memory_bytes: int
    offline_cpu_quota_millis: int
    evictions: _containers.RepeatedCompositeFieldContainer[Eviction]
    qos_profile: str
    evicting: bool
    def __init__(self, batch_cpu_millis: _Optional[int] = ..., batch_memory_bytes: _Optional[int] = ..., offline_cpu_quota_millis: _Optional[int] = ..., evictions: _Optional[_Iterable[_Union[Eviction, _Mapping]]] = ..., qos_profile: _Optional[str] = ..., evicting: _Optional[bool] = ...) -> None: ...

class Eviction(_message.Message):
    __slots__ = ("pod_uid", "namespace", "name", "reason", "time_ns")
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    pod_uid: str
    namespace: str
    name: str
    reason: str
    time_ns: int
    def __init__(self, pod_uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ..., time_ns: _Optional[int] = ...) -> None: ...

class Directive(_message.Message):
    __slots__ = ("ack", "qos_profile", "pod_actions")
    ACK_FIELD_NUMBER: _ClassVar[int]
    QOS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    POD_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    qos_profile: QosProfile
    pod_actions: _containers.RepeatedCompositeFieldContainer[PodAction]
    def __init__(self, ack: _Optional[_Union[Ack, _Mapping]] = ..., qos_profile: _Optional[_Union[QosProfile, _Mapping]] = ..., pod_actions: _Optional[_Iterable[_Union[PodAction, _Mapping]]] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("sequence", "code", "message", "deltas")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    code: int
    message: str
    deltas: bool
    def __init__(self, sequence: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., deltas: _Optional[bool] = ...) -> None: ...

class QosProfile(_message.Message):
    __slots__ = ("name", "digest", "yaml")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    YAML_FIELD_NUMBER: _ClassVar[int]
    name: str
    digest: str
    yaml: str
    def __init__(self, name: _Optional[str] = ..., digest: _Optional[str] = ..., yaml: _Optional[str] = ...) -> None: ...

class PodAction(_message.Message):
    __slots__ = ("kind", "pod_uid", "namespace", "name", "reason", "pod_json", "grace_period_seconds")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[PodAction.Kind]
        START: _ClassVar[PodAction.Kind]
        STOP: _ClassVar[PodAction.Kind]
        EVICT: _ClassVar[PodAction.Kind]
    KIND_UNSPECIFIED: PodAction.Kind
    START: PodAction.Kind
    STOP: PodAction.Kind
    EVICT: PodAction.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    POD_JSON_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    kind: PodAction.Kind
    pod_uid: str
    namespace: str
    name: str
    reason: str
    pod_json: str
    grace_period_seconds: int
    def __init__(self, kind: _Optional[_Union[PodAction.Kind, str]] = ..., pod_uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ..., pod_json: _Optional[str] = ..., grace_period_seconds: _Optional[int] = ...) -> None: ...
