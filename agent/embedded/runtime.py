"""Embedded mode's local runtime: the pods bound to this node, run as local processes in real cgroups.

The scheduler sends :class:`~proto.model.PodAction`\\ s; :meth:`LocalRuntime.apply`
carries them out:

* START (``pod_uid``, ``pod_json``: the pod manifest) — idempotent by uid.
  Each container's command runs through the wrapper of :mod:`.process` in its
  own container cgroup below the pod cgroup the agent's layout names, with
  the kubelet's limits (:mod:`.podcgroups`); logs go to files (:mod:`.records`).
  Before its containers, the pod gets its surroundings (:mod:`.podsetup`): a
  network namespace with the address the scheduler gave it (unless
  ``hostNetwork``), its volumes' files and a private ``/etc/hosts`` naming its
  namespace's pods and Services, entered by each container (:mod:`.podns`).
  A START for a pod held already rewrites its hosts file when the names changed.
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
143 or 137 and the message that the agent's shutdown stopped them).  Bad
input — pod JSON that does not parse, a pod without containers, a cgroup that
cannot be made — is logged with the pod named and reported as a Failed pod
with a reason; it never stops the agent.

This module is the façade: it takes the lock, refuses work once shut down,
and hands each job to its module — :mod:`.starting` (START, launches and
restarts), :mod:`.exits` (exits noticed, restarts decided, phases),
:mod:`.stopping` (STOP, EVICT and shutdown: the grace state machine),
:mod:`.adoption` (pods an earlier agent left) and :mod:`.held` (the pods held,
their records saved) — all sharing one :class:`~agent.embedded.context.RuntimeContext`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from agent.cgroups.backend import Backend
from agent.cgroups.executor import Executor
from agent.cgroups.layout import FixedLayout, Layout
from agent.embedded import adoption, exits, podcgroups, starting, stopping
from agent.embedded.context import LOGGER, RuntimeContext, default_base_env
from agent.embedded.held import Held, HeldPod
from agent.embedded.phase import Backoff
from agent.embedded.podnet import PodNetwork
from agent.embedded.podns import find_tools
from agent.embedded.records import StateDir, to_runtime
from agent.metrics import AgentMetrics
from agent.pods import PodInfo
from proto.errors import InputError
from proto.model import Directive, PodAction, PodActionKind, PodRuntime

log = logging.getLogger(LOGGER)


class LocalRuntime:
    def __init__(self, state_dir: str | os.PathLike[str], backend: Backend, layout: Layout,
                 clock: Callable[[], float] = time.time, *, executor: Executor | None = None,
                 backoff: Backoff | None = None, node_name: str = "", base_env: Mapping[str, str] | None = None,
                 workdir: str | None = None, proc: str = "/proc", max_finished: int = 500,
                 metrics: AgentMetrics | None = None, network: PodNetwork | None = None):
        state = StateDir(state_dir)
        self.host = RuntimeContext(backend=backend, layout=layout, executor=executor or Executor(backend), state=state,
                         clock=clock, backoff=backoff or Backoff(), node_name=node_name,
                         base_env=dict(default_base_env() if base_env is None else base_env),
                         workdir=workdir or os.getcwd(), proc=proc, metrics=metrics, network=network,
                         tools=find_tools())
        self.held = Held(state)
        self.max_finished = max_finished
        self._lock = threading.RLock()
        self._closed = False
        self._hurry = threading.Event()
        if isinstance(layout, FixedLayout):  # there from the start: the agent measures them and looks for cpu.idle
            for parent in (layout.online_parent, layout.offline_parent):
                try:
                    podcgroups.make(backend, parent)
                except OSError as exc:
                    raise InputError(f"local runtime: cannot create cgroup {parent}: {exc}") from None
        adoption.adopt(self.host, self.held)
        if network is not None:  # what an agent killed on this state folder left and no pod owns
            for name in network.sweep({p.record.uid for p in self.held if p.record.netns}):
                log.info("local runtime: removed leftover network namespace %s", name)
            network.bridges.update(network.bridge_of(p.spec.network.address.cidr) for p in self.held
                                   if p.spec is not None and p.spec.network.address is not None)

    # -- what the runtime works with ---------------------------------------------------------------
    @property
    def backend(self) -> Backend:
        return self.host.backend

    @property
    def layout(self) -> Layout:
        return self.host.layout

    @property
    def state(self) -> StateDir:
        return self.host.state

    @property
    def clock(self) -> Callable[[], float]:
        return self.host.clock

    @property
    def metrics(self) -> AgentMetrics | None:
        return self.host.metrics

    @property
    def executor(self) -> Executor:
        """Writes the pods' limits: the agent's executor, so that every cgroup write goes through one seam."""
        return self.host.executor

    @executor.setter
    def executor(self, executor: Executor) -> None:
        self.host.executor = executor

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
            return [p.spec.info for p in self.held if p.spec is not None and p.record.cgroup]

    def runtime(self) -> list[PodRuntime]:
        """Every pod held, as the report carries it."""
        with self._lock:
            return [to_runtime(p.record, self.state.log_dir(p.record)) for p in self.held]

    # -- START, STOP, EVICT -----------------------------------------------------------------------
    def start(self, pod_json: str, *, uid: str = "", namespace: str = "", name: str = "") -> None:
        with self._lock:
            if self._closed:
                log.warning("local runtime: shut down; not starting pod %s/%s", namespace, name)
                return
            starting.start(self.host, self.held, pod_json, uid=uid, namespace=namespace, name=name)

    def stop(self, uid: str, grace: float | None = None, *, reason: str = "") -> None:
        """Stop the pod (deleted, or its final phase recorded): TERM, KILL after ``grace``, then dropped."""
        with self._lock:
            self.held.remember_stopped(uid)
            pod = self.held.get(uid)
            if pod is not None:
                stopping.stop(self.host, self.held, pod, grace, reason)

    def evict(self, uid: str, reason: str, grace: float | None = None, *, at_most: float | None = None) -> bool:
        """Evict the pod: stopped as by STOP, then reported Failed/Evicted with ``reason``. True: gone or going.

        ``grace``: None for the pod's own; ``at_most`` caps it (the agent's evictions under pressure)."""
        with self._lock:
            pod = self.held.get(uid)
            if pod is not None:
                stopping.evict(self.host, self.held, pod, reason, grace, at_most)
            return True

    def forget(self, uid: str) -> bool:
        """Drop a finished pod from what the runtime reports (a running one is stopped first, as by STOP)."""
        with self._lock:
            pod = self.held.get(uid)
            if pod is None:
                return False
            if pod.terminal and pod.record.stopping is None and stopping.cleanup(self.host, pod):
                self.held.remember_stopped(uid)
                self.held.drop(pod)
                return True
            self.stop(uid)
            return False

    # -- the slow loop ----------------------------------------------------------------------------
    def tick(self) -> None:
        """Notice exits, restart what is due, advance stops, remove finished pods' cgroups, save changes."""
        with self._lock:
            if self._closed:
                return
            now = self.clock()
            for pod in list(self.held):
                try:
                    self._tick_pod(pod, now)
                except Exception:  # one pod's trouble must not stop the others (or the agent)
                    log.exception("local runtime: pod %s: tick failed", pod.record.key)
                self.held.save_if_dirty(pod)
            self.held.trim_finished(self.max_finished)
            if self.metrics is not None:
                self.metrics.runtime_phases(self.held.phase_counts())

    def _tick_pod(self, pod: HeldPod, now: float) -> None:
        if pod.record.stopping is not None:
            stopping.advance(self.host, self.held, pod, now)
            return
        if pod.terminal or pod.spec is None:
            if pod.record.cgroup or pod.record.netns or pod.record.prepared:
                stopping.cleanup(self.host, pod)  # retried until the kernel lets the cgroups go
            return
        exits.poll(self.host, pod, now)
        starting.launch_due(self.host, pod, pod.spec, now)
        exits.update_phase(pod)
        if pod.terminal:
            stopping.cleanup(self.host, pod)

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
            stopping.shutdown(self.host, self.held, grace, self._hurry)
            layout = self.layout
            if isinstance(layout, FixedLayout):
                for parent in (layout.online_parent, layout.offline_parent, layout.root):
                    podcgroups.remove_if_empty(self.backend, parent)
            if self.host.network is not None:
                self.host.network.close()
