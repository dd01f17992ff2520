"""NUMA zones and devices in one session: what is free, what fits, and which zones and devices a pod gets.

The scheduler counts per-zone CPU and memory and per-device memory, core
share and holders from *its own* placements (the decisions written on running
pods, ``scoria.io/numa-nodes`` and ``scoria.io/devices``), not from measured
usage: a zone freed by a finished pod is free in the very next cycle, and the
sum of what pods were given never exceeds a device.

Two plugins turn parts of this on: ``numa-aware`` (NUMA policies: zone fit
and pinning) and ``deviceshare`` (device fit and the choice of devices).  The
session places and releases through :meth:`Topology.place` and
:meth:`Topology.release`, so a statement's rollback undoes device and zone
choices exactly like node resources.

Pods on resources being released (evictions under way) keep their zones and
devices until they are gone: a pod needing them waits for the next cycle.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from math import comb

import numpy as np

from ..api.placement import (
    DEVICES_ANNOTATION, NUMA_NODES_ANNOTATION, DeviceGrant, DeviceRequest, encode_devices, encode_zones,
)
from .inventory import POLICY_CODES, UNLINKED_COST, StaticTopology
from .resources import CPU, EPS, MEMORY
from .snapshot import TaskInfo, TaskStatus

log = logging.getLogger(__name__)

NONE, BEST_EFFORT, RESTRICTED, SINGLE = 0, 1, 2, 3
MAX_DEVICE_SETS = 2000  # device subsets tried exhaustively for one pod; beyond, a greedy nearest-first pick


@dataclass(slots=True)
class Assignment:
    node: int
    zones: tuple[int, ...]  # zone positions on the node (empty: not pinned)
    cpu: float  # per zone
    memory: float  # per zone
    devices: list[tuple[int, float, float, bool]]  # (device, memory MiB, cores %, whole)


class Topology:
    def __init__(self, static: StaticTopology):
        self.s = static
        n, z = static.known.size, static.zones
        self.zone_cpu_used = np.zeros((n, z))
        self.zone_memory_used = np.zeros((n, z))
        d = static.dev_node.size
        self.dev_memory_used = np.zeros(d)
        self.dev_cores_used = np.zeros(d)
        self.dev_holders = np.zeros(d, dtype=np.int32)
        self.dev_whole = np.zeros(d, dtype=bool)  # held by a pod that may be alone on it
        self.numa = False  # numa-aware is on: policies are honoured and pods pinned
        self.devices = False  # deviceshare is on: devices are counted and chosen
        self.binpack = True  # deviceshare.SchedulePolicy
        self.assigned: dict[str, Assignment] = {}
        self.version = 0
        self._uuid_pos: dict[int, dict[str, int]] = {}
        self._kind = {name: k for k, name in enumerate(static.resources)}

    # -- what a pod asks ---------------------------------------------------------------------
    def policy(self, task: TaskInfo) -> np.ndarray:
        """The NUMA policy in force for ``task`` on every node (codes NONE … SINGLE).

        The pod's annotation, or for Guaranteed pods the node's kubelet policy
        when that is stricter (the kubelet enforces it for them in any case).
        """
        n = self.s.known.size
        if not self.numa:
            return np.zeros(n, dtype=np.int8)
        own = POLICY_CODES[task.facts.numa_policy]
        if task.pod.qos_class == "Guaranteed":
            return np.maximum(self.s.policy, own)
        return np.full(n, own, dtype=np.int8)

    def requests(self, task: TaskInfo) -> tuple[DeviceRequest, ...]:
        return task.facts.devices if self.devices else ()

    # -- devices -----------------------------------------------------------------------------
    def suitable(self, r: DeviceRequest) -> np.ndarray:
        """Devices (flat) that could take one share of ``r`` now."""
        s = self.s
        kind = self._kind.get(r.resource)
        if kind is None:
            return np.zeros(s.dev_node.size, dtype=bool)
        ok = (s.dev_kind == kind) & s.dev_healthy
        if r.exclusive:
            ok &= self.dev_holders == 0
            return ok if r.memory_mib is None else ok & (s.dev_memory + EPS >= r.memory_mib)
        ok &= ~self.dev_whole & (self.dev_cores_used + r.cores <= 100 + EPS)
        if r.memory_mib is None:
            return ok & (self.dev_memory_used <= EPS)
        return ok & (s.dev_memory - self.dev_memory_used + EPS >= r.memory_mib)

    def device_counts(self, r: DeviceRequest) -> np.ndarray:
        """Per node: how many devices could take a share of ``r``."""
        ok = self.suitable(r)
        return np.bincount(self.s.dev_node[ok], minlength=self.s.known.size)

    def zone_device_counts(self, r: DeviceRequest, ok: np.ndarray | None = None) -> np.ndarray:
        """Per node and zone ``(nodes, Z)``; devices without NUMA affinity count in every zone."""
        s = self.s
        ok = self.suitable(r) if ok is None else ok
        n, z = s.known.size, s.zones
        pinned = ok & (s.dev_zone >= 0)
        counts = np.bincount(s.dev_node[pinned] * z + s.dev_zone[pinned], minlength=n * z).reshape(n, z)
        anywhere = np.bincount(s.dev_node[ok & (s.dev_zone < 0)], minlength=n)
        return counts + anywhere[:, None]

    def device_fit(self, task: TaskInfo) -> np.ndarray | None:
        """Nodes whose devices can take every device request of ``task``; None when it asks for none."""
        reqs = self.requests(task)
        if not reqs:
            return None
        s = self.s
        mask = np.ones(s.known.size, dtype=bool)
        for r in reqs:
            # a node that reports no hardware leaves whole devices to its device plugin (and the node's
            # allocatable, which predicates check); shared GPUs need the per-device accounting
            mask &= np.where(s.known, self.device_counts(r) >= r.count, not r.shared)
        return mask

    # -- zones -------------------------------------------------------------------------------
    def _zone_need(self, task: TaskInfo) -> tuple[float, float, list[tuple[np.ndarray, int]]]:
        reqs = self.requests(task)
        return task.req[CPU], task.req[MEMORY], [(self.zone_device_counts(r), r.count) for r in reqs]

    def _combos_fit(self, size: int, cpu: np.ndarray, mem: np.ndarray, devs: list[tuple[np.ndarray, int]],
                    c: float, m: float) -> np.ndarray:
        """Per node: is there a set of ``size`` existing zones whose sums cover the request?"""
        s = self.s
        out = np.zeros(s.known.size, dtype=bool)
        for combo in itertools.combinations(range(s.zones), size):
            cols = list(combo)
            ok = s.zone_exists[:, cols].all(axis=1)
            ok &= cpu[:, cols].sum(axis=1) + EPS >= c
            ok &= mem[:, cols].sum(axis=1) + EPS >= m
            for counts, need in devs:
                ok &= counts[:, cols].sum(axis=1) >= need
            out |= ok
        return out

    def min_zones(self, task: TaskInfo) -> np.ndarray:
        """Per node: the fewest zones that could hold the pod on an empty node (Z+1 where none can)."""
        s = self.s
        c, m, _ = self._zone_need(task)
        caps = []
        for r in self.requests(task):
            kind = self._kind.get(r.resource)
            ok = (s.dev_kind == kind) & s.dev_healthy if kind is not None else np.zeros(s.dev_node.size, dtype=bool)
            caps.append((self.zone_device_counts(r, ok), r.count))
        need = np.full(s.known.size, s.zones + 1, dtype=np.int16)
        for size in range(s.zones, 0, -1):
            fits = self._combos_fit(size, s.zone_cpu, s.zone_memory, caps, c, m)
            need[fits] = size
        return need

    def fewest_free_zones(self, task: TaskInfo) -> np.ndarray:
        """Per node: the fewest zones whose free resources hold the pod now (Z+1 where none)."""
        s = self.s
        c, m, devs = self._zone_need(task)
        cpu, mem = s.zone_cpu - self.zone_cpu_used, s.zone_memory - self.zone_memory_used
        need = np.full(s.known.size, s.zones + 1, dtype=np.int16)
        for size in range(s.zones, 0, -1):
            need[self._combos_fit(size, cpu, mem, devs, c, m)] = size
        return need

    def numa_fit(self, task: TaskInfo) -> tuple[np.ndarray, np.ndarray]:
        """(fits, policy): nodes where ``task`` can be placed under its NUMA policy, and that policy."""
        policy = self.policy(task)
        strict = policy >= RESTRICTED
        fits = np.ones(policy.size, dtype=bool)
        if not strict.any():
            return fits, policy
        fits[strict & ~self.s.has_zones] = False
        free = self.fewest_free_zones(task)
        fits[policy == SINGLE] &= free[policy == SINGLE] == 1
        restricted = policy == RESTRICTED
        if restricted.any():
            fits[restricted] &= free[restricted] <= self.min_zones(task)[restricted]
        return fits, policy

    # -- placing -----------------------------------------------------------------------------
    def place(self, task: TaskInfo, node: int) -> None:
        """Choose and take the zones and devices ``task`` gets on ``node``; record them on the task."""
        if task.uid in self.assigned or not (self.numa or self.devices):
            return
        policy = int(self.policy(task)[node]) if self.numa else NONE
        zones: tuple[int, ...] = ()
        if policy >= BEST_EFFORT and self.s.has_zones[node]:
            zones = self._choose_zones(task, node, policy)
        grants = []
        for r in self.requests(task):
            if not self.s.known[node]:
                continue  # no inventory: the node's device plugin picks
            chosen = self._choose_devices(node, r, zones, strict=policy >= RESTRICTED)
            if len(chosen) < r.count:
                log.error("%s: no %s left on node %d after the predicate admitted it", task.name, r.describe(), node)
                continue
            for d in chosen:
                memory = float(self.s.dev_memory[d]) if r.memory_mib is None else float(r.memory_mib)
                grants.append((int(d), memory, float(r.cores if r.shared else 100), r.exclusive))
        self._take(task, Assignment(node, zones, *self._per_zone(task, zones), grants))

    def _per_zone(self, task: TaskInfo, zones: tuple[int, ...]) -> tuple[float, float]:
        if not zones:
            return 0.0, 0.0
        return task.req[CPU] / len(zones), task.req[MEMORY] / len(zones)

    def _take(self, task: TaskInfo, a: Assignment, *, record: bool = True) -> None:
        self._apply(a, +1)
        self.assigned[task.uid] = a
        if record and (a.zones or a.devices):
            placement = {}
            if a.zones:
                placement[NUMA_NODES_ANNOTATION] = encode_zones([self.s.zone_id(a.node, z) for z in a.zones])
            if a.devices:
                placement[DEVICES_ANNOTATION] = encode_devices([self._grant(d, mem, cores)
                                                                for d, mem, cores, _ in a.devices])
            task.placement = placement

    def _grant(self, d: int, memory: float, cores: float) -> DeviceGrant:
        dev = self.s.device(d)
        return DeviceGrant(dev.resource, dev.uuid, dev.index, int(memory), int(cores))

    def release(self, task: TaskInfo) -> None:
        a = self.assigned.pop(task.uid, None)
        if a is not None:
            self._apply(a, -1)
            task.placement = None

    def _apply(self, a: Assignment, sign: int) -> None:
        if a.zones:
            cols = list(a.zones)
            self.zone_cpu_used[a.node, cols] += sign * a.cpu
            self.zone_memory_used[a.node, cols] += sign * a.memory
        for d, memory, cores, whole in a.devices:
            self.dev_memory_used[d] += sign * memory
            self.dev_cores_used[d] += sign * cores
            self.dev_holders[d] += sign
            if whole:
                self.dev_whole[d] = sign > 0
        self.version += 1

    def _choose_zones(self, task: TaskInfo, node: int, policy: int) -> tuple[int, ...]:
        """The zones to pin to: the fewest that fit (one for single-numa-node), nearest together, tightest fit."""
        s = self.s
        c, m = task.req[CPU], task.req[MEMORY]
        reqs = self.requests(task)
        present = [z for z in range(s.zones) if s.zone_exists[node, z]]
        sizes = [1] if policy == SINGLE else range(1, len(present) + 1)
        if policy == RESTRICTED:
            sizes = [int(self.min_zones(task)[node])]
        cpu_free = s.zone_cpu[node] - self.zone_cpu_used[node]
        mem_free = s.zone_memory[node] - self.zone_memory_used[node]
        dev_free = [(self.zone_device_counts(r)[node], r.count) for r in reqs]
        distances = s.inventories[node].distances
        for size in sizes:
            best = None
            for combo in itertools.combinations(present, size):
                cols = list(combo)
                if cpu_free[cols].sum() + EPS < c or mem_free[cols].sum() + EPS < m:
                    continue
                if any(counts[cols].sum() < need for counts, need in dev_free):
                    continue
                spread = sum(distances[a][b] for a in combo for b in combo
                             if a < b and a < len(distances) and b < len(distances[a]))
                key = (spread, cpu_free[cols].sum() - c, combo)
                if best is None or key < best:
                    best = key
            if best is not None:
                return best[2]
        return ()  # best-effort and nothing fits in fewer zones than the node: not pinned

    def _choose_devices(self, node: int, r: DeviceRequest, zones: tuple[int, ...], *, strict: bool) -> list[int]:
        """``r.count`` devices on ``node``: inside ``zones`` when pinned, the best-connected set, binpack or spread."""
        s = self.s
        start, count = int(s.dev_start[node]), int(s.dev_count[node])
        ok = self.suitable(r)[start:start + count]
        cand = np.flatnonzero(ok) + start
        if zones:
            inside = np.isin(s.dev_zone[cand], zones) | (s.dev_zone[cand] < 0)
            if strict or inside.sum() >= r.count:
                cand = cand[inside]
        if cand.size < r.count:
            return []
        used = self.dev_memory_used[cand] / np.maximum(s.dev_memory[cand], 1) + self.dev_cores_used[cand] / 100
        order = cand[np.argsort(-used if self.binpack else used, kind="stable")]
        if r.count == 1:
            return [int(order[0])]
        return self._connected(node, [int(d) for d in order], r.count)

    def _connected(self, node: int, cand: list[int], k: int) -> list[int]:
        """The ``k`` of ``cand`` (in preference order) whose worst and total pair costs are lowest."""
        inv = self.s.inventories[node]
        index = {d: self.s.device(d).index for d in cand}

        def cost(a: int, b: int) -> float:
            i, j = sorted((index[a], index[b]))
            return inv.gpu_costs.get((i, j), UNLINKED_COST)

        if comb(len(cand), k) <= MAX_DEVICE_SETS:
            best, best_key = None, None
            for rank, combo in enumerate(itertools.combinations(cand, k)):
                pairs = [cost(a, b) for a, b in itertools.combinations(combo, 2)]
                key = (max(pairs), sum(pairs), rank)
                if best_key is None or key < best_key:
                    best, best_key = combo, key
            return list(best)
        chosen = [cand[0]]
        while len(chosen) < k:  # greedy: add the candidate nearest to those already chosen
            rest = [d for d in cand if d not in chosen]
            chosen.append(min(rest, key=lambda d: (max(cost(d, c) for c in chosen), rest.index(d))))
        return chosen

    # -- what the snapshot says is already there -------------------------------------------------
    def load(self, tasks: list[TaskInfo]) -> None:
        """Count the zones and devices of pods already on nodes (from their recorded decisions)."""
        for task in tasks:
            if task.status not in (TaskStatus.RUNNING, TaskStatus.RELEASING) or task.node < 0:
                continue
            node, facts = task.node, task.facts
            zones = self._zone_positions(task, node, facts.zones) if facts.zones and self.s.has_zones[node] else ()
            devices = self._granted(task, node, facts.grants) if facts.grants else []
            if not devices and self.requests(task) and self.s.known[node]:
                # bound without a recorded choice (another scheduler, or before us): count it on the
                # devices we would have chosen, so what it uses is never handed out twice
                for r in self.requests(task):
                    for d in self._choose_devices(node, r, (), strict=False):
                        memory = float(self.s.dev_memory[d]) if r.memory_mib is None else float(r.memory_mib)
                        devices.append((d, memory, float(r.cores if r.shared else 100), r.exclusive))
            if zones or devices:
                self._take(task, Assignment(node, zones, *self._per_zone(task, zones), devices), record=False)

    def _zone_positions(self, task: TaskInfo, node: int, ids: tuple[int, ...]) -> tuple[int, ...]:
        known = self.s.inventories[node].zone_ids
        missing = [z for z in ids if z not in known]
        if missing:
            log.warning("pod %s: recorded NUMA zones %s do not exist on its node; counted as not pinned",
                        task.name, missing)
            return ()
        return tuple(known.index(z) for z in ids)

    def _granted(self, task: TaskInfo, node: int, grants: tuple[DeviceGrant, ...]) -> list:
        pos = self._uuid_pos.get(node)
        if pos is None:
            start = int(self.s.dev_start[node])
            pos = self._uuid_pos[node] = {self.s.device(d).uuid: d
                                          for d in range(start, start + int(self.s.dev_count[node]))}
        out = []
        for g in grants:
            d = pos.get(g.uuid)
            if d is None:
                log.warning("pod %s: recorded device %s is not on its node any more", task.name, g.uuid)
                continue
            out.append((d, float(g.memory_mib), float(g.cores), g.cores >= 100))
        return out
