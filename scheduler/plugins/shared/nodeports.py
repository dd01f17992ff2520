"""Host ports on nodes, kube-scheduler's NodePorts filter, counted as arrays over the nodes.

A pod asking for ``hostPort`` P (protocol, host IP) does not fit a node where
another pod already holds the same protocol and port on the same IP, or where
either of them binds every address (``0.0.0.0``).  Holders are the pods on the
node — running, placed or pipelined this session, and those being evicted
until they are gone — kept in step through the placement events, so asking
costs a few array operations per wanted port and nothing for a pod with none.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from scheduler.api.objects import HostPort
from scheduler.framework.snapshot import JobInfo, TaskInfo, TaskStatus

ANY_IP = "0.0.0.0"
REASON = "node(s) didn't have free ports for the requested pod ports"
# Statuses whose pods hold their ports on their node (being released: until they are gone).
_HOLDING = (TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RUNNING, TaskStatus.RELEASING)


class PortTable:
    """Per (protocol, port), per host IP: how many pods hold it on each node, and how many of them are
    being released."""

    def __init__(self, count: int, jobs: Iterable[JobInfo]):
        self.count = count
        self.held: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self.releasing: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self._released: set[str] = set()  # tasks counted as releasing (evicted, or terminating in the snapshot)
        self._node: dict[str, int] = {}  # where each counted task holds its ports (a placement undone has left it)
        for job in jobs:
            for task in job.tasks.values():
                if task.pod.host_ports and task.node >= 0 and task.status in _HOLDING:
                    self._node[task.uid] = task.node
                    self._add(self.held, task, task.node, +1)
                    if task.status == TaskStatus.RELEASING:
                        self._add(self.releasing, task, task.node, +1)
                        self._released.add(task.uid)

    def _add(self, table: dict[tuple[str, int], dict[str, np.ndarray]], task: TaskInfo, node: int,
             sign: int) -> None:
        for hp in task.pod.host_ports:
            by_ip = table.setdefault((hp.protocol, hp.port), {})
            counts = by_ip.get(hp.ip)
            if counts is None:
                counts = by_ip[hp.ip] = np.zeros(self.count, dtype=np.int32)
            counts[node] += sign

    # -- the session's placement events (only tasks with host ports come here) ------------------
    def placed(self, task: TaskInfo) -> None:
        """``on_allocate``: placed or pipelined, or an eviction undone."""
        if task.uid in self._released:  # an eviction undone: it holds its ports for good again
            self._released.discard(task.uid)
            self._add(self.releasing, task, self._node[task.uid], -1)
        else:
            self._node[task.uid] = task.node
            self._add(self.held, task, task.node, +1)

    def removed(self, task: TaskInfo) -> None:
        """``on_deallocate``: evicted (it holds its ports until it is gone), or a placement undone."""
        node = self._node.get(task.uid)
        if node is None:
            return
        if task.status == TaskStatus.RELEASING:
            self._released.add(task.uid)
            self._add(self.releasing, task, node, +1)
        else:
            del self._node[task.uid]
            self._add(self.held, task, node, -1)

    # -- the filter -------------------------------------------------------------------------------
    def conflicts(self, wanted: Iterable[HostPort], *, future: bool) -> np.ndarray:
        """Nodes where some wanted port is taken (``future``: once the pods being evicted are gone)."""
        out = np.zeros(self.count, dtype=bool)
        for hp in wanted:
            by_ip = self.held.get((hp.protocol, hp.port))
            if not by_ip:
                continue
            ips = by_ip if hp.ip == ANY_IP else [ip for ip in (ANY_IP, hp.ip) if ip in by_ip]
            for ip in ips:
                taken = by_ip[ip]
                if future:
                    leaving = self.releasing.get((hp.protocol, hp.port), {}).get(ip)
                    if leaving is not None:
                        taken = taken - leaving
                out |= taken > 0
        return out
