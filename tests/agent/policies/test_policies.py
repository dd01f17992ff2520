"""QoS policies as pure functions: tables for the formulas, properties for eviction's promises."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.intents import BatchAllocatable
from agent.pods import PodInfo, qos_level
from agent.policies.batch import OvercommitState, batch_allocatable
from agent.policies.cpu import burst_writes, cpu_intents, offline_quota
from agent.policies.memory import memory_intents
from agent.policies.nodestate import NodeState, PodSample
from agent.profile import BurstSettings, CpuSettings, MemorySettings, OvercommitSettings
from proto.model import QosLevel

GI = 2**30


def pod(uid: str, level: QosLevel = QosLevel.LS, **kw) -> PodInfo:
    qos_class = kw.pop("qos_class", "BestEffort" if level == QosLevel.BE else "Burstable")
    return PodInfo(uid=uid, namespace="ns", name=uid, qos_class=qos_class, qos_level=level, **kw)


def state(*samples: PodSample, cpu_used: float = 0, memory_used: int = 0, capacity: int = 8000,
          memory: int = 32 * GI, version: int = 1, idle: bool = True, burst: bool = True) -> NodeState:
    return NodeState(capacity, memory, cpu_used, memory_used, tuple(samples), "kubepods/besteffort", version,
                     idle, burst)


QUOTA = [
    ("idle node", 8000, 0, 0, 80, 5, 6400),
    ("online takes its share", 8000, 3000, 0, 80, 5, 3400),
    ("system counts too", 8000, 3000, 1000, 80, 5, 2400),
    ("floor holds under a spike", 8000, 7900, 500, 80, 5, 400),
    ("never above capacity", 8000, 0, 0, 100, 5, 8000),
    ("zero floor can starve offline", 8000, 8000, 0, 80, 0, 0),
]


@pytest.mark.parametrize("capacity,online,system,threshold,floor,expected", [q[1:] for q in QUOTA],
                         ids=[q[0] for q in QUOTA])
def test_offline_quota(capacity, online, system, threshold, floor, expected) -> None:
    settings = CpuSettings(offline_threshold_percent=threshold, offline_floor_percent=floor)
    assert offline_quota(capacity, online, system, settings) == expected


def test_cpu_intents_use_cpu_idle_where_the_kernel_has_it() -> None:
    s = state(PodSample(pod("web"), "kubepods/burstable/podweb", cpu_used=3000),
              PodSample(pod("batch", QosLevel.BE), "kubepods/besteffort/podbatch", cpu_used=2000),
              PodSample(pod("gone", QosLevel.BE), None), cpu_used=6000)
    writes = cpu_intents(s, CpuSettings(), BurstSettings())
    assert (writes[0].path, writes[0].knob, writes[0].value) == ("kubepods/besteffort", "cpu.quota", 2400)
    assert [(w.path, w.knob, w.value) for w in writes[1:]] == [("kubepods/besteffort/podbatch", "cpu.idle", 1)]
    old_kernel = state(*s.pods, cpu_used=6000, idle=False)
    assert [(w.knob, w.value) for w in cpu_intents(old_kernel, CpuSettings(), BurstSettings())[1:]] == [("cpu.shares", 2)]


def test_burst_only_for_the_levels_named_and_pods_with_limits() -> None:
    s = state(PodSample(pod("lc", QosLevel.LC, cpu_limit=2000), "a"), PodSample(pod("ls", QosLevel.LS, cpu_limit=2000), "b"),
              PodSample(pod("nolimit", QosLevel.LC), "c"))
    writes = burst_writes(s, BurstSettings(enabled=True, burst_percent=50, qos_levels=("LC",)))
    assert [(w.path, w.value) for w in writes] == [("a", 100_000)]  # half of 2 CPUs x 100 ms period
    assert burst_writes(s, BurstSettings(enabled=False)) == []
    assert burst_writes(state(*s.pods, burst=False), BurstSettings(enabled=True)) == []


def test_memory_v1_and_v2() -> None:
    samples = (PodSample(pod("lc", QosLevel.LC, memory_request=GI), "lc"),
               PodSample(pod("ls", QosLevel.LS, memory_request=2 * GI), "ls"),
               PodSample(pod("be", QosLevel.BE, batch_memory=4 * GI), "be"))
    v1 = memory_intents(state(*samples, version=1), MemorySettings())
    assert [(w.path, w.knob, w.value) for w in v1] == [("be", "memory.limit", 4 * GI)]
    v2 = memory_intents(state(*samples, version=2), MemorySettings(offline_high_percent=90))
    assert [(w.path, w.knob, w.value) for w in v2] == [
        ("lc", "memory.min", GI), ("ls", "memory.low", 2 * GI), ("be", "memory.limit", 4 * GI),
        ("be", "memory.high", int(4 * GI * 0.9))]


def test_batch_allocatable_smooths_floors_and_holds_small_changes() -> None:
    settings = OvercommitSettings(reclaim_percent=80, smoothing=0.5, min_change_percent=5)
    busy_offline = PodSample(pod("b", QosLevel.BE), "b", cpu_used=1000, memory_used=GI)
    calm = state(PodSample(pod("web"), "w", cpu_used=2000, memory_used=4 * GI), busy_offline,
                 cpu_used=3500, memory_used=6 * GI)
    offer, st_ = batch_allocatable(calm, settings, OvercommitState())
    assert offer == BatchAllocatable(8000 * 8 // 10 - 2000 - 500, int(32 * GI * 0.8) - 4 * GI - GI)
    spike = state(PodSample(pod("web"), "w", cpu_used=7500, memory_used=4 * GI), busy_offline,
                  cpu_used=9000, memory_used=6 * GI)
    offer2, st_ = batch_allocatable(spike, settings, st_)
    assert offer2.cpu_millis == (3900 - 1600) // 2  # a brief spike halves it rather than zeroing it
    offer3, st_ = batch_allocatable(spike, settings, st_)
    assert st_.cpu < 0 and offer3.cpu_millis == 1000  # a lasting one: floored at what offline pods already use
    offer4, st_ = batch_allocatable(calm, settings, st_)
    assert 1000 < offer4.cpu_millis < 3900  # recovering, smoothed rather than jumping straight back
    almost, _ = batch_allocatable(calm, settings, OvercommitState(calm_cpu := 4100.0, 20 * GI, BatchAllocatable(4000, 20 * GI)))
    assert almost == BatchAllocatable(4000, 20 * GI) and calm_cpu  # moved under 5%: not republished


LEVELS = [
    ({}, "BestEffort", False, QosLevel.BE), ({}, "Guaranteed", False, QosLevel.LC),
    ({}, "Burstable", False, QosLevel.LS), ({}, "Burstable", True, QosLevel.BE),
    ({"volcano.sh/qos-level": "HLS"}, "BestEffort", False, QosLevel.HLS),
    ({"volcano.sh/qos-level": "be"}, "Guaranteed", False, QosLevel.BE),
    ({"volcano.sh/qos-level": "bogus"}, "Guaranteed", False, QosLevel.LC),
]


@pytest.mark.parametrize("annotations,qos_class,batch,expected", LEVELS)
def test_qos_level(annotations, qos_class, batch, expected) -> None:
    assert qos_level(annotations, qos_class, batch) == expected


def test_an_offline_parent_of_our_own_is_made_idle_too() -> None:
    """The kernel weighs an online against an offline task where their cgroup paths meet (the two QoS
    parents), so idle offline pods alone do not make online wake-ups preempt them; the parent must be idle.
    Only where the parent is ours: the kubelet rewrites besteffort's shares, which an idle group refuses."""
    batch = PodSample(pod("batch", QosLevel.BE), "kubepods/besteffort/podbatch", cpu_used=2000)
    ours = replace(state(batch), owns_offline_parent=True)
    idle = [(w.path, w.knob, w.value) for w in cpu_intents(ours, CpuSettings(), BurstSettings()) if w.knob == "cpu.idle"]
    assert idle == [("kubepods/besteffort", "cpu.idle", 1), ("kubepods/besteffort/podbatch", "cpu.idle", 1)]
    kubelets = [w.path for w in cpu_intents(state(batch), CpuSettings(), BurstSettings()) if w.knob == "cpu.idle"]
    assert kubelets == ["kubepods/besteffort/podbatch"]
    # the profile turns it off: cleared before the shares write, which the kernel refuses on an idle group
    not_wanted = cpu_intents(ours, CpuSettings(use_cpu_idle=False), BurstSettings())
    assert [(w.path, w.knob, w.value) for w in not_wanted[1:]] == [
        ("kubepods/besteffort", "cpu.idle", 0), ("kubepods/besteffort/podbatch", "cpu.idle", 0),
        ("kubepods/besteffort/podbatch", "cpu.shares", 2)]
