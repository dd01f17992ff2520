"""Adopting the pods an earlier agent left under the state directory (after a crash, a SIGKILL or a reboot).

Each record that reads back is held again.  A container whose wrapper still
runs — the recorded pid with the same start time, in its cgroup, or any
wrapper for its exit file — is watched, not started again; one that ended
meanwhile is noticed by the next tick and gets its exit code from the
wrapper's exit file.  A record whose manifest no longer parses is failed with
the reason.
"""

from __future__ import annotations

import logging

from agent.embedded import exits, podcgroups
from agent.embedded.context import LOGGER, RuntimeContext
from agent.embedded.held import Held, HeldPod
from agent.embedded.phase import ACTIVE, WAITING
from agent.embedded.process import find_wrapper
from agent.embedded.spec import PodSpec, SpecError, parse_pod

log = logging.getLogger(LOGGER)


def adopt(host: RuntimeContext, held: Held) -> None:
    """Hold every pod recorded under the state directory, with the containers still running."""
    for record in host.state.load_all():
        spec: PodSpec | None = None
        problem: SpecError | None = None
        if record.manifest is not None:
            try:
                spec = parse_pod(record.manifest, uid=record.uid, node_name=host.node_name, base_env=host.base_env)
            except SpecError as exc:
                problem = exc
        pod = held.add(HeldPod(record, spec))
        if problem is not None and not pod.terminal:
            exits.fail(pod, problem.reason, problem.message)
        adopted = 0
        for c in record.containers:
            if c.state == ACTIVE or (c.state == WAITING and not c.attempted):
                handle = find_wrapper(c.pid, c.pid_start, cgroup=c.cgroup, version=host.backend.version,
                                      exit_file=host.state.exit_file(record.uid, c.name),
                                      members=podcgroups.members(host.backend, c.cgroup), proc=host.proc)
                if handle is not None:
                    pod.handles[c.name] = handle
                    c.state, c.pid, c.pid_start, c.attempted = ACTIVE, handle.pid, handle.create_time, True
                    adopted += 1
        log.info("local runtime: adopted pod %s (%s, %d running container(s))", record.key, record.phase, adopted)
