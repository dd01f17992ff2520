"""Embedded mode's local runtime: the pods bound to this node, run as local processes in real cgroups.

The scheduler sends :class:`~proto.model.PodAction`\\ s; :meth:`LocalRuntime.apply`
carries them out:

* START (``pod_uid``, ``pod_json``: the pod manifest) — idempotent by uid.
  Each container's command runs through the wrapper of :mod:`.process` in its
  own container cgroup below the pod cgroup the agent's layout names, with
  the kubelet's limits (:mod:`.cgroups`); logs go to files (:mod:`.state`).
* STOP (``pod_uid``, ``grace_period_seconds``: 0 means the pod's own
  ``terminationGracePeriodSeconds``) — the pod was deleted, or the scheduler
  has recorded its final phase: SIGTERM to each container's process group,
  SIGKILL after the grace, cgroups removed, logs kept, and the pod is dropped
  from the report once nothing of it runs.  A late START for a uid stopped
  since this agent started is ignored (remembered in memory, not across restarts).
* EVICT (``pod_uid``, ``reason``, ``grace_period_seconds``) — as STOP, but
  the pod stays reported, Failed with reason Evicted and the reason as its
  message, until a STOP.  The agent's own evictions under pressure come in
  through :class:`~agent.embedded.evictor.LocalEvictor`.

Finished pods (Succeeded, Failed) are reported until a STOP says the scheduler
has them (the newest ``max_finished`` at most); their cgroups are gone.
Stopping never blocks the caller: the SIGKILL after the grace period and the
clean-up happen in :meth:`LocalRuntime.tick`, which the agent's slow loop
calls every second and which also notices exits and restarts containers
under the rules of :mod:`.phase`.

Every change is saved under ``state_dir/pods`` before it matters, so a new
runtime on the same state directory — an agent restarted after a crash or a
SIGKILL — *adopts* the pods: a container whose process still runs (same pid,
same start time, in its cgroup) is watched, not started again; one that ended
meanwhile gets its exit code from the wrapper's exit file and goes through
the usual rules.  :meth:`LocalRuntime.shutdown` (a clean agent stop, Ctrl-C)
stops every pod and removes every cgroup it made: nothing is left behind; on
the next start pods are treated as after a node reboot (restartPolicy Always
and OnFailure containers start again; Never pods end Failed with exit code
143 or 137 and the message that the agent's shutdown stopped them).  Bad input — pod JSON that does not parse, a pod without
containers, a cgroup that cannot be made — is logged with the pod named and
reported as a Failed pod with a reason; it never stops the agent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agent.cgroups.backend import Backend
from agent.cgroups.executor import Executor
from agent.cgroups.layout import FixedLayout, Layout
from agent.embedded import podcgroups
from agent.embedded.phase import (
    ACTIVE,
    BACK_OFF,
    EVICTED,
    FAILED,
    OOM_KILLED,
    START_ERROR_EXIT,
    TERMINAL,
    TERMINATED,
    WAITING,
    Backoff,
    ContainerView,
    InvalidTransition,
    exit_reason,
    pod_phase,
    restarts,
    transition,
)
from agent.embedded.process import JOIN_FAILED, SIGKILL, SIGTERM, Handle, StartFailed, find_wrapper, signal_container, spawn
from agent.embedded.records import ContainerRecord, PodRecord, StateDir, Stopping, to_runtime
from agent.embedded.spec import DEFAULT_GRACE, START_ERROR, PodSpec, SpecError, load_manifest, parse_pod, safe_name
from agent.pods import PodInfo
from proto.errors import InputError
from proto.model import Directive, PodAction, PodActionKind, PodRuntime

log = logging.getLogger(__name__)

STOP, EVICT, SHUTDOWN = "stop", "evict", "shutdown"
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
UNKNOWN_EXIT = 137  # what the kubelet reports for a container whose end it did not see


def default_base_env() -> dict[str, str]:
    """What every container starts from (no image, so no image environment): a few of the agent's own."""
    env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return env


@dataclass
class _Pod:
    record: PodRecord
    spec: PodSpec | None                       # None: a pod that never parsed (reported Failed)
    handles: dict[str, Handle] = field(default_factory=dict)
    dirty: bool = False

    @property
    def terminal(self) -> bool:
        return self.record.phase in TERMINAL


class LocalRuntime:
    def __init__(self, state_dir, backend: Backend, layout: Layout, clock: Callable[[], float] = time.time, *,
                 executor: Executor | None = None, backoff: Backoff = Backoff(), node_name: str = "",
                 base_env: Mapping[str, str] | None = None, workdir: str | None = None, proc: str = "/proc",
                 max_finished: int = 500, metrics=None):
        self.state = StateDir(state_dir)
        self.backend, self.layout, self.clock = backend, layout, clock
        self.executor = executor or Executor(backend)
        self.backoff = backoff
        self.node_name = node_name
        self.base_env = dict(default_base_env() if base_env is None else base_env)
        self.workdir = workdir or os.getcwd()
        self.proc = proc
        self.max_finished = max_finished
        self.metrics = metrics
        self._lock = threading.RLock()
        self._pods: dict[str, _Pod] = {}
        self._stopped: OrderedDict[str, None] = OrderedDict()  # uids stopped lately: a late START is ignored
        self._closed = False
        self._hurry = threading.Event()
        if isinstance(layout, FixedLayout):  # there from the start: the agent measures them and looks for cpu.idle
            for parent in (layout.online_parent, layout.offline_parent):
                try:
                    podcgroups.make(backend, parent)
                except OSError as exc:
                    raise InputError(f"local runtime: cannot create cgroup {parent}: {exc}") from None
        self._adopt()

    # -- what the agent calls ---------------------------------------------------------------------
    def on_directive(self, directive: Directive) -> None:
        for action in directive.pod_actions:
            self.apply(action)

    def apply(self, action: PodAction) -> None:
        """Carry out one PodAction; a failure is logged with the pod named, never raised."""
        grace = action.grace_period_seconds if action.grace_period_seconds > 0 else None
        try:
            if action.kind == PodActionKind.START:
                self.start(action.pod_json, uid=action.pod_uid, namespace=action.namespace, name=action.name)
            elif action.kind == PodActionKind.STOP:
                self.stop(action.pod_uid, grace, reason=action.reason)
            elif action.kind == PodActionKind.EVICT:
                self.evict(action.pod_uid, action.reason, grace)
            else:
                log.warning("local runtime: ignoring pod action %s for %s/%s", action.kind, action.namespace,
                            action.name)
        except Exception:  # a bug: keep the stream and the other pods going
            log.exception("local runtime: %s of pod %s/%s (%s) failed", action.kind.name, action.namespace,
                          action.name, action.pod_uid)

    def pods(self) -> list[PodInfo]:
        """The pods holding cgroups now (running, restarting, stopping): the agent's QoS policies see these."""
        with self._lock:
            return [p.spec.info for p in self._pods.values() if p.spec is not None and p.record.cgroup]

    def runtime(self) -> list[PodRuntime]:
        """Every pod held, as the report carries it."""
        with self._lock:
            return [to_runtime(p.record, self.state.log_dir(p.record)) for p in self._pods.values()]

    # -- START ------------------------------------------------------------------------------------
    def start(self, pod_json: str, *, uid: str = "", namespace: str = "", name: str = "") -> None:
        with self._lock:
            if self._closed:
                log.warning("local runtime: shut down; not starting pod %s/%s", namespace, name)
                return
            try:
                doc = load_manifest(pod_json)
            except SpecError as exc:
                self._refuse(uid, namespace, name, None, exc)
                return
            meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            uid = str(meta.get("uid") or uid)
            namespace, name = str(meta.get("namespace") or namespace or "default"), str(meta.get("name") or name)
            if uid in self._pods:
                return
            if uid in self._stopped:
                log.warning("local runtime: pod %s/%s (%s) was stopped; ignoring a late START", namespace, name, uid)
                return
            try:
                spec = parse_pod(doc, uid=uid, node_name=self.node_name, base_env=self.base_env)
            except SpecError as exc:
                self._refuse(uid, namespace, name, doc, exc)
                return
            now = self.clock()
            pod_path = self.layout.pod_path(spec.uid, spec.info.qos_class)
            record = PodRecord(spec.uid, spec.namespace, spec.name, manifest=doc, started_at=now, cgroup=pod_path,
                               containers=[ContainerRecord(c.name, podcgroups.container_cgroup(pod_path, spec.uid, c.name))
                                           for c in spec.containers])
            pod = self._pods[spec.uid] = _Pod(record, spec)
            self._save(pod)  # before any process exists: a crash from here on is adopted, not duplicated
            try:
                self._make_cgroups(pod)
            except OSError as exc:
                self._fail(pod, START_ERROR, f"cannot create cgroup {pod_path}: {exc}")
                self._cleanup(pod)
                self._save(pod)
                return
            log.info("local runtime: starting pod %s (%s) in %s", spec.key, spec.uid, pod_path)
            for c in record.containers:
                self._launch(pod, c, now)
            self._update_phase(pod)
            self._save(pod)

    def _refuse(self, uid: str, namespace: str, name: str, doc: dict | None, exc: SpecError) -> None:
        key = f"{namespace or 'default'}/{name}" if name else (uid or "?")
        log.error("local runtime: not running pod %s (%s): %s: %s", key, uid or "no uid", exc.reason, exc.message)
        if not safe_name(uid) or uid in self._pods or uid in self._stopped:
            return  # nothing to report it under (or already reported)
        record = PodRecord(uid, namespace or "default", name, manifest=doc, phase=FAILED, reason=exc.reason,
                           message=exc.message, started_at=self.clock())
        pod = self._pods[uid] = _Pod(record, None)
        self._save(pod)

    def _make_cgroups(self, pod: _Pod) -> None:
        for c in pod.record.containers:
            podcgroups.make(self.backend, c.cgroup)
        self.executor.apply(podcgroups.limit_writes(pod.spec, pod.record.cgroup, version=self.backend.version,
                                                 offline_parent=self.layout.offline_parent))

    def _launch(self, pod: _Pod, c: ContainerRecord, now: float) -> None:
        spec = next(s for s in pod.spec.containers if s.name == c.name)
        if c.attempted:
            c.restarts += 1
            if self.metrics is not None:
                self.metrics.runtime_restarts.inc()
        c.attempted, c.started_at, c.next_start_at, pod.dirty = True, now, 0.0, True
        pod.record.cgroup = pod.record.cgroup or self.layout.pod_path(pod.spec.uid, pod.spec.info.qos_class)
        try:
            if not self.backend.exists(c.cgroup, "cpu" if self.backend.version == 1 else ""):
                self._make_cgroups(pod)  # gone meanwhile (a reboot, someone's rmdir): made again, limits and all
            started = spawn(spec.argv, env=spec.env, cwd=spec.working_dir or self.workdir,
                            log_path=self.state.log_dir(pod.record) / f"{c.name}.log",
                            exit_file=self.state.exit_file(pod.record.uid, c.name),
                            procs_files=podcgroups.procs_files(self.backend, c.cgroup))
        except (StartFailed, OSError) as exc:
            log.error("local runtime: pod %s container %s did not start: %s", pod.record.key, c.name, exc)
            self._exited(pod, c, START_ERROR_EXIT, now, reason=START_ERROR, message=str(exc))
            return
        c.oom_kills = self._oom_kills(pod, c)
        c.state, c.pid, c.pid_start, c.exit_code, c.reason, c.message = ACTIVE, started.pid, started.create_time, 0, "", ""
        pod.handles[c.name] = Handle(started.pid, started.create_time, started.popen)

    # -- exits and restarts -----------------------------------------------------------------------
    def _exited(self, pod: _Pod, c: ContainerRecord, code: int, now: float, *, reason: str = "",
                message: str = "") -> None:
        """Record that container ``c`` ended with ``code``, and decide its restart."""
        ran_for = max(0.0, now - c.started_at) if c.started_at else 0.0
        pod.handles.pop(c.name, None)
        c.state, c.exit_code, c.finished_at, c.pid, c.pid_start = TERMINATED, code, now, 0, 0.0
        c.reason, c.message = reason or exit_reason(code), message
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
        step = self.backoff.next_step(c.backoff_step, ran_for)
        delay = self.backoff.delay(step)
        c.backoff_step = step + 1
        c.state, c.reason, c.next_start_at = WAITING, BACK_OFF, now + delay
        c.message = f"back-off {delay:g}s restarting container {c.name} (exited with code {code}" + \
                    (f": {message})" if message else ")")

    def _poll(self, pod: _Pod, now: float) -> None:
        """Notice the containers that ended since the last look."""
        for c in pod.record.containers:
            if c.state != ACTIVE:
                continue
            handle = pod.handles.get(c.name)
            if handle is not None and handle.alive():
                continue
            code, reason, message = self._exit_of(pod, c, handle)
            strays = podcgroups.members(self.backend, c.cgroup)
            if strays:  # the main process is gone: what it left behind goes too, as with a container's pid 1
                signal_container(None, strays, SIGKILL)
            if pod.record.stopping is not None and pod.record.stopping.kind == SHUTDOWN and not message:
                message = "stopped by the agent's shutdown"
            self._exited(pod, c, code, now, reason=reason, message=message)
            log.info("local runtime: pod %s container %s exited with code %d%s", pod.record.key, c.name, code,
                     f" ({reason})" if reason else "")

    def _exit_of(self, pod: _Pod, c: ContainerRecord, handle: Handle | None) -> tuple[int, str, str]:
        text = self.state.read_exit(pod.record.uid, c.name)
        if text == JOIN_FAILED:
            return START_ERROR_EXIT, START_ERROR, f"could not enter cgroup {c.cgroup}"
        if handle is not None and handle.returncode is not None:
            code = handle.returncode
        elif text is not None and text.lstrip("-").isdigit():
            code = int(text)
        elif pod.record.stopping is not None and pod.record.stopping.killed:
            return UNKNOWN_EXIT, "", "killed after its grace period"
        else:
            return UNKNOWN_EXIT, "", ("exit status unknown: the process was gone when the agent looked "
                                      "(killed together with its wrapper, or the machine restarted)")
        if code == 128 + int(SIGKILL) and self._oom_kills(pod, c) > c.oom_kills:
            return code, OOM_KILLED, "killed by the kernel's OOM killer (memory limit)"
        return code, "", ""

    def _oom_kills(self, pod: _Pod, c: ContainerRecord) -> int:
        return podcgroups.oom_kills(self.backend, c.cgroup) + podcgroups.oom_kills(self.backend, pod.record.cgroup)

    def _update_phase(self, pod: _Pod) -> None:
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

    def _fail(self, pod: _Pod, reason: str, message: str) -> None:
        log.error("local runtime: pod %s failed: %s: %s", pod.record.key, reason, message)
        try:
            pod.record.phase = transition(pod.record.phase, FAILED)
        except InvalidTransition as exc:
            log.error("local runtime: pod %s: %s", pod.record.key, exc)
            return
        pod.record.reason, pod.record.message, pod.dirty = reason, message, True

    # -- the slow loop ----------------------------------------------------------------------------
    def tick(self) -> None:
        """Notice exits, restart what is due, advance stops, remove finished pods' cgroups, save changes."""
        with self._lock:
            if self._closed:
                return
            now = self.clock()
            for pod in list(self._pods.values()):
                try:
                    self._tick_pod(pod, now)
                except Exception:  # one pod's trouble must not stop the others (or the agent)
                    log.exception("local runtime: pod %s: tick failed", pod.record.key)
                if pod.dirty and pod.record.uid in self._pods:
                    self._save(pod)
            self._trim_finished()
            self._count()

    def _tick_pod(self, pod: _Pod, now: float) -> None:
        if pod.record.stopping is not None:
            self._advance_stop(pod, now)
            return
        if pod.terminal or pod.spec is None:
            if pod.record.cgroup:
                self._cleanup(pod)  # retried until the kernel lets the cgroups go
            return
        self._poll(pod, now)
        for c in pod.record.containers:
            if c.state == WAITING and (not c.attempted or c.next_start_at <= now):
                self._launch(pod, c, now)
        self._update_phase(pod)
        if pod.terminal:
            self._cleanup(pod)

    def _cleanup(self, pod: _Pod) -> bool:
        """Remove the pod's cgroups (nothing of it runs); False while the kernel still counts tasks."""
        path = pod.record.cgroup
        if not path:
            return True
        if any(podcgroups.members(self.backend, c.cgroup) for c in pod.record.containers):
            for c in pod.record.containers:
                signal_container(None, podcgroups.members(self.backend, c.cgroup), SIGKILL)
            return False
        if not podcgroups.remove(self.backend, path):
            return False
        pod.record.cgroup, pod.dirty = "", True
        return True

    def _trim_finished(self) -> None:
        finished = [p for p in self._pods.values() if p.terminal and p.record.stopping is None]
        if len(finished) <= self.max_finished:
            return
        finished.sort(key=lambda p: max((c.finished_at for c in p.record.containers), default=p.record.started_at))
        for pod in finished[:len(finished) - self.max_finished]:
            if pod.record.cgroup:
                continue
            log.info("local runtime: forgetting finished pod %s (more than %d finished pods held)", pod.record.key,
                     self.max_finished)
            self._drop(pod)

    # -- STOP, EVICT ------------------------------------------------------------------------------
    def stop(self, uid: str, grace: float | None = None, *, reason: str = "") -> None:
        """Stop the pod (deleted, or its final phase recorded): TERM, KILL after ``grace``, then dropped."""
        with self._lock:
            self._remember_stopped(uid)
            pod = self._pods.get(uid)
            if pod is None:
                return
            st = pod.record.stopping
            if st is not None:  # already leaving (an eviction): now it is dropped when gone
                st.kind = STOP if st.kind != SHUTDOWN else st.kind
                if grace is not None:
                    st.deadline = min(st.deadline, self.clock() + grace)
                pod.dirty = True
                return
            if (pod.terminal or pod.spec is None) and self._cleanup(pod):
                self._drop(pod)
                return
            self._begin_stop(pod, STOP, reason or "deleted", grace)

    def evict(self, uid: str, reason: str, grace: float | None = None, *, at_most: float | None = None) -> bool:
        """Evict the pod: stopped as by STOP, then reported Failed/Evicted with ``reason``. True: gone or going.

        ``grace``: None for the pod's own; ``at_most`` caps it (the agent's evictions under pressure)."""
        with self._lock:
            pod = self._pods.get(uid)
            if pod is None or pod.terminal or pod.record.stopping is not None:
                return True
            if grace is None:
                grace = pod.spec.grace_seconds if pod.spec is not None else DEFAULT_GRACE
            if at_most is not None:
                grace = min(grace, at_most)
            log.warning("local runtime: evicting pod %s: %s", pod.record.key, reason)
            self._begin_stop(pod, EVICT, reason, grace)
            return True

    def forget(self, uid: str) -> bool:
        """Drop a finished pod from what the runtime reports (a running one is stopped first, as by STOP)."""
        with self._lock:
            pod = self._pods.get(uid)
            if pod is None:
                return False
            if pod.terminal and pod.record.stopping is None and self._cleanup(pod):
                self._remember_stopped(uid)
                self._drop(pod)
                return True
            self.stop(uid)
            return False

    def _begin_stop(self, pod: _Pod, kind: str, reason: str, grace: float | None) -> None:
        if grace is None:
            grace = pod.spec.grace_seconds if pod.spec is not None else DEFAULT_GRACE
        now = self.clock()
        pod.record.stopping = Stopping(kind, reason, now + max(0.0, grace))
        pod.dirty = True
        log.info("local runtime: stopping pod %s (%s), grace %gs", pod.record.key, kind, grace)
        self._signal(pod, SIGTERM)
        if grace <= 0:
            self._signal(pod, SIGKILL)
            pod.record.stopping.killed = True
        self._advance_stop(pod, now)
        self._save(pod)

    def _signal(self, pod: _Pod, sig) -> None:
        for c in pod.record.containers:
            signal_container(pod.handles.get(c.name), podcgroups.members(self.backend, c.cgroup), sig)

    def _advance_stop(self, pod: _Pod, now: float) -> bool:
        """One step of a stop: notice exits, SIGKILL after the deadline, finish once nothing runs. True: done."""
        st = pod.record.stopping
        self._poll(pod, now)
        running = any(c.state == ACTIVE for c in pod.record.containers) or \
            any(podcgroups.members(self.backend, c.cgroup) for c in pod.record.containers)
        if running:
            if now >= st.deadline:
                if not st.killed:
                    log.warning("local runtime: pod %s did not stop within its grace period; killing it",
                                pod.record.key)
                self._signal(pod, SIGKILL)  # again each tick while anything is left
                st.killed, pod.dirty = True, True
            return False
        if not self._cleanup(pod):
            return False
        self._finish_stop(pod, now)
        return True

    def _finish_stop(self, pod: _Pod, now: float) -> None:
        st, r = pod.record.stopping, pod.record
        log.info("local runtime: pod %s stopped (%s)", r.key, st.kind)
        if st.kind == STOP:
            self._drop(pod)
            return
        for c in r.containers:  # a restart that was due never comes now
            if c.state == WAITING and st.kind == EVICT:
                c.state, c.finished_at = TERMINATED, c.finished_at or now
        r.stopping, pod.dirty = None, True
        if st.kind == EVICT:
            self._fail(pod, EVICTED, st.reason)
        else:
            self._update_phase(pod)
        self._save(pod)

    def _drop(self, pod: _Pod) -> None:
        self._pods.pop(pod.record.uid, None)
        self.state.remove(pod.record.uid)
        self._remember_stopped(pod.record.uid)

    def _remember_stopped(self, uid: str) -> None:
        self._stopped[uid] = None
        self._stopped.move_to_end(uid)
        while len(self._stopped) > 10_000:
            self._stopped.popitem(last=False)

    # -- shutdown ---------------------------------------------------------------------------------
    def hurry(self) -> None:
        """Make a shutdown in progress kill at once (a second Ctrl-C)."""
        self._hurry.set()

    def shutdown(self, grace: float | None = None) -> None:
        """Stop every pod (at most ``grace`` seconds each, else its own) and remove every cgroup made.

        Blocks until done.  Records stay: the next runtime on this state directory
        starts the pods again under their restart policies, as after a reboot.
        """
        with self._lock:
            self._closed = True
            now, longest = self.clock(), 0.0
            for pod in self._pods.values():
                own = pod.spec.grace_seconds if pod.spec is not None else DEFAULT_GRACE
                wait = max(0.0, own if grace is None else min(own, grace))
                if pod.record.stopping is not None:
                    pod.record.stopping.deadline = min(pod.record.stopping.deadline, now + wait)
                elif pod.record.cgroup:
                    self._begin_stop(pod, SHUTDOWN, "agent shutdown", wait)
                longest = max(longest, wait)
            limit = time.monotonic() + longest + 10  # SIGKILLed by then, or stuck in the kernel: give up
            while True:
                now = self.clock()
                pending = [p for p in self._pods.values() if p.record.stopping is not None]
                if not pending or time.monotonic() > limit:
                    break
                for pod in pending:
                    if self._hurry.is_set():
                        pod.record.stopping.deadline = min(pod.record.stopping.deadline, now)
                    self._advance_stop(pod, now)
                time.sleep(0.02)
            for pod in list(self._pods.values()):
                if pod.record.stopping is not None or not self._cleanup(pod):
                    log.error("local runtime: pod %s still has processes or cgroups after shutdown", pod.record.key)
                if pod.dirty and pod.record.uid in self._pods:
                    self._save(pod)
            if isinstance(self.layout, FixedLayout):
                for parent in (self.layout.online_parent, self.layout.offline_parent, self.layout.root):
                    podcgroups.remove_if_empty(self.backend, parent)

    # -- adoption ---------------------------------------------------------------------------------
    def _adopt(self) -> None:
        for record in self.state.load_all():
            spec, problem = None, None
            if record.manifest is not None:
                try:
                    spec = parse_pod(record.manifest, uid=record.uid, node_name=self.node_name,
                                     base_env=self.base_env)
                except SpecError as exc:
                    problem = exc
            pod = self._pods[record.uid] = _Pod(record, spec)
            if problem is not None and not pod.terminal:
                self._fail(pod, problem.reason, problem.message)
            adopted = 0
            for c in record.containers:
                if c.state == ACTIVE or (c.state == WAITING and not c.attempted):
                    handle = find_wrapper(c.pid, c.pid_start, cgroup=c.cgroup, version=self.backend.version,
                                          exit_file=self.state.exit_file(record.uid, c.name),
                                          members=podcgroups.members(self.backend, c.cgroup), proc=self.proc)
                    if handle is not None:
                        pod.handles[c.name] = handle
                        c.state, c.pid, c.pid_start, c.attempted = ACTIVE, handle.pid, handle.create_time, True
                        adopted += 1
            log.info("local runtime: adopted pod %s (%s, %d running container(s))", record.key, record.phase,
                     adopted)

    # -- reporting and saving ---------------------------------------------------------------------
    def _save(self, pod: _Pod) -> None:
        if not safe_name(pod.record.uid):
            return
        try:
            self.state.save(pod.record)
            pod.dirty = False
        except OSError as exc:
            log.error("local runtime: cannot save pod %s: %s", pod.record.key, exc)

    def _count(self) -> None:
        if self.metrics is None:
            return
        counts: dict[str, int] = {}
        for pod in self._pods.values():
            counts[pod.record.phase] = counts.get(pod.record.phase, 0) + 1
        self.metrics.runtime_phases(counts)

