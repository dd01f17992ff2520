"""The scheduling loop: new work starts a cycle at once rather than at the interval's end; stop ends the loop."""

from __future__ import annotations

import threading
import time

from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from tests.support.builders import node, pod, podgroup

LONG = 30.0  # an interval no test waits out


def loop(cache: ClusterCache, **kwargs) -> tuple[Scheduler, threading.Event, threading.Thread, list[float]]:
    scheduler = Scheduler(cache)
    cycles: list[float] = []
    once = scheduler.run_once

    def counted():
        assert cache.scheduling.is_set()  # marked while a cycle runs (the embedded controllers wait for it)
        cycles.append(time.monotonic())
        return once()
    scheduler.run_once = counted  # type: ignore[method-assign]
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, kwargs={"interval": LONG, "stop": stop, **kwargs}, daemon=True)
    thread.start()
    return scheduler, stop, thread, cycles


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_pod_arriving_is_scheduled_without_waiting_out_the_interval() -> None:
    cache = ClusterCache()
    cache.upsert(parse_object(node("n1"), "t"))
    cache.upsert(parse_object(pod("first", cpu="1"), "t"))
    _, stop, thread, cycles = loop(cache)
    try:
        assert wait_for(lambda: cache.pods["default/first"].node_name == "n1")
        arrived = time.monotonic()
        cache.upsert(parse_object(pod("second", cpu="1"), "t"))
        assert wait_for(lambda: cache.pods["default/second"].node_name == "n1", timeout=LONG / 3)
        assert time.monotonic() - arrived < LONG / 3
        assert len(cycles) == 2
        assert wait_for(lambda: not cache.scheduling.is_set())  # and not between cycles
    finally:
        began = time.monotonic()
        stop.set()
        thread.join(5)
    assert not thread.is_alive() and time.monotonic() - began < 1.0  # a stop is seen while waiting


def test_a_podgroup_waiting_for_admission_wakes_the_loop() -> None:
    cache = ClusterCache()
    cache.upsert(parse_object(node("n1"), "t"))
    _, stop, thread, cycles = loop(cache)
    try:
        time.sleep(0.1)
        assert cycles == []  # nothing to do: no cycle
        cache.upsert(parse_object(podgroup("g", minMember=1), "t"))
        assert wait_for(lambda: cache.podgroups["default/g"].phase == "Inqueue", timeout=LONG / 3)
    finally:
        stop.set()
        thread.join(5)


def test_updates_of_what_waits_already_are_no_new_work() -> None:
    cache = ClusterCache()
    cache.upsert(parse_object(pod("p", cpu="1"), "t"))
    cache.upsert(parse_object(podgroup("g", minMember=1), "t"))
    assert cache.arrived.is_set()
    cache.arrived.clear()
    cache.upsert(parse_object(pod("p", cpu="1", annotations={"a": "b"}), "t"))  # still waiting: no news
    cache.upsert(parse_object(podgroup("g", minMember=2), "t"))
    cache.upsert(parse_object(pod("bound", cpu="1", nodeName="n1"), "t"))
    assert not cache.arrived.is_set()
    cache.upsert(parse_object(pod("p2", cpu="1"), "t"))
    assert cache.arrived.is_set()


def test_work_streaming_in_is_scheduled_once_it_stops() -> None:
    """Pods arriving one by one, closer together than the debounce, make no cycle until they stop."""
    cache = ClusterCache()
    cache.upsert(parse_object(node("n1", cpu=1000, memory="1000Gi", pods=1000), "t"))
    _, stop, thread, cycles = loop(cache)
    try:
        end = time.monotonic() + 0.6
        i = 0
        while time.monotonic() < end:
            cache.upsert(parse_object(pod(f"p{i}", cpu="100m"), "t"))
            i += 1
            time.sleep(0.002)
        stopped = time.monotonic()
        assert cycles == [] or cycles[0] >= stopped - 0.05  # none while they kept coming (a slow machine aside)
        assert wait_for(lambda: all(p.node_name for p in cache.pods.values()), timeout=5)
        assert len(cycles) == 1
    finally:
        stop.set()
        thread.join(5)


def test_bursts_of_work_leave_the_loop_time_between_cycles() -> None:
    """However often work arrives, an early cycle starts no sooner after the last than that one took."""
    cache = ClusterCache()
    cache.upsert(parse_object(node("n1", cpu=1000, memory="1000Gi", pods=1000), "t"))
    scheduler, stop, thread, _ = loop(cache)
    took: list[tuple[float, float]] = []
    once = scheduler.run_once

    def slow():
        began = time.monotonic()
        time.sleep(0.1)
        result = once()
        took.append((began, time.monotonic()))
        return result
    scheduler.run_once = slow  # type: ignore[method-assign]
    try:
        for i in range(15):
            cache.upsert(parse_object(pod(f"p{i}", cpu="100m"), "t"))
            time.sleep(0.06)  # a burst (of one) every 60 ms: each quiet for longer than the debounce
    finally:
        stop.set()
        thread.join(5)
    assert len(took) >= 2
    for (b0, e0), (b1, _) in zip(took, took[1:], strict=False):
        assert b1 - e0 >= (e0 - b0) * 0.9


def test_without_early_cycles_the_loop_keeps_its_interval() -> None:
    cache = ClusterCache()
    cache.upsert(parse_object(node("n1"), "t"))
    _, stop, thread, cycles = loop(cache, early=False)
    try:
        cache.upsert(parse_object(pod("p", cpu="1"), "t"))
        time.sleep(0.5)
        assert cycles == [] and not cache.pods["default/p"].node_name  # nothing pending at the start: none since
    finally:
        stop.set()
        thread.join(5)
