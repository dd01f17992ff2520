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

GPUs are asked for four ways (``DeviceRequest.mode``), all counted on the same
per-device memory, core share and holders, so no way oversells another on one
GPU: whole devices (``nvidia.com/gpu``), HAMi's vGPUs (``volcano.sh/vgpu-*``),
and Volcano's older sharing — ``volcano.sh/gpu-memory`` (MiB of one GPU,
shared with other pods asking for memory or for vGPUs) and
``volcano.sh/gpu-number`` (whole GPUs, alone).  Volcano never enables the
older sharing together with vGPUs, nor memory together with number, so on its
clusters modes meet on one GPU only when the configuration changed under
running pods; here every grant counts whatever the configuration: a GPU's
memory is never given twice, and an exclusive grant (whole, ``gpu-number``,
``vgpu-cores: 100``) needs a GPU nobody holds.  (Volcano counts a
``gpu-number`` pod's card as holding 0 MiB, so a ``gpu-memory`` pod could land
on it; here it cannot.)  Requests of modes the configuration does not enable
(:meth:`Topology.enable`) are not placed here (``deviceshare`` refuses them,
naming the flag), but what such pods hold when running still counts: their
``scoria.io/devices``, or ``volcano.sh/gpu-index``.  Volcano's older sharing
also writes ``volcano.sh/gpu-index`` and ``volcano.sh/predicate-time`` at bind,
and reads ``volcano.sh/gpu-index`` back from pods bound without Scoria's record.

Three views answer "does it fit?" (``mode``):

* ``now`` — what allocation may use: pods being evicted still hold theirs;
* ``future`` — once evictions under way have finished: their zones and
  devices count as free (pipelining, and making room by eviction);
* ``reach`` — on an empty node: an upper bound for the nodes worth trying
  when looking for victims.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from math import comb

import numpy as np

from proto.vocab.placement import (
    DEVICES_ANNOTATION,
    GPU_INDEX_ANNOTATION,
    GPU_MEMORY,
    GPU_NUMBER,
    NUMA_NODES_ANNOTATION,
    PREDICATE_TIME_ANNOTATION,
    SHARE_MEMORY,
    SHARE_NUMBER,
    WHOLE,
    DeviceGrant,
    DeviceRequest,
    decode_gpu_index,
    encode_devices,
    encode_gpu_index,
    encode_zones,
)
from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY
from scheduler.cluster.inventory import POLICY_CODES, UNLINKED_COST, StaticTopology
from scheduler.framework.resources import EPS, ResourceIndex
from scheduler.framework.snapshot import TaskInfo, TaskStatus
from scheduler.framework.util import count_reason

log = logging.getLogger(__name__)

NONE, BEST_EFFORT, RESTRICTED, SINGLE = 0, 1, 2, 3
NOW, FUTURE, REACH = "now", "future", "reach"
MAX_DEVICE_SETS = 2000  # device subsets tried exhaustively for one pod; beyond, a greedy nearest-first pick
GPU_SHARE_MODES = (SHARE_MEMORY, SHARE_NUMBER)  # Volcano's older sharing: also on GPUs a node only advertises
_warned: set[tuple] = set()  # (pod, what) already warned about: once, not every cycle


@dataclass(slots=True)
class Assignment:
    node: int
    zones: tuple[int, ...]  # zone positions on the node (empty: not pinned)
    cpu: tuple[float, ...]  # what it takes of each of those zones (millicores, batch-cpu included)
    memory: tuple[float, ...]  # bytes per zone
    devices: list[tuple[int, float, float, bool]]  # (device, memory MiB, cores %, alone on it)
    gpu_index: tuple[int, ...] = ()  # GPU indices given to a gpu-memory/gpu-number request (volcano.sh/gpu-index)


class Usage:
    """What placed pods hold: per zone (nodes, Z) and per device (flat)."""

    def __init__(self, nodes: int, zones: int, devices: int):
        self.zone_cpu = np.zeros((nodes, zones))
        self.zone_memory = np.zeros((nodes, zones))
        self.dev_memory = np.zeros(devices)
        self.dev_cores = np.zeros(devices)
        self.dev_holders = np.zeros(devices, dtype=np.int32)
        self.dev_alone = np.zeros(devices, dtype=np.int32)  # holders that must be alone (whole, cores 100)

    def apply(self, a: Assignment, sign: int) -> None:
        if a.zones:
            cols = list(a.zones)
            self.zone_cpu[a.node, cols] += sign * np.asarray(a.cpu)
            self.zone_memory[a.node, cols] += sign * np.asarray(a.memory)
        for d, memory, cores, alone in a.devices:
            self.dev_memory[d] += sign * memory
            self.dev_cores[d] += sign * cores
            self.dev_holders[d] += sign
            self.dev_alone[d] += sign * alone

    def add_all(self, placed: list[Assignment]) -> None:
        """``apply(a, +1)`` for each of ``placed``, one pass per array (each cell adds in the same order)."""
        z_nodes: list[int] = []
        z_cols: list[int] = []
        z_cpu: list[float] = []
        z_memory: list[float] = []
        d_index: list[int] = []
        d_memory: list[float] = []
        d_cores: list[float] = []
        d_alone: list[bool] = []
        for a in placed:
            if a.zones:  # (a pod's zones are distinct: see decode_zones)
                z_nodes.extend([a.node] * len(a.zones))
                z_cols.extend(a.zones)
                z_cpu.extend(a.cpu)
                z_memory.extend(a.memory)
            for d, memory, cores, alone in a.devices:
                d_index.append(d)
                d_memory.append(memory)
                d_cores.append(cores)
                d_alone.append(alone)
        if z_nodes:
            cells = (np.array(z_nodes), np.array(z_cols))
            np.add.at(self.zone_cpu, cells, np.array(z_cpu, dtype=float))
            np.add.at(self.zone_memory, cells, np.array(z_memory, dtype=float))
        if d_index:
            devices = np.array(d_index)
            np.add.at(self.dev_memory, devices, np.array(d_memory, dtype=float))
            np.add.at(self.dev_cores, devices, np.array(d_cores, dtype=float))
            np.add.at(self.dev_holders, devices, 1)
            np.add.at(self.dev_alone, devices, np.array(d_alone, dtype=np.int32))


class Topology:
    def __init__(self, static: StaticTopology, index: ResourceIndex):
        self.s = static
        n, z, d = static.known.size, static.zones, static.dev_node.size
        self.used = Usage(n, z, d)  # every placed pod
        self.releasing = Usage(n, z, d)  # the part of it held by pods being evicted
        self.numa = False  # numa-aware is on: policies are honoured and pods pinned
        self.devices = False  # deviceshare is on: devices are counted and chosen
        self.modes: frozenset[str] = frozenset()  # the ways of asking for devices that are counted (enable)
        self.binpack = True  # deviceshare.SchedulePolicy
        self.clock_ns = 0  # the session's time, for volcano.sh/predicate-time
        self._stamps = 0
        self.assigned: dict[str, Assignment] = {}
        self._uuid_pos: dict[int, dict[str, int]] = {}
        self._min_zones: dict[tuple, np.ndarray] = {}
        self._kind = {name: k for k, name in enumerate(static.resources)}
        # what a pod takes of a zone: CPU and memory, batch ones included (offline pods run there too)
        self.cpu_weights, self.memory_weights = index.zeros(), index.zeros()
        for name, weights in (("cpu", self.cpu_weights), (BATCH_CPU, self.cpu_weights),
                              ("memory", self.memory_weights), (BATCH_MEMORY, self.memory_weights)):
            if name in index.column:
                weights[index.column[name]] = 1.0

    # -- views ---------------------------------------------------------------------------------
    def _held(self, mode: str) -> tuple:
        """(zone cpu, zone memory, device memory, device cores, holders, alone) held, as ``mode`` counts."""
        u = self.used
        if mode == NOW:
            return u.zone_cpu, u.zone_memory, u.dev_memory, u.dev_cores, u.dev_holders, u.dev_alone
        if mode == FUTURE:
            r = self.releasing
            return (u.zone_cpu - r.zone_cpu, u.zone_memory - r.zone_memory, u.dev_memory - r.dev_memory,
                    u.dev_cores - r.dev_cores, u.dev_holders - r.dev_holders, u.dev_alone - r.dev_alone)
        zeros = np.zeros_like(u.dev_memory)
        return (np.zeros_like(u.zone_cpu), np.zeros_like(u.zone_memory), zeros, zeros,
                np.zeros_like(u.dev_holders), np.zeros_like(u.dev_alone))

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

    def enable(self, *modes: str, clock_ns: int | None = None) -> None:
        """Count and choose devices for requests made these ways (``DeviceRequest.mode``); whole devices always.

        A plugin that places devices calls it in ``open``; ``clock_ns`` (the
        session's time) stamps ``volcano.sh/predicate-time``.
        """
        self.devices = True
        self.modes = self.modes | {WHOLE, *modes}
        if clock_ns is not None:
            self.clock_ns = clock_ns

    def requests(self, task: TaskInfo) -> tuple[DeviceRequest, ...]:
        """The device requests of ``task`` that are counted: those of the enabled modes."""
        reqs = task.facts.devices
        if not reqs or not self.devices:
            return ()
        modes = self.modes
        if all(r.mode in modes for r in reqs):
            return reqs
        return tuple(r for r in reqs if r.mode in modes)

    def counted(self, r: DeviceRequest) -> np.ndarray:
        """Per node: whether its devices are counted for ``r`` (elsewhere a whole device is its device plugin's).

        Reported hardware for every request; GPUs a node only advertises
        (``volcano.sh/gpu-number``) for Volcano's older sharing, as Volcano does.
        """
        return self.s.counted if r.mode in GPU_SHARE_MODES else self.s.known

    def _zone_need(self, task: TaskInfo) -> tuple[float, float]:
        return float(task.req @ self.cpu_weights), float(task.req @ self.memory_weights)

    # -- devices -----------------------------------------------------------------------------
    def suitable(self, r: DeviceRequest, mode: str = NOW) -> np.ndarray:
        """Devices (flat) that could take one share of ``r``, as ``mode`` counts what is held."""
        s = self.s
        kind = self._kind.get(r.resource)
        if kind is None:
            return np.zeros(s.dev_node.size, dtype=bool)
        _, _, memory, cores, holders, alone = self._held(mode)
        ok = (s.dev_kind == kind) & s.dev_healthy
        if r.memory_mib is not None:
            ok &= s.dev_memory + EPS >= r.memory_mib
        if r.exclusive:
            return ok & (holders == 0)
        ok &= (alone == 0) & (cores + r.cores <= 100 + EPS)
        if r.memory_mib is None:  # all of its memory
            return ok & (memory <= EPS)
        return ok & (s.dev_memory - memory + EPS >= r.memory_mib)

    def device_counts(self, r: DeviceRequest, mode: str = NOW) -> np.ndarray:
        """Per node: how many devices could take a share of ``r``."""
        ok = self.suitable(r, mode)
        return np.bincount(self.s.dev_node[ok], minlength=self.s.known.size)

    def zone_device_counts(self, r: DeviceRequest, mode: str = NOW) -> tuple[np.ndarray, np.ndarray]:
        """Suitable devices per node and zone ``(nodes, Z)``, and per node those without NUMA affinity."""
        s = self.s
        ok = self.suitable(r, mode)
        n, z = s.known.size, s.zones
        pinned = ok & (s.dev_zone >= 0)
        counts = np.bincount(s.dev_node[pinned] * z + s.dev_zone[pinned], minlength=n * z).reshape(n, z)
        return counts, np.bincount(s.dev_node[ok & (s.dev_zone < 0)], minlength=n)

    def device_fit(self, task: TaskInfo, mode: str = NOW) -> np.ndarray | None:
        """Nodes whose devices can take every device request of ``task``; None when it asks for none."""
        reqs = self.requests(task)
        if not reqs:
            return None
        s = self.s
        mask = np.ones(s.known.size, dtype=bool)
        for r in reqs:
            # a node that reports no hardware leaves whole devices to its device plugin (and the node's
            # allocatable, which predicates check); shared GPUs need the per-device accounting
            mask &= np.where(self.counted(r), self.device_counts(r, mode) >= r.count, not r.shared)
        return mask

    def device_reasons(self, task: TaskInfo, among: np.ndarray) -> Counter:
        """Why the nodes in ``among`` cannot give ``task`` its devices (for a plugin's ``predicate_reasons``)."""
        reasons: Counter = Counter()
        for r in self.requests(task):
            counted = self.counted(r)
            short = among & ~np.where(counted, self.device_counts(r) >= r.count, not r.shared)
            unreported = short & ~counted
            if r.mode in GPU_SHARE_MODES:
                count_reason(reasons, f"node(s) had no GPUs counted for {GPU_MEMORY}/{GPU_NUMBER} (no agent "
                             f"report, no {GPU_NUMBER} advertised)", unreported)
            else:
                count_reason(reasons, "node(s) reported no GPUs for shared GPU requests", unreported)
            count_reason(reasons, f"node(s) had not {r.describe()} free", short & counted)
            among = among & ~short
        return reasons

    # -- zones -------------------------------------------------------------------------------
    def _fewest(self, task: TaskInfo, mode: str) -> np.ndarray:
        """Per node: the fewest zones whose free resources (as ``mode`` counts) hold the pod; Z+1 where none."""
        s = self.s
        c, m = self._zone_need(task)
        zone_cpu, zone_memory = self._held(mode)[:2]
        cpu, mem = s.zone_cpu - zone_cpu, s.zone_memory - zone_memory
        devs = [(*self.zone_device_counts(r, mode), r.count) for r in self.requests(task)]
        need = np.full(s.known.size, s.zones + 1, dtype=np.int16)
        for size in range(s.zones, 0, -1):
            fits = np.zeros(s.known.size, dtype=bool)
            for combo in itertools.combinations(range(s.zones), size):
                cols = list(combo)
                ok = s.zone_exists[:, cols].all(axis=1)
                ok &= cpu[:, cols].sum(axis=1) + EPS >= c
                ok &= mem[:, cols].sum(axis=1) + EPS >= m
                for pinned, anywhere, count in devs:
                    ok &= pinned[:, cols].sum(axis=1) + anywhere >= count
                fits |= ok
            need[fits] = size
        return need

    def min_zones(self, task: TaskInfo) -> np.ndarray:
        """Per node: the fewest zones that could hold the pod on an empty node (Z+1 where none can)."""
        key = (self._zone_need(task), self.requests(task))  # nothing else of the task matters on an empty node
        need = self._min_zones.get(key)
        if need is None:
            need = self._min_zones[key] = self._fewest(task, REACH)
        return need

    def fewest_free_zones(self, task: TaskInfo, mode: str = NOW) -> np.ndarray:
        return self._fewest(task, mode)

    def numa_fit(self, task: TaskInfo, mode: str = NOW) -> tuple[np.ndarray, np.ndarray]:
        """(fits, policy): nodes where ``task`` can be placed under its NUMA policy, and that policy."""
        policy = self.policy(task)
        strict = policy >= RESTRICTED
        fits = np.ones(policy.size, dtype=bool)
        if not strict.any():
            return fits, policy
        fits[strict & ~self.s.has_zones] = False
        fewest = self._fewest(task, mode)
        fits[policy == SINGLE] &= fewest[policy == SINGLE] == 1
        restricted = policy == RESTRICTED
        if restricted.any():
            best = self.min_zones(task) if mode != REACH else fewest
            fits[restricted] &= (fewest <= best)[restricted] & (fewest <= self.s.zones)[restricted]
        return fits, policy

    # -- placing -----------------------------------------------------------------------------
    def place(self, task: TaskInfo, node: int) -> None:
        """Choose and take the zones and devices ``task`` gets on ``node``; record them on the task.

        A pipelined task (placed on resources being released) chooses among
        what will be free once the evictions under way have finished.
        """
        if task.uid in self.assigned or not (self.numa or self.devices):
            return
        mode = FUTURE if task.status == TaskStatus.PIPELINED else NOW
        policy = int(self.policy(task)[node]) if self.numa else NONE
        zones: tuple[int, ...] = ()
        if policy >= BEST_EFFORT and self.s.has_zones[node]:
            zones = self._choose_zones(task, node, policy, mode)
        grants: list[tuple[int, float, float, bool]] = []
        gpu_index: list[int] = []
        for r in self.requests(task):
            if not self.counted(r)[node]:
                continue  # no inventory: the node's device plugin picks
            chosen = self._choose_devices(node, r, zones, strict=policy >= RESTRICTED, mode=mode)
            if len(chosen) < r.count:
                log.error("%s: no %s left on node %d after the predicate admitted it", task.name, r.describe(), node)
                continue
            grants.extend(self._grant_of(d, r) for d in chosen)
            if r.mode in GPU_SHARE_MODES:
                gpu_index.extend(self.s.device(d).index for d in chosen)
        cpu, memory = self._split(task, node, zones, mode)
        self._take(task, Assignment(node, zones, cpu, memory, grants, tuple(gpu_index)))

    def _grant_of(self, d: int, r: DeviceRequest) -> tuple[int, float, float, bool]:
        memory = float(self.s.dev_memory[d]) if r.memory_mib is None else float(r.memory_mib)
        return int(d), memory, float(r.cores if r.shared else 100), r.exclusive

    def _split(self, task: TaskInfo, node: int, zones: tuple[int, ...], mode: str) -> tuple[tuple, tuple]:
        """What the pod takes of each of its zones: in proportion to what each has free."""
        if not zones:
            return (), ()
        c, m = self._zone_need(task)
        zone_cpu, zone_memory = self._held(mode)[:2]
        cols = list(zones)
        out = []
        for need, cap, held in ((c, self.s.zone_cpu, zone_cpu), (m, self.s.zone_memory, zone_memory)):
            free = np.maximum(cap[node, cols] - held[node, cols], 0.0)
            total = free.sum()
            share = free / total if total > 0 else np.full(len(cols), 1.0 / len(cols))
            out.append(tuple(float(x) for x in need * share))
        return out[0], out[1]

    def _take(self, task: TaskInfo, a: Assignment, *, record: bool = True) -> None:
        self.used.apply(a, +1)
        self.assigned[task.uid] = a
        if record and (a.zones or a.devices):
            placement = {}
            if a.zones:
                placement[NUMA_NODES_ANNOTATION] = encode_zones([self.s.zone_id(a.node, z) for z in a.zones])
            if a.devices:
                placement[DEVICES_ANNOTATION] = encode_devices([self._grant(d, mem, cores)
                                                                for d, mem, cores, _ in a.devices])
            if a.gpu_index:  # what Volcano's GPU-share device plugin reads on the node
                placement[GPU_INDEX_ANNOTATION] = encode_gpu_index(a.gpu_index)
                self._stamps += 1  # distinct times: the plugin tells pods apart by them
                placement[PREDICATE_TIME_ANNOTATION] = str(self.clock_ns + self._stamps)
            task.placement = placement

    def _grant(self, d: int, memory: float, cores: float) -> DeviceGrant:
        dev = self.s.device(d)
        return DeviceGrant(dev.resource, dev.uuid, dev.index, int(memory), int(cores))

    def release(self, task: TaskInfo) -> None:
        a = self.assigned.pop(task.uid, None)
        if a is not None:
            self.used.apply(a, -1)
            task.placement = None

    def mark_releasing(self, task: TaskInfo, sign: int) -> None:
        """``task`` is being evicted (+1) or that was undone (-1): its zones and devices free up in ``future``."""
        a = self.assigned.get(task.uid)
        if a is not None:
            self.releasing.apply(a, sign)

    def _choose_zones(self, task: TaskInfo, node: int, policy: int, mode: str) -> tuple[int, ...]:
        """The zones to pin to: the fewest that fit (one for single-numa-node), nearest together, tightest fit."""
        s = self.s
        c, m = self._zone_need(task)
        present = [z for z in range(s.zones) if s.zone_exists[node, z]]
        sizes = [1] if policy == SINGLE else range(1, len(present) + 1)
        if policy == RESTRICTED:
            sizes = [int(self.min_zones(task)[node])]
        zone_cpu, zone_memory = self._held(mode)[:2]
        cpu_free = s.zone_cpu[node] - zone_cpu[node]
        mem_free = s.zone_memory[node] - zone_memory[node]
        dev_free = []
        for r in self.requests(task):
            pinned, anywhere = self.zone_device_counts(r, mode)
            dev_free.append((pinned[node], anywhere[node], r.count))
        inv = s.inventories[node]
        assert inv is not None  # the node has zones (see place), so it reported its hardware
        distances = inv.distances
        for size in sizes:
            best = None
            for combo in itertools.combinations(present, size):
                cols = list(combo)
                if cpu_free[cols].sum() + EPS < c or mem_free[cols].sum() + EPS < m:
                    continue
                if any(pinned[cols].sum() + anywhere < count for pinned, anywhere, count in dev_free):
                    continue
                spread = sum(distances[a][b] for a in combo for b in combo
                             if a < b and a < len(distances) and b < len(distances[a]))
                key = (spread, cpu_free[cols].sum() - c, combo)
                if best is None or key < best:
                    best = key
            if best is not None:
                return best[2]
        return ()  # best-effort and nothing fits in fewer zones than the node: not pinned

    def _choose_devices(self, node: int, r: DeviceRequest, zones: tuple[int, ...], *, strict: bool,
                        mode: str = NOW) -> list[int]:
        """``r.count`` devices on ``node``: inside ``zones`` when pinned, the best-connected set, binpack or spread."""
        s = self.s
        start, count = int(s.dev_start[node]), int(s.dev_count[node])
        cand = np.flatnonzero(self.suitable(r, mode)[start:start + count]) + start
        if zones:
            inside = np.isin(s.dev_zone[cand], zones) | (s.dev_zone[cand] < 0)
            if strict or inside.sum() >= r.count:
                cand = cand[inside]
        if cand.size < r.count:
            return []
        if r.mode in GPU_SHARE_MODES:  # Volcano's older sharing: the lowest-numbered GPUs that fit, first fit
            order = cand[np.argsort([s.device(int(d)).index for d in cand], kind="stable")]
        else:
            _, _, memory, cores, _, _ = self._held(mode)
            used = memory[cand] / np.maximum(s.dev_memory[cand], 1) + cores[cand] / 100
            order = cand[np.argsort(-used if self.binpack else used, kind="stable")]
        if r.count == 1:
            return [int(order[0])]
        return self._connected(node, [int(d) for d in order], r.count)

    def _connected(self, node: int, cand: list[int], k: int) -> list[int]:
        """The ``k`` of ``cand`` (in preference order) whose worst and total pair costs are lowest."""
        inv = self.s.inventories[node]
        assert inv is not None  # cand are devices of the node, so it reported its hardware
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
            assert best is not None  # _choose_devices asks only when there are at least k candidates
            return list(best)
        chosen = [cand[0]]
        while len(chosen) < k:  # greedy: add the candidate nearest to those already chosen
            rest = [d for d in cand if d not in chosen]
            chosen.append(min(rest, key=lambda d: (max(cost(d, c) for c in chosen), rest.index(d))))
        return chosen

    # -- what the snapshot says is already there -------------------------------------------------
    def load(self, tasks: list[TaskInfo]) -> None:
        """Count the zones and devices of pods already on nodes: recorded decisions first, then the rest.

        A pod bound without a recorded choice (by another scheduler, or before
        us) is counted on the devices we would choose for it now — after every
        recorded one is in, so it never lands on a device a recorded pod holds.
        """
        on_nodes = [t for t in tasks if t.status in (TaskStatus.RUNNING, TaskStatus.RELEASING) and t.node >= 0]
        guessed = []
        recorded: list[tuple[TaskInfo, Assignment]] = []  # counted together below (nothing here reads the counts)
        for task in on_nodes:
            node, facts = task.node, task.facts
            zones = self._zone_positions(task, node, facts.zones) if facts.zones and self.s.has_zones[node] else ()
            devices = self._granted(task, node, facts.grants) if facts.grants else []
            if not devices:  # Volcano's record, whatever this configuration enables; else a guess for those it does
                devices = self._gpu_index_granted(task, node) if self.s.counted[node] else []
                wanted = [r for r in self.requests(task) if self.counted(r)[node]]
                if wanted and not devices:
                    guessed.append((task, zones, wanted))
                    continue
            if zones or devices:
                recorded.append((task, self._loaded(task, node, zones, devices)))
        self.used.add_all([a for _, a in recorded])
        self.releasing.add_all([a for task, a in recorded if task.status == TaskStatus.RELEASING])
        for task, a in recorded:
            self.assigned[task.uid] = a
        for task, zones, wanted in guessed:
            devices = [self._grant_of(d, r) for r in wanted
                       for d in self._choose_devices(task.node, r, (), strict=False)]
            self._load(task, task.node, zones, devices)

    def _gpu_index_granted(self, task: TaskInfo, node: int) -> list:
        """The GPUs ``volcano.sh/gpu-index`` names for a gpu-memory/gpu-number pod (bound by Volcano, say)."""
        share = next((r for r in task.facts.devices if r.mode in GPU_SHARE_MODES), None)
        text = task.pod.annotations.get(GPU_INDEX_ANNOTATION) if share is not None else None
        if share is None or not text:
            return []
        try:
            indices = decode_gpu_index(text)
        except ValueError as exc:
            _warn_once(task, GPU_INDEX_ANNOTATION, "pod %s: %s; counted on the GPUs it would get now", task.name, exc)
            return []
        start, count = int(self.s.dev_start[node]), int(self.s.dev_count[node])
        kinds = self.s.dev_kind
        kind = self._kind.get(share.resource)
        by_index = {self.s.device(d).index: d for d in range(start, start + count) if kinds[d] == kind}
        missing = [i for i in indices if i not in by_index]
        if missing:
            _warn_once(task, GPU_INDEX_ANNOTATION, "pod %s: %s names GPUs %s its node does not have; counted on the "
                       "GPUs it would get now", task.name, GPU_INDEX_ANNOTATION, missing)
            return []
        return [self._grant_of(by_index[i], share) for i in indices]

    def _load(self, task: TaskInfo, node: int, zones: tuple[int, ...], devices: list) -> None:
        if not (zones or devices):
            return
        self._take(task, self._loaded(task, node, zones, devices), record=False)
        if task.status == TaskStatus.RELEASING:
            self.mark_releasing(task, +1)

    def _loaded(self, task: TaskInfo, node: int, zones: tuple[int, ...], devices: list) -> Assignment:
        """What a pod already on ``node`` holds of ``zones`` and ``devices``."""
        # how a running pod's share was split between its zones is not recorded: count it evenly
        c, m = self._zone_need(task)
        k = len(zones) or 1
        cpu, memory = (c / k,) * len(zones), (m / k,) * len(zones)
        return Assignment(node, zones, cpu, memory, devices)

    def _zone_positions(self, task: TaskInfo, node: int, ids: tuple[int, ...]) -> tuple[int, ...]:
        inv = self.s.inventories[node]
        assert inv is not None  # the node has zones (see load), so it reported its hardware
        known = inv.zone_ids
        missing = [z for z in ids if z not in known]
        if missing:
            _warn_once(task, "zones", "pod %s: recorded NUMA zones %s do not exist on its node; counted as not "
                       "pinned", task.name, missing)
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
                _warn_once(task, g.uuid, "pod %s: recorded device %s is not on its node any more", task.name, g.uuid)
                continue
            out.append((d, float(g.memory_mib), float(g.cores), g.cores >= 100))
        return out


def _warn_once(task: TaskInfo, what: str, message: str, *args: object) -> None:
    key = (task.uid, what)
    if key not in _warned:
        if len(_warned) > 10_000:
            _warned.clear()
        _warned.add(key)
        log.warning(message, *args)
