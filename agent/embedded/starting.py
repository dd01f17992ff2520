"""Starting a pod: its record, its cgroups with the kubelet's limits, and each container's process.

START is idempotent by uid, and a late START for a pod stopped lately is
ignored.  The record is saved before any process exists (a crash from there on
is adopted, not duplicated); then the pod cgroup and a cgroup per container are
made (:mod:`.podcgroups`), their limits written through the agent's executor,
and each container's command spawned through the wrapper of :mod:`.process`.
A container due to start again after its back-off is launched the same way
(:func:`launch_due`), its cgroups made again if they went missing.  A pod that
cannot be run — a manifest that does not parse, a cgroup that cannot be made —
is recorded Failed with the reason; a command that cannot start, for whatever
reason (not found, an environment exec refuses, a bug), ends its container
with StartError and the reason, and restarts wait their back-off as after any
exit: never a restart storm.
"""

from __future__ import annotations

import logging

from agent.embedded import exits, podcgroups, podsetup, stopping
from agent.embedded.context import LOGGER, RuntimeContext
from agent.embedded.held import Held, HeldPod
from agent.embedded.phase import ACTIVE, FAILED, START_ERROR_EXIT, WAITING
from agent.embedded.process import Handle, StartFailed, spawn
from agent.embedded.records import ContainerRecord, PodRecord
from agent.embedded.spec import START_ERROR, PodSpec, SpecError, load_manifest, parse_pod, safe_name

log = logging.getLogger(LOGGER)


def start(host: RuntimeContext, held: Held, pod_json: str, *, uid: str, namespace: str, name: str) -> None:
    """START: run the pod ``pod_json`` describes (the action's uid, namespace and name where it names none)."""
    try:
        doc = load_manifest(pod_json)
    except SpecError as exc:
        refuse(host, held, uid, namespace, name, None, exc)
        return
    raw_meta = doc.get("metadata")
    meta = raw_meta if isinstance(raw_meta, dict) else {}
    uid = str(meta.get("uid") or uid)
    namespace, name = str(meta.get("namespace") or namespace or "default"), str(meta.get("name") or name)
    if (held_pod := held.get(uid)) is not None:  # runs already: only what may change while it runs (its names)
        podsetup.refresh_hosts(host, held_pod, pod_json)
        return
    if held.was_stopped(uid):
        log.warning("local runtime: pod %s/%s (%s) was stopped; ignoring a late START", namespace, name, uid)
        return
    try:
        spec = parse_pod(doc, uid=uid, node_name=host.node_name, base_env=host.base_env)
    except SpecError as exc:
        refuse(host, held, uid, namespace, name, doc, exc)
        return
    _run(host, held, doc, spec)


def _run(host: RuntimeContext, held: Held, doc: dict, spec: PodSpec) -> None:
    now = host.clock()
    pod_path = podcgroups.pod_cgroup(host.layout, spec)
    record = PodRecord(spec.uid, spec.namespace, spec.name, manifest=doc, started_at=now, cgroup=pod_path,
                       containers=[ContainerRecord(c.name, podcgroups.container_cgroup(pod_path, spec.uid, c.name))
                                   for c in spec.containers])
    pod = held.add(HeldPod(record, spec))
    held.save(pod)  # before any process exists: a crash from here on is adopted, not duplicated
    try:
        make_cgroups(host, pod, spec)
    except OSError as exc:
        exits.fail(pod, START_ERROR, f"cannot create cgroup {pod_path}: {exc}")
        stopping.cleanup(host, pod)
        held.save(pod)
        return
    try:
        podsetup.prepare(host, pod, spec)
    except podsetup.SetupError as exc:
        log.error("local runtime: pod %s: %s: %s", spec.key, exc.reason, exc.message)
        exits.fail(pod, exc.reason, exc.message)
        stopping.cleanup(host, pod)
        held.save(pod)
        return
    log.info("local runtime: starting pod %s (%s) in %s", spec.key, spec.uid, pod_path)
    for c in record.containers:
        launch(host, pod, spec, c, now)
    exits.update_phase(pod)
    held.save(pod)


def refuse(host: RuntimeContext, held: Held, uid: str, namespace: str, name: str, doc: dict | None, exc: SpecError) -> None:
    """A pod that will not run: logged, and reported Failed with the reason if it has a usable uid."""
    key = f"{namespace or 'default'}/{name}" if name else (uid or "?")
    log.error("local runtime: not running pod %s (%s): %s: %s", key, uid or "no uid", exc.reason, exc.message)
    if not safe_name(uid) or uid in held or held.was_stopped(uid):
        return  # nothing to report it under (or already reported)
    record = PodRecord(uid, namespace or "default", name, manifest=doc, phase=FAILED, reason=exc.reason,
                       message=exc.message, started_at=host.clock())
    held.save(held.add(HeldPod(record, None)))


def make_cgroups(host: RuntimeContext, pod: HeldPod, spec: PodSpec) -> None:
    """The pod's container cgroups (and so the pod cgroup), and the kubelet's limits on them."""
    for c in pod.record.containers:
        podcgroups.make(host.backend, c.cgroup)
    host.executor.apply(podcgroups.limit_writes(spec, pod.record.cgroup, version=host.backend.version,
                                                offline_parent=host.layout.offline_parent))


def launch_due(host: RuntimeContext, pod: HeldPod, spec: PodSpec, now: float) -> None:
    """Launch the containers not started yet and those whose back-off has ended."""
    for c in pod.record.containers:
        if c.state == WAITING and (not c.attempted or c.next_start_at <= now):
            launch(host, pod, spec, c, now)


def launch(host: RuntimeContext, pod: HeldPod, spec: PodSpec, c: ContainerRecord, now: float) -> None:
    """Start container ``c`` (again); one that cannot start ends at once with StartError."""
    container = next(s for s in spec.containers if s.name == c.name)
    if c.attempted:
        c.restarts += 1
        if host.metrics is not None:
            host.metrics.runtime_restarts.inc()
    c.attempted, c.started_at, c.next_start_at, pod.dirty = True, now, 0.0, True
    pod.record.cgroup = pod.record.cgroup or podcgroups.pod_cgroup(host.layout, spec)
    try:
        # made again if gone meanwhile (a reboot, someone's rmdir), and the limits written again if an agent
        # killed between making the cgroups and writing them left them without (both write only what differs)
        make_cgroups(host, pod, spec)
        podsetup.prepare(host, pod, spec)  # again after the agent's shutdown released them (nothing if in place)
        if c.restarts:  # each run's output apart: the last one's becomes <container>.previous.log
            host.state.rotate_log(pod.record, c.name)
        cwd = container.working_dir or host.workdir
        exit_file = host.state.exit_file(pod.record.uid, c.name)
        started = spawn(container.argv, env=container.env, cwd=cwd, log_path=host.state.log_path(pod.record, c.name),
                        exit_file=exit_file, procs_files=podcgroups.procs_files(host.backend, c.cgroup),
                        prefix=podsetup.entry(host, pod, spec, container, exit_file, cwd),
                        mounted=[m.mount_path for m in container.mounts])
    except podsetup.SetupError as exc:
        log.error("local runtime: pod %s container %s did not start: %s", pod.record.key, c.name, exc.message)
        exits.exited(host, pod, c, START_ERROR_EXIT, now, reason=exc.reason, message=exc.message)
        return
    except (StartFailed, OSError) as exc:
        log.error("local runtime: pod %s container %s did not start: %s", pod.record.key, c.name, exc)
        exits.exited(host, pod, c, START_ERROR_EXIT, now, reason=START_ERROR, message=str(exc))
        return
    except Exception as exc:  # a bug; still a failed start, so that the back-off holds (never a restart a tick)
        log.exception("local runtime: pod %s container %s did not start", pod.record.key, c.name)
        exits.exited(host, pod, c, START_ERROR_EXIT, now, reason=START_ERROR, message=f"cannot start: {exc}")
        return
    c.oom_kills = exits.oom_kills(host, pod, c)
    c.state, c.pid, c.pid_start, c.exit_code, c.reason, c.message = ACTIVE, started.pid, started.create_time, 0, "", ""
    pod.handles[c.name] = Handle(started.pid, started.create_time, started.popen)
