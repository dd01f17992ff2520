"""Eviction for real pressure only: memory, online and system demand over the watermark, offline pods
starving — never a node busy because offline work fills its idle CPU.  Tables for the triggers, properties
for the promises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.pods import PodInfo
from agent.policies.eviction import EvictionState, decide_evictions, satisfaction, starving
from agent.policies.nodestate import NodeState, PodSample
from agent.profile import EvictionSettings
from proto.model import Pressure, QosLevel

GI = 2**30


def pod(uid: str, level: QosLevel = QosLevel.LS, **kw) -> PodInfo:
    qos_class = "BestEffort" if level == QosLevel.BE else "Burstable"
    return PodInfo(uid=uid, namespace="ns", name=uid, qos_class=qos_class, qos_level=level, **kw)


def state(*samples: PodSample, cpu_used: float = 0, memory_used: int = 0, capacity: int = 8000,
          memory: int = 32 * GI, quota: float | None = None, memory_stall: float = 0.0) -> NodeState:
    return NodeState(capacity, memory, cpu_used, memory_used, tuple(samples), "kubepods/besteffort", 1, True, True,
                     offline_quota=quota, memory_pressure=Pressure(full_avg10=memory_stall))


def run(s: NodeState, cfg: EvictionSettings, times, st_: EvictionState | None = None):
    """Decide at each time in ``times``; every eviction and the final state."""
    st_, chosen = st_ or EvictionState(), []
    for t in times:
        evictions, st_ = decide_evictions(s, cfg, st_, now=t)
        chosen.extend(evictions)
    return chosen, st_


def test_a_node_full_of_offline_work_is_co_location_working() -> None:
    """The design fault this replaces: 100% CPU, almost all of it offline work, evicted offline pods."""
    s = state(PodSample(pod("web"), "w", cpu_used=1000),
              PodSample(pod("b1", QosLevel.BE), "b1", cpu_used=3500),
              PodSample(pod("b2", QosLevel.BE), "b2", cpu_used=3300), cpu_used=8000)
    chosen, st_ = run(s, EvictionSettings(samples=1), range(20))
    assert chosen == [] and not st_.under_pressure and st_.cpu_over == 0


def test_online_and_system_demand_over_the_watermark_evicts_at_the_rate() -> None:
    cfg = EvictionSettings(cpu_high_percent=90, cpu_low_percent=70, samples=3, max_per_interval=1, interval=10)
    # online 7300 + system 150 = 93% of 8000; offline pods use little (they get what is left)
    s = state(PodSample(pod("web"), "w", cpu_used=7300),
              PodSample(pod("b1", QosLevel.BE, priority=5), "b1", cpu_used=200),
              PodSample(pod("b2", QosLevel.BE, priority=1), "b2", cpu_used=100),
              PodSample(pod("b3", QosLevel.BE, priority=1), "b3", cpu_used=150), cpu_used=7900)
    st_ = EvictionState()
    for t in (0, 1):
        evictions, st_ = decide_evictions(s, cfg, st_, now=t)
        assert evictions == [] and not st_.under_pressure  # a blip is not pressure
    evictions, st_ = decide_evictions(s, cfg, st_, now=2)
    assert st_.under_pressure and st_.cpu_evicting
    assert [e.uid for e in evictions] == ["b3"]  # lowest priority, then the heaviest user
    assert evictions[0].resource == "cpu" and "online and system cpu at 93% for 3 samples" in evictions[0].reason
    evictions, st_ = decide_evictions(s, cfg, st_, now=3)
    assert evictions == []  # one per interval
    evictions, st_ = decide_evictions(s, cfg, st_, now=13)
    assert [e.uid for e in evictions] == ["b2"]  # b3 is still leaving: not asked twice
    calm = state(PodSample(pod("web"), "w", cpu_used=4000), *s.pods[1:], cpu_used=4600)
    evictions, st_ = decide_evictions(calm, cfg, st_, now=14)
    assert evictions == [] and not st_.under_pressure


def test_demand_eviction_goes_on_between_the_watermarks_and_stops_below_the_low_one() -> None:
    cfg = EvictionSettings(cpu_high_percent=90, cpu_low_percent=70, samples=2, max_per_interval=1, interval=10)
    offline = (PodSample(pod("b1", QosLevel.BE), "b1", cpu_used=60), PodSample(pod("b2", QosLevel.BE), "b2", cpu_used=50),
               PodSample(pod("b3", QosLevel.BE), "b3", cpu_used=40))

    def at(online: float, pods) -> NodeState:
        return state(PodSample(pod("web"), "w", cpu_used=online), *pods,
                     cpu_used=online + sum(p.cpu_used for p in pods))

    chosen, st_ = run(at(7600, offline), cfg, (0, 1))  # 95%
    assert [e.uid for e in chosen] == ["b1"]
    evictions, st_ = decide_evictions(at(6800, offline[1:]), cfg, st_, now=11)  # 85%: between
    assert [e.uid for e in evictions] == ["b2"] and st_.under_pressure
    assert "still above the low watermark 70%" in evictions[0].reason
    evictions, st_ = decide_evictions(at(5500, offline[2:]), cfg, st_, now=21)  # 69%: below low
    assert evictions == [] and not st_.under_pressure
    evictions, st_ = decide_evictions(at(6800, offline[2:]), cfg, st_, now=31)  # 85% again
    assert evictions == [] and not st_.under_pressure  # between them: not evicting until over high again


def test_memory_pressure_goes_first() -> None:
    cfg = EvictionSettings(samples=1, max_per_interval=5)
    s = state(PodSample(pod("web"), "w", cpu_used=7700),
              PodSample(pod("b1", QosLevel.BE), "b1", cpu_used=10, memory_used=8 * GI),
              PodSample(pod("b2", QosLevel.BE), "b2", cpu_used=190, memory_used=GI),
              cpu_used=7900, memory_used=31 * GI)
    evictions, _ = decide_evictions(s, cfg, EvictionState(), now=0)
    assert [e.uid for e in evictions][0] == "b1" and evictions[0].reason.startswith("node memory")
    assert evictions[0].resource == "memory"


def test_a_memory_stall_evicts_even_below_the_watermark() -> None:
    cfg = EvictionSettings(samples=2, memory_stall_percent=20, max_per_interval=5)
    pods = (PodSample(pod("b1", QosLevel.BE, priority=1), "b1", memory_used=2 * GI),
            PodSample(pod("b2", QosLevel.BE, priority=0), "b2", memory_used=GI))
    thrashing = state(*pods, memory_used=16 * GI, memory_stall=35.0)  # half the memory, but stalled 35%
    chosen, st_ = run(thrashing, cfg, (0, 1))
    assert [e.uid for e in chosen] == ["b2"] and st_.memory_evicting  # one pod a sample, lowest priority first
    assert "node memory at 50%, memory stall 35% (at most 20%) for 2 samples" in chosen[0].reason
    evictions, st_ = decide_evictions(state(*pods, memory_used=16 * GI, memory_stall=3.0), cfg, st_, now=2)
    assert evictions == [] and not st_.under_pressure  # stall over, memory below low: done
    off = EvictionSettings(samples=1, memory_stall_percent=0)
    assert run(thrashing, off, range(5))[0] == []  # 0 turns the stall trigger off


# -- starvation --------------------------------------------------------------------------------------

def offline(*pods: tuple[int, float], prio: int = 0) -> tuple[PodSample, ...]:
    """Offline pods of (request millicores, use millicores)."""
    return tuple(PodSample(pod(f"b{i}", QosLevel.BE, batch_cpu=req, priority=prio), f"b{i}", cpu_used=used)
                 for i, (req, used) in enumerate(pods))


def node(online: float, system: float, batch: tuple[PodSample, ...], quota: float | None = None) -> NodeState:
    used = online + system + sum(p.cpu_used for p in batch)
    return state(PodSample(pod("web"), "w", cpu_used=online), *batch, cpu_used=used, quota=quota)


# (case, online, system, quota, offline pods (request, use), satisfaction, starving)
STARVATION = [
    ("satisfied: room for every request", 2000, 500, None, ((2000, 2000), (1000, 900)), 1.0, False),
    ("starving: online took the node", 7000, 200, None, ((2000, 400), (2000, 400)), 0.2, True),
    ("idle, not starving: uses little of what it could get", 7000, 200, None, ((2000, 100), (2000, 50)), 0.2, False),
    ("no requests: nothing to starve", 7000, 200, None, ((0, 800),), None, False),
    ("the quota squeezes it", 1000, 0, 1000.0, ((4000, 1000),), 0.25, True),
    ("quota open: online and system decide", 1000, 0, None, ((4000, 4000),), 1.0, False),
    ("just at the threshold is not below it", 6000, 0, None, ((4000, 2000),), 0.5, False),
    ("cpu request where there is no batch-cpu", 7500, 0, None, (), 0.125, True),
]


@pytest.mark.parametrize("online,system,quota,pods,expected,hungry", [c[1:] for c in STARVATION],
                         ids=[c[0] for c in STARVATION])
def test_starvation_table(online, system, quota, pods, expected, hungry) -> None:
    batch = offline(*pods) if pods else (PodSample(pod("x", QosLevel.BE, cpu_request=4000), "x", cpu_used=500),)
    s = node(online, system, batch, quota)
    assert satisfaction(s) == (pytest.approx(expected) if expected is not None else None)
    assert starving(s, EvictionSettings()) is hungry


def test_starving_offline_pods_are_evicted_after_n_samples_until_the_rest_are_satisfied() -> None:
    cfg = EvictionSettings(starvation_samples=4, max_per_interval=10, interval=1)
    # room 1200 (online 6800 of 8000) for 4000m of requests (30%): 2400m of requests keep 50%
    batch = (PodSample(pod("hi", QosLevel.BE, batch_cpu=1000, priority=9), "hi", cpu_used=300),
             *offline((1000, 300), (1500, 350), (500, 250)))
    s = node(6800, 0, batch)
    chosen, st_ = run(s, cfg, (0, 1, 2))
    assert chosen == [] and st_.starving == 3 and not st_.under_pressure  # not yet N samples
    evictions, st_ = decide_evictions(s, cfg, st_, now=3)
    # lowest priority first, the largest request first: 1600m of requests to shed
    assert st_.starvation_evicting and [e.uid for e in evictions] == ["b1", "b0"]
    assert all(e.resource == "cpu" for e in evictions)
    assert "could get 1200m of the 4000m they request (30%, below 50%) for 4 samples" in evictions[0].reason
    fed = node(6800, 0, batch[:1] + batch[3:])  # b0 and b1 gone: 1200 of 1500 = 80%
    evictions, st_ = decide_evictions(fed, cfg, st_, now=4)
    assert evictions == [] and not st_.under_pressure and st_.starving == 0


def test_a_single_satisfied_sample_resets_the_count() -> None:
    cfg = EvictionSettings(starvation_samples=3)
    hungry, fed = node(7000, 0, offline((4000, 900))), node(5000, 0, offline((2000, 2000)))
    chosen, st_ = run(hungry, cfg, (0, 1))
    _, st_ = decide_evictions(fed, cfg, st_, now=2)
    chosen, st_ = run(hungry, cfg, (3, 4), st_)
    assert chosen == [] and st_.starving == 2


def test_disabled_eviction_evicts_nothing() -> None:
    s = node(7900, 100, offline((4000, 0)))
    assert run(s, EvictionSettings(enabled=False, samples=1, starvation_samples=1), range(5))[0] == []


# -- properties --------------------------------------------------------------------------------------

CAPACITY = 8000


@st.composite
def busy_offline_nodes(draw):
    """A node whose online and system use stay below the CPU high watermark in every sample, with offline
    load of any size (up to what is left, or measured a little over it) and requests its room satisfies
    at the starvation threshold, memory below its watermark and no stall."""
    cfg = EvictionSettings(cpu_high_percent=draw(st.floats(50, 100)), cpu_low_percent=draw(st.floats(0, 50)),
                           samples=draw(st.integers(1, 3)), starvation_samples=draw(st.integers(1, 3)),
                           starvation_percent=draw(st.floats(1, 100)), max_per_interval=5)
    limit = CAPACITY * cfg.cpu_high_percent / 100 * 0.999
    n = draw(st.integers(0, 6))
    priorities = [draw(st.integers(-5, 5)) for _ in range(n)]
    shares = [draw(st.floats(0.01, 1)) for _ in range(n)]
    samples = []
    for _ in range(draw(st.integers(1, 6))):
        online = draw(st.floats(0, limit))
        system = draw(st.floats(0, limit - online))
        room = CAPACITY - online - system
        budget = room * 100 / cfg.starvation_percent * 0.999  # requests the room satisfies
        total = sum(shares) or 1
        load = draw(st.floats(0, room * 1.05)) if n else 0.0  # whatever the offline load, tick jitter included
        pods = tuple(PodSample(pod(f"b{i}", QosLevel.BE, priority=priorities[i],
                                   batch_cpu=int(budget * shares[i] / total) if draw(st.booleans()) else 0),
                               f"b{i}", cpu_used=load * shares[i] / total, memory_used=GI) for i in range(n))
        samples.append(state(PodSample(pod("web"), "w", cpu_used=online, memory_used=4 * GI), *pods,
                             cpu_used=online + system + load, memory_used=(4 + n) * GI))
    return cfg, samples


@settings(max_examples=300, deadline=None)
@given(busy_offline_nodes())
def test_below_the_watermark_nothing_is_evicted_whatever_the_offline_load(case) -> None:
    cfg, samples = case
    st_ = EvictionState()
    for t in range(12):
        evictions, st_ = decide_evictions(samples[t % len(samples)], cfg, st_, now=float(t))
        assert evictions == [], evictions
        assert not st_.under_pressure


samples_strategy = st.lists(st.tuples(st.sampled_from(list(QosLevel)[1:]), st.integers(-5, 5),
                                      st.floats(0, 4000), st.integers(0, 8 * GI), st.integers(0, 4000)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(samples_strategy, st.floats(0, 12000), st.integers(0, 40 * GI), st.integers(1, 4), st.integers(0, 4),
       st.floats(0, 100))
def test_eviction_never_takes_online_pods_and_keeps_its_order(raw, cpu_used, memory_used, n, rate, stall) -> None:
    pods = tuple(PodSample(pod(f"p{i}", level, priority=prio, batch_cpu=req if level == QosLevel.BE else 0),
                           f"p{i}", cpu, mem)
                 for i, (level, prio, cpu, mem, req) in enumerate(raw))
    s = state(*pods, cpu_used=cpu_used, memory_used=memory_used, memory_stall=stall)
    cfg = EvictionSettings(samples=n, starvation_samples=n, max_per_interval=rate)
    st_, chosen = EvictionState(), []
    for t in range(n + 2):
        evictions, st_ = decide_evictions(s, cfg, st_, now=t * 0.1)
        chosen.extend(evictions)
    by_uid = {p.pod.uid: p for p in pods}
    assert all(by_uid[e.uid].pod.offline for e in chosen), "an online pod was evicted"
    assert len(chosen) <= rate and len({e.uid for e in chosen}) == len(chosen)
    for prefix, usage in (("node memory", lambda p: p.memory_used), ("online and system", lambda p: p.cpu_used),
                          ("offline pods starving", lambda p: p.pod.batch_cpu)):
        picked = [by_uid[e.uid] for e in chosen if e.reason.startswith(prefix)]
        keys = [(p.pod.priority, -usage(p)) for p in picked]
        assert keys == sorted(keys), f"{prefix} evictions out of order"
