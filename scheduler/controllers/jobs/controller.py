"""The Job controller's decision for one Job: what it observes in, effects and memory out.

:func:`decide` is pure.  Given a Job, the pods it controls, its PodGroup, the Commands aimed at it, the
objects of its namespace its plugins may own, the controller's memory of the Job and the time, it
returns the effects to apply (create/delete pods, the PodGroup and plugin objects, mark pods out of
sync, write the status once, emit events), the new memory and when to look again (a policy timeout,
``ttlSecondsAfterFinished``).

Inside, it follows Volcano's controller (pkg/controllers/job): each request (an event, a Command) goes
through the lifecycle policies to an action; the state machine (:mod:`.state`) turns the phase and the
action into a sync (create what the spec lacks, delete what is out of sync or beyond the replicas) or
a kill (the whole job, or a task, pod or partition), followed by a status update.  Requests are worked
through one after another against a working view, so a reconcile that sees a pod fail, restarts the
job and syncs it again decides as Volcano would, event by event; a change of phase is followed by a
sync, as Volcano's own status write brings one.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from datetime import datetime

from proto.errors import InputError
from scheduler.api.manifests import ManifestError
from scheduler.controllers.host import rfc3339
from scheduler.controllers.jobplugins.base import JobPlugin, pod_name
from scheduler.controllers.jobplugins.registry import build
from scheduler.controllers.jobs import keys, state
from scheduler.controllers.jobs.admission import AdmissionContext, admit_job
from scheduler.controllers.jobs.inputs import Observed, Outcome, Settings, Target
from scheduler.controllers.jobs.jobstatus import JobStatus
from scheduler.controllers.jobs.observe import JobMemory, PodMemo, requests_since, scale_of, spec_json
from scheduler.controllers.jobs.podgroup import desired_podgroup, podgroup_update
from scheduler.controllers.jobs.pods import PodView, job_ref, new_pod, volume_claim_name
from scheduler.controllers.jobs.policies import Delayed, Request, apply_policies, cancels, superseded
from scheduler.controllers.jobs.spec import Job, JobSpec, Task, format_duration, parse_job, parse_time
from scheduler.controllers.kinds import COMMAND, JOB, POD, PODGROUP, PVC, Kind, kind_of, name_of, object_ref
from scheduler.controllers.writes import Annotate, Create, Delete, Effect, Emit, Update, WriteStatus

log = logging.getLogger(__name__)
MAX_PASSES = 8  # syncs following phase changes within one reconcile
RETRY_S = 10.0  # a Job a plugin could not be served for is tried again after this many seconds


def decide(observed: Observed, memory: JobMemory | None, now: datetime, settings: Settings) -> Outcome:
    doc = observed.job
    uid = str((doc.get("metadata") or {}).get("uid", ""))
    if memory is not None and memory.uid != uid:
        memory = None  # a new Job under an old name
    source = f"{kind_of(doc)} {name_of(doc)}"
    text = spec_json(doc)
    try:
        if memory is not None and not memory.refused and memory.spec == text:  # admitted already, unchanged since
            job = parse_job(doc, source, scheduler_name=settings.scheduler_name, known=_parsed(memory, doc, settings))
        else:
            job = admit_job(doc, source, AdmissionContext(scheduler_name=settings.scheduler_name))
    except ManifestError as exc:
        return _refused(doc, memory, uid, exc.detail, keys.REASON_FAILED_ADMISSION)
    try:
        return _Run(job, observed, memory, now, settings, spec_text=text).reconcile()
    except InputError as exc:  # the host cannot do what a plugin needs (no ssh-keygen): reported, retried later
        return _refused(doc, memory, uid, str(exc), keys.REASON_PLUGIN_ERROR, retry=now.timestamp() + RETRY_S)


def _parsed(memory: JobMemory, doc: dict, settings: Settings) -> JobSpec | None:
    """The spec as the last decision read it (its text unchanged since), unless the scheduler name it took for a
    Job naming none has changed."""
    parsed = memory.parsed
    if parsed is None:
        return None
    named = (doc.get("spec") or {}).get("schedulerName")
    return parsed if named or parsed.scheduler_name == settings.scheduler_name else None


def _refused(doc: dict, memory: JobMemory | None, uid: str, message: str, reason: str,
             retry: float | None = None) -> Outcome:
    """A Job left as it is, with one Warning event per new problem."""
    old = memory if memory is not None else JobMemory(uid=uid)
    effects: list[Effect] = []
    if old.refused != message:
        effects.append(Emit(object_ref(doc), "Warning", reason, message))
    old.refused = message
    return Outcome(effects, old, wake_at=retry)


def run_action(job: Job, observed: Observed, action: str, now: datetime, settings: Settings | None = None,
               request: Request | None = None) -> tuple[JobStatus, list[Effect]]:
    """One action on a Job as it stands, the way Volcano's ``state.NewState(job).Execute(action)`` runs it: the
    status after it and the effects (no admission, no memory, no follow-up sync).  For tests of the state
    machine against Volcano's own cases."""
    run = _Run(job, observed, None, now, settings or Settings())
    run._execute(action, request or Request())
    return run.status, run.effects


class _Objects:
    """The plugins' view of the Job's objects (base.JobObjects), recording effects as they go."""

    def __init__(self, run: _Run):
        self.run = run
        self.namespace = run.job.namespace

    def get(self, kind: Kind, name: str) -> dict | None:
        return self.run.objects.get((kind, name))

    def create(self, obj: dict) -> None:
        kind = kind_of(obj)
        if (kind, name_of(obj)) in self.run.objects:
            return
        obj = copy.deepcopy(obj)
        obj["metadata"]["ownerReferences"] = [job_ref(self.run.job)]
        self.run.objects[(kind, name_of(obj))] = obj
        self.run.effects.append(Create(obj))

    def create_or_update(self, obj: dict, same: Callable[[dict, dict], bool]) -> None:
        existing = self.get(kind_of(obj), name_of(obj))
        if existing is None:
            self.create(obj)
            return
        if same(existing, obj):
            return
        updated = copy.deepcopy(existing)
        for key in ("data", "spec"):
            if key in obj:
                updated[key] = copy.deepcopy(obj[key])
        self.run.objects[(kind_of(obj), name_of(obj))] = updated
        self.run.effects.append(Update(updated))

    def delete(self, kind: Kind, name: str) -> None:
        if self.run.objects.pop((kind, name), None) is not None:
            self.run.effects.append(Delete(kind, self.namespace, name))

    def key_pair(self) -> tuple[str, str]:
        return self.run.settings.key_pair()


class _Run:
    """One reconcile of one Job: a working copy of its status, pods and objects, and the effects so far."""

    def __init__(self, job: Job, observed: Observed, memory: JobMemory | None, now: datetime, settings: Settings,
                 *, spec_text: str | None = None):
        self.job, self.settings, self.now = job, settings, now
        self.spec_text = spec_json(job) if spec_text is None else spec_text
        self.stamp, self.clock = rfc3339(now), now.timestamp()
        self.memory = memory
        self.status = JobStatus.from_dict(job.doc.get("status"))
        self.initial = self.status.to_dict()
        self.pods: dict[str, PodView] = {}
        for doc in sorted(observed.pods, key=name_of):
            view = PodView.of(doc)
            self.pods[view.name] = view
        self.seen = dict(self.pods)  # as observed, for the memory
        self.podgroup = observed.podgroup
        self.objects = dict(observed.objects)
        self.commands = observed.commands
        self.priorities = observed.priorities
        self.effects: list[Effect] = []
        self.plugins: list[JobPlugin] = [build(name, args) for name, args in job.spec.plugins]
        self.delayed: dict[str, Delayed] = dict(memory.delayed) if memory is not None else {}
        self.killed: set[str] = set(memory.killed) if memory is not None else set()
        self._reported = ""  # the PodGroup condition reported in this reconcile
        self._synced: tuple[int, JobStatus] | None = None  # the working state a plain sync last left

    # -- the reconcile ------------------------------------------------------------------------------------
    def reconcile(self) -> Outcome:
        requests = requests_since(self.job, self.memory, self.pods, self.pg_phase, spec_text=self.spec_text)
        for cmd in sorted(self.commands, key=name_of):
            self.effects.append(Delete(COMMAND, self.job.namespace, name_of(cmd)))
            action = str(cmd.get("action", ""))
            self._event("Normal", keys.REASON_COMMAND_ISSUED, f"Start to execute command {action}, and clean it up "
                                                              "to make sure executed not more than once.")
            requests.append(Request(event=keys.COMMAND_ISSUED, action=action))
        phase = self.status.phase
        for request in requests:
            self._handle(request)
        for name, waiting in sorted(self.delayed.items()):
            if waiting.due <= self.clock and self.delayed.get(name) is waiting:
                self._run_delayed(waiting)
        passes = 0
        while self.status.phase != phase and passes < MAX_PASSES:  # our status write is an update event
            phase = self.status.phase
            passes += 1
            self._handle(Request(event=keys.OUT_OF_SYNC_EVENT))
        if self.status.to_dict() != self.initial:
            self.effects.append(WriteStatus(JOB, self.job.namespace, self.job.name, self.status.to_dict()))
        wake = [d.due for d in self.delayed.values()]
        wake += self._ttl()
        return Outcome(self.effects, self._memory(), min(wake) if wake else None)

    def _memory(self) -> JobMemory:
        pods = {name: PodMemo.of(view) for name, view in self.seen.items()}
        live = {m.uid for m in pods.values()}
        return JobMemory(uid=self.job.uid, spec=self.spec_text, parsed=self.job.spec, scale=scale_of(self.job),
                         phase=self.status.phase,
                         pods=pods, killed={u for u in self.killed if u in live}, podgroup_phase=self.pg_phase,
                         podgroup_condition=self._pg_condition_seen(), delayed=dict(self.delayed))

    def _ttl(self) -> list[float]:
        """Delete a finished Job once ttlSecondsAfterFinished passed (Volcano's garbage collector)."""
        ttl = self.job.spec.ttl_seconds_after_finished
        if ttl is None or self.status.phase not in keys.FINISHED or self.job.deleting:
            return []
        finished = parse_time(self.status.last_transition or None)
        if finished is None:
            return []
        expires = finished.timestamp() + ttl
        if expires <= self.clock:
            self.effects.append(Delete(JOB, self.job.namespace, self.job.name, uid=self.job.uid))
            return []
        return [expires]

    def _handle(self, request: Request) -> None:
        for name, waiting in list(self.delayed.items()):
            if name == request.pod and cancels(request, waiting):
                del self.delayed[name]
        decision = apply_policies(self.job, request, self.status.version)
        if decision.delay > 0:
            key = request.pod
            old = self.delayed.get(key)
            if old is None or old.action != decision.action:
                self.delayed[key] = Delayed(decision.action, request.event, self.clock + decision.delay,
                                            request.task, request.pod, request.pod_uid, request.partition)
                self._event("Normal", keys.REASON_EXECUTE_ACTION,
                            f"Execute action {decision.action} after {format_duration(decision.delay)}")
            return
        if decision.action != keys.SYNC_JOB:
            self._event("Normal", keys.REASON_EXECUTE_ACTION, f"Start to execute action {decision.action} ")
        elif self._synced is not None and self._synced[0] == len(self.effects) and self._synced[1] == self.status:
            return  # a sync of the same working state decides the same again: once is enough
        self._execute(decision.action, request)
        if decision.action == keys.SYNC_JOB:
            self._synced = (len(self.effects), self.status.copy())
        if decision.action not in keys.INTERNAL_ACTIONS:
            done = Delayed(decision.action, request.event, self.clock, request.task, request.pod,
                           request.pod_uid, request.partition)
            for name, waiting in list(self.delayed.items()):
                if superseded(done, waiting):
                    del self.delayed[name]

    def _run_delayed(self, waiting: Delayed) -> None:
        self._event("Normal", keys.REASON_EXECUTE_ACTION, f"Start to execute action {waiting.action} ")
        self._execute(waiting.action, Request(event=waiting.event, task=waiting.task, pod=waiting.pod,
                                              pod_uid=waiting.pod_uid, partition=waiting.partition))
        for name, other in list(self.delayed.items()):
            if other is waiting or superseded(waiting, other):
                del self.delayed[name]

    def _execute(self, action: str, request: Request) -> None:
        before = self.status.phase
        step = state.step(before, action)
        target = None
        if action == keys.RESTART_TASK:
            target = Target("task", request.task)
        elif action == keys.RESTART_POD:
            target = Target("pod", request.task, pod=request.pod)
        elif action == keys.RESTART_PARTITION:
            target = Target("partition", request.task, pod=request.pod, partition=request.partition)
        if step.op == state.SYNC:
            self._sync(step.update)
        elif step.op == state.KILL_TARGET and target is not None:
            self._kill(step.retain, target, step.update)
        else:
            self._kill(step.retain, None, step.update)
        if not state.allowed(before, self.status.phase):
            log.error("Job %s: phase %s -> %s is not allowed; keeping %s", self.job.key, before, self.status.phase,
                      before)
            self.status.phase = before

    # -- sync: make the pods what the spec says -----------------------------------------------------------
    def _sync(self, update: state.Update | None) -> None:
        if self.job.deleting:
            return
        if self.status.phase in ("", keys.PENDING):
            self._initiate()
        else:
            self._plugins_update()
            self._ensure_podgroup()
        self._podgroup_event()
        admitted = self.podgroup is not None and (self.pg_phase not in ("", "Pending")
                                                  or not self.settings.wait_for_admission)
        if not admitted:
            before = self.status.copy()
            if update is not None:
                update(self.status, self.job.spec)
            if self.status != before:
                self._transitioned()
            return
        counts: dict[str, int] = {}
        tasks: dict[str, dict[str, int]] = {}
        creating: dict[str, list[dict]] = {}
        deleting: list[PodView] = []
        for task in self.job.spec.tasks:
            mine = {n: p for n, p in self.pods.items() if p.task == task.name}
            for i in range(task.replicas):
                name = pod_name(self.job.name, task.name, i)
                pod = mine.pop(name, None)
                if pod is None:
                    creating.setdefault(task.name, []).append(self._new_pod(task, i))
                    continue
                if pod.terminating:
                    counts["terminating"] = counts.get("terminating", 0) + 1
                    continue
                if pod.out_of_sync:
                    deleting.append(pod)
                _count(counts, tasks, pod.phase, pod.task, pod.doc)
            deleting.extend(mine.values())  # beyond the replicas (scaled down)
        for task in self.job.spec.tasks:
            new = creating.get(task.name)
            if not new or not self._dependencies_ready(task):
                continue
            for doc in new:
                self.effects.append(Create(doc))
                self.pods[name_of(doc)] = PodView.of(doc)  # a later sync in this reconcile must not make it again
                _count(counts, tasks, "Pending", task.name, doc)
        for pod in deleting:
            if not pod.terminating:  # one already going needs no second delete
                self._delete_pod(pod, mark=False)
            counts["terminating"] = counts.get("terminating", 0) + 1
        new_status = JobStatus(phase=self.status.phase, reason=self.status.reason, message=self.status.message,
                               last_transition=self.status.last_transition, min_available=self.job.spec.min_available,
                               version=self.status.version, retry_count=self.status.retry_count,
                               controlled_resources=dict(self.status.controlled_resources),
                               conditions=[dict(c) for c in self.status.conditions])
        new_status.set_counts(counts, tasks)
        if update is not None:
            update(new_status, self.job.spec)
        if new_status != self.status:
            self.status = new_status
            self._transitioned()

    def _new_pod(self, task: Task, index: int) -> dict:
        doc = new_pod(self.job, task, index, version=self.status.version, retry_count=self.status.retry_count)
        for plugin in self.plugins:
            plugin.on_pod_create(doc, self.job)
        return doc

    def _dependencies_ready(self, task: Task) -> bool:
        """dependsOn: all (or with iteration any, one) of the named tasks have their minAvailable pods running
        and ready, or succeeded (waitDependsOnTaskMeetCondition)."""
        deps = task.depends_on
        if deps is None:
            return True
        if len(deps.names) > 1 and deps.iteration == "any":
            return any(self._task_ready(n) for n in deps.names)
        return all(self._task_ready(n) for n in deps.names)

    def _task_ready(self, name: str) -> bool:
        task = self.job.spec.task(name)
        if task is None:
            return False
        ready = 0
        for i in range(task.replicas):
            pod = self.pods.get(pod_name(self.job.name, name, i))
            if pod is not None and (pod.phase == "Succeeded" or (pod.phase == "Running" and pod.ready)):
                ready += 1
        return ready >= task.min_available

    def _initiate(self) -> None:
        """initiateJob: the status set up, the plugins' objects made, the volumes' claims, the PodGroup."""
        if not self.status.phase:
            self.status.phase = keys.PENDING
            self.status.min_available = self.job.spec.min_available
            self._transitioned()
        objects = _Objects(self)
        for plugin in self.plugins:
            mark = f"plugin-{plugin.name}"
            if self.status.controlled_resources.get(mark) != plugin.name:
                plugin.add_objects(self.job, objects)
                self.status.controlled_resources[mark] = plugin.name
        for i, volume in enumerate(self.job.spec.volumes):
            claim = volume.claim_name
            if not claim:
                claim = volume_claim_name(self.job, i)
                if volume.claim is not None:
                    objects.create({"apiVersion": PVC.api_version, "kind": PVC.kind,
                                    "metadata": {"name": claim, "namespace": self.job.namespace},
                                    "spec": copy.deepcopy(volume.claim)})
            self.status.controlled_resources[f"volume-pvc-{claim}"] = claim
        self._ensure_podgroup()

    def _plugins_update(self) -> None:
        objects = _Objects(self)
        for plugin in self.plugins:
            plugin.on_job_update(self.job, objects)

    @property
    def pg_phase(self) -> str | None:
        """The PodGroup's phase as this run holds it (a new one is Pending; None: it has none)."""
        return _pg_phase(self.podgroup)

    def _ensure_podgroup(self) -> None:
        if self.podgroup is None:
            self.podgroup = desired_podgroup(self.job, self.priorities)
            self.effects.append(Create(self.podgroup))
            return
        updated = podgroup_update(self.podgroup, self.job, self.priorities)
        if updated is not None:
            self.podgroup = updated
            self.effects.append(Update(updated))

    def _podgroup_event(self) -> None:
        """A warning when the PodGroup's latest condition is not Scheduled (recordPodGroupEvent), once per change."""
        seen = self._pg_condition_seen()
        if not seen or (self.memory is not None and self.memory.podgroup_condition == seen):
            return
        if self._reported == seen:
            return
        self._reported = seen
        kind, _, message = seen.partition(":")
        if kind != "Scheduled":
            self._event("Warning", keys.REASON_PODGROUP_PENDING,
                        f"PodGroup {self.job.namespace}:{self.job.name} {kind.lower()}, reason: {message}")

    def _pg_condition_seen(self) -> str:
        latest = None
        for cond in ((self.podgroup or {}).get("status") or {}).get("conditions") or ():
            if isinstance(cond, dict) and cond.get("status") == "True" and (
                    latest is None or str(cond.get("lastTransitionTime", "")) > str(latest.get("lastTransitionTime", ""))):
                latest = cond
        return f"{latest.get('type', '')}:{latest.get('message', '')}" if latest else ""

    # -- kill: delete pods, the whole job's or a target's ---------------------------------------------------
    def _kill(self, retain: frozenset[str], target: Target | None, update: state.Update | None) -> None:
        if self.job.deleting:
            return
        counts: dict[str, int] = {}
        tasks: dict[str, dict[str, int]] = {}
        victims: list[PodView] = []
        if target is not None:
            victims = self._targets(target)
            if target.kind == "partition" and not victims:
                return  # no such partition: Volcano leaves the job as it is
            chosen = {p.name for p in victims}
            for pod in self.pods.values():
                if pod.name not in chosen and not pod.killed:
                    self._count_kept(pod, counts, tasks)
        else:
            self.status.version += 1  # a job's version grows only when the whole job is killed
            last_retry = self.status.retry_count >= self.job.spec.max_retry - 1
            keep = state.RETAIN_SOFT if last_retry else retain  # the last retry keeps finished pods
            for pod in self.pods.values():
                if pod.terminating or pod.phase in keep:
                    self._count_kept(pod, counts, tasks)
                else:
                    victims.append(pod)
        for pod in victims:
            if not pod.terminating:
                self._delete_pod(pod, mark=True)
            counts["terminating"] = counts.get("terminating", 0) + 1
        self.status.set_counts(counts, tasks)
        if update is not None and update(self.status, self.job.spec):
            self._transitioned()
        start = self.job.created or self.now
        end = parse_time(self.status.last_transition or None) or self.now
        self.status.running_duration = format_duration((end - start).total_seconds())
        objects = _Objects(self)
        for plugin in self.plugins:
            mark = f"plugin-{plugin.name}"
            if self.status.controlled_resources.get(mark) == plugin.name:
                plugin.delete_objects(self.job, objects)
                del self.status.controlled_resources[mark]
        if target is None and self.podgroup is not None:
            self.effects.append(Delete(PODGROUP, self.job.namespace, name_of(self.podgroup)))
            self.podgroup = None

    def _targets(self, target: Target) -> list[PodView]:
        mine = [p for p in self.pods.values() if p.task == target.task]
        if target.kind == "task":
            return mine
        if target.kind == "pod":
            return [p for p in mine if p.name == target.pod]
        if not target.partition:
            return []
        return [p for p in mine if p.partition == target.partition]

    def _count_kept(self, pod: PodView, counts: dict[str, int], tasks: dict[str, dict[str, int]]) -> None:
        if pod.terminating:
            counts["terminating"] = counts.get("terminating", 0) + 1
        else:
            _count(counts, tasks, pod.phase, pod.task, pod.doc)

    def _delete_pod(self, pod: PodView, *, mark: bool) -> None:
        """Delete a pod; ``mark`` first annotates it out of sync, so that its own events are ignored."""
        if mark and not pod.out_of_sync:
            self.effects.append(Annotate(POD, self.job.namespace, pod.name, {keys.OUT_OF_SYNC: "true"}))
        self.effects.append(Delete(POD, self.job.namespace, pod.name, uid=pod.uid))
        pod.terminating, pod.out_of_sync, pod.killed = True, True, True
        self.killed.add(pod.uid)

    # -- bookkeeping --------------------------------------------------------------------------------------
    def _transitioned(self) -> None:
        self.status.last_transition = self.stamp
        self.status.append_condition(self.status.phase, self.stamp)

    def _event(self, type_: str, reason: str, message: str) -> None:
        self.effects.append(Emit(object_ref(self.job.doc), type_, reason, message))


def _pg_phase(podgroup: dict | None) -> str | None:
    if podgroup is None:
        return None
    return str((podgroup.get("status") or {}).get("phase") or "Pending")


def _count(counts: dict[str, int], tasks: dict[str, dict[str, int]], phase: str, task: str, doc: dict) -> None:
    """classifyAndAddUpPodBaseOnPhase and calcPodStatus: the job's counters and its task's (a pod without a
    task annotation counts only in the former)."""
    key = {"Pending": "pending", "Running": "running", "Succeeded": "succeeded", "Failed": "failed"}.get(phase,
                                                                                                         "unknown")
    counts[key] = counts.get(key, 0) + 1
    if keys.TASK_SPEC in ((doc.get("metadata") or {}).get("annotations") or {}):
        per = tasks.setdefault(task, {})
        name = phase if phase in ("Pending", "Running", "Succeeded", "Failed") else "Unknown"
        per[name] = per.get(name, 0) + 1


__all__ = ["Settings", "Observed", "Outcome", "decide", "run_action", "JobMemory"]
