"""The names Volcano's Job controller writes and reads: label and annotation keys, phases, events,
actions (volcano.sh/apis batch/v1alpha1 labels.go and job.go, bus/v1alpha1 actions.go and events.go)."""

from __future__ import annotations

# -- pod labels and annotations ------------------------------------------------------------------------
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"
JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
JOB_VERSION = "volcano.sh/job-version"
JOB_RETRY_COUNT = "volcano.sh/job-retry-count"
TEMPLATE_UID = "volcano.sh/template-uid"
PARTITION_ID = "volcano.sh/partition-id"
OUT_OF_SYNC = "volcano.sh/controller-out-of-sync"  # a pod the controller is killing: its events are ignored
DEFAULT_TASK_SPEC = "default"
GROUP_NAME = "scheduling.k8s.io/group-name"
NUMA_POLICY = "volcano.sh/numa-topology-policy"
# copied from the Job's annotations (and for the first two, labels) onto its pods
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN_TIME = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"

# -- plain workloads (the PodGroup controller) ----------------------------------------------------------
PODGROUP_PREFIX = "podgroup-"
SCHEDULING_QUEUE_NAME = "scheduling.volcano.sh/queue-name"
GROUP_MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
INHERITED_PREFIX = "volcano.sh/"

# -- job phases -----------------------------------------------------------------------------------------
PENDING, RUNNING, RESTARTING = "Pending", "Running", "Restarting"
COMPLETING, COMPLETED = "Completing", "Completed"
TERMINATING, TERMINATED = "Terminating", "Terminated"
ABORTING, ABORTED, FAILED = "Aborting", "Aborted", "Failed"
PHASES = (PENDING, ABORTING, ABORTED, RUNNING, RESTARTING, COMPLETING, COMPLETED, TERMINATING, TERMINATED, FAILED)
FINISHED = frozenset({COMPLETED, FAILED, TERMINATED})  # what ttlSecondsAfterFinished counts from

# -- events (bus/v1alpha1 events.go) --------------------------------------------------------------------
ANY_EVENT = "*"
POD_FAILED, POD_EVICTED, POD_PENDING, POD_RUNNING = "PodFailed", "PodEvicted", "PodPending", "PodRunning"
JOB_UNKNOWN, TASK_COMPLETED, TASK_FAILED = "Unknown", "TaskCompleted", "TaskFailed"
OUT_OF_SYNC_EVENT, COMMAND_ISSUED, JOB_UPDATED = "OutOfSync", "CommandIssued", "JobUpdated"
EVENTS = (ANY_EVENT, POD_PENDING, POD_RUNNING, POD_FAILED, POD_EVICTED, JOB_UNKNOWN, TASK_COMPLETED,
          OUT_OF_SYNC_EVENT, COMMAND_ISSUED, JOB_UPDATED, TASK_FAILED)
# what a policy may name (the admission webhook's policyEventMap: the internal ones are refused)
POLICY_EVENTS = (ANY_EVENT, POD_FAILED, POD_EVICTED, POD_PENDING, JOB_UNKNOWN, TASK_COMPLETED, TASK_FAILED,
                 JOB_UPDATED)
INTERNAL_EVENTS = frozenset({OUT_OF_SYNC_EVENT, COMMAND_ISSUED, POD_RUNNING})

# -- actions (bus/v1alpha1 actions.go) ------------------------------------------------------------------
ABORT_JOB, RESTART_JOB, RESTART_TASK, RESTART_POD = "AbortJob", "RestartJob", "RestartTask", "RestartPod"
RESTART_PARTITION, TERMINATE_JOB, COMPLETE_JOB, RESUME_JOB = "RestartPartition", "TerminateJob", "CompleteJob", \
    "ResumeJob"
SYNC_JOB, ENQUEUE_JOB = "SyncJob", "EnqueueJob"
# what a policy or a Command may name (the webhook's policyActionMap)
POLICY_ACTIONS = (ABORT_JOB, RESTART_JOB, RESTART_TASK, RESTART_POD, RESTART_PARTITION, TERMINATE_JOB,
                  COMPLETE_JOB, RESUME_JOB)
INTERNAL_ACTIONS = frozenset({SYNC_JOB, ENQUEUE_JOB, "SyncQueue", "OpenQueue", "CloseQueue"})

# -- event reasons written on the Job ------------------------------------------------------------------
REASON_COMMAND_ISSUED = "CommandIssued"
REASON_EXECUTE_ACTION = "ExecuteAction"
REASON_PLUGIN_ERROR = "PluginError"
REASON_PODGROUP_PENDING = "PodGroupPending"
REASON_FAILED_CREATE = "FailedCreate"
REASON_FAILED_ADMISSION = "FailedAdmission"  # Scoria's: a Job the controller will not run as it is

DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 3
