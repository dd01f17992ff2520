"""tdm (revocable zones open in a daily window) and the shuffle action that evicts once a zone closes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from scheduler.actions.shuffle import Shuffle
from scheduler.cycle import Scheduler, system_clock
from scheduler.framework.args import Args
from scheduler.framework.config import ConfigError, parse_config
from scheduler.framework.snapshot import TaskStatus
from scheduler.plugins.tdm import NOT_PREEMPTABLE, Window, parse_budget, parse_window
from tests.support.builders import node, pod, podgroup
from tests.support.sessions import cache_of, open_session, task

ZONE = "volcano.sh/revocable-zone"
PREEMPTABLE = {"volcano.sh/preemptable": "true"}
NOON = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def tdm_config(arguments: str = 'tdm.revocable-zone.rz1: "22:00-06:00"', actions: str = "enqueue, allocate, shuffle"):
    return parse_config(f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: tdm
    arguments: {{{arguments}}}
""")


def at(hhmm: str, tz=UTC) -> datetime:
    h, m = map(int, hhmm.split(":"))
    return datetime(2026, 1, 1, h, m, tzinfo=tz)


# -- windows ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,start,end,canonical", [
    ("10:00-21:00", 600, 1260, "10:00-21:00"),
    ("9:05-17:30", 545, 1050, "09:05-17:30"),
    ("22:00-06:00", 1320, 360, "22:00-06:00"),
    (" 00:00-23:59 ", 0, 1439, "00:00-23:59"),
], ids=["daytime", "one-digit hour", "crosses midnight", "whole day but a minute, spaces around"])
def test_parse_window(text: str, start: int, end: int, canonical: str) -> None:
    window = parse_window(text)
    assert (window.start, window.end, window.text) == (start, end, canonical)


@pytest.mark.parametrize("text,message", [
    ("10:00", "HH:MM-HH:MM"),
    ("10-21", "HH:MM-HH:MM"),
    ("10:0-21:00", "HH:MM-HH:MM"),
    ("10:00 - 21:00", "HH:MM-HH:MM"),
    ("10:00-21:00-23:00", "HH:MM-HH:MM"),
    ("ten-eleven", "HH:MM-HH:MM"),
    ("", "HH:MM-HH:MM"),
    ("24:00-06:00", "hour 24 is out of range 0-23"),
    ("22:00-30:00", "hour 30 is out of range 0-23"),
    ("10:60-21:00", "minute 60 is out of range 0-59"),
    ("10:00-21:99", "minute 99 is out of range 0-59"),
    ("10:00-10:00", "start and end are both 10:00"),
    ("7:30-07:30", "start and end are both 07:30"),
], ids=["one time", "hours only", "one-digit minute", "spaces inside", "three times", "words", "empty",
        "hour 24", "end hour 30", "minute 60", "end minute 99", "equal", "equal, spelt differently"])
def test_parse_window_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_window(text)


@pytest.mark.parametrize("window,time,open_", [
    ("10:00-21:00", "10:00", True),
    ("10:00-21:00", "09:59", False),
    ("10:00-21:00", "20:59", True),
    ("10:00-21:00", "21:00", False),
    ("22:00-06:00", "23:30", True),
    ("22:00-06:00", "05:30", True),
    ("22:00-06:00", "00:00", True),
    ("22:00-06:00", "22:00", True),
    ("22:00-06:00", "06:00", False),
    ("22:00-06:00", "12:00", False),
    ("22:00-06:00", "21:59", False),
], ids=lambda v: str(v))
def test_window_contains(window: str, time: str, open_: bool) -> None:
    assert parse_window(window).contains(at(time)) is open_


def test_window_end_is_exclusive_to_the_second() -> None:
    w = Window(600, 1260)
    assert w.contains(datetime(2026, 1, 1, 20, 59, 59, 999000, tzinfo=UTC))
    assert not w.contains(datetime(2026, 1, 1, 21, 0, 0, tzinfo=UTC))


def test_window_is_read_in_the_timezone_of_the_clock() -> None:
    tokyo = timezone(timedelta(hours=9))
    instant = datetime(2026, 1, 1, 14, 30, tzinfo=UTC)  # 23:30 in Tokyo
    w = parse_window("22:00-06:00")
    assert not w.contains(instant)
    assert w.contains(instant.astimezone(tokyo))


# -- arguments ----------------------------------------------------------------------------------
def test_arguments_parsed() -> None:
    args = tdm_config('tdm.revocable-zone.rz1: "22:00-06:00", tdm.revocable-zone.rz2: "10:00-21:00", '
                      'tdm.evict.period: 5m').plugin("tdm").args
    assert args.evict_period == 300
    assert {z: w.text for z, w in args.windows.items()} == {"rz1": "22:00-06:00", "rz2": "10:00-21:00"}


def test_default_evict_period_is_a_minute() -> None:
    assert tdm_config().plugin("tdm").args.evict_period == 60


@pytest.mark.parametrize("arguments,message", [
    ('tdm.revocable-zone.rz1: "25:00-06:00"', r"'tdm.revocable-zone.rz1': hour 25"),
    ('tdm.revocable-zone.rz1: "22:00-06:61"', r"'tdm.revocable-zone.rz1': minute 61"),
    ("tdm.revocable-zone.rz1: 1000", r"'tdm.revocable-zone.rz1': expected a daily window"),
    ('tdm.evict.period: "1 minute"', r"'tdm.evict.period'"),
    ('tdm.evict.period: "-1m"', r"'tdm.evict.period'"),
    ("tdm.weight: 2", r"unknown argument 'tdm.weight'"),
    ('tdm.revocable-zone.: "10:00-11:00"', r"unknown argument 'tdm.revocable-zone.'"),
    ('tdm.revocable-zone.rz1: "24:00-24:00"', r"'tdm.revocable-zone.rz1': hour 24"),
], ids=["hour", "minute", "not a window", "bad period", "negative period", "no weight (as Volcano)",
        "no zone name", "equal but out of range"])
def test_argument_errors_name_the_key(arguments: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tdm_config(arguments)


@pytest.mark.parametrize("text", ["0:00-0:00", "00:00-00:00", " 22:00-22:00 ", "7:30-07:30"])
def test_equal_start_and_end_is_the_whole_day(text: str) -> None:
    """Volcano (pkg/scheduler/plugins/tdm/tdm.go parseRevocableZone) ends a window whose end is not after its start
    on the next day, so equal times are a whole day."""
    window = tdm_config(f'tdm.revocable-zone.rz1: "{text}"').plugin("tdm").args.windows["rz1"]
    assert all(window.contains(at(f"{h}:{m}")) for h in range(24) for m in (0, 29, 59))
    assert window.contains(datetime(2026, 1, 1, 23, 59, 59, 999999, tzinfo=UTC))


def test_volcano_tdm_case_0_zone_open_all_day() -> None:
    """Volcano pkg/scheduler/plugins/tdm/tdm_test.go Test_TDM, "case 0": rz1 "0:00-0:00" is open (n1, n2 pass and
    score 100 for the preemptable p3), rz2 "0:00-0:01" is closed (n5 refused), regular nodes pass and score 0."""
    objects = [node("n1", cpu=16, memory="64Gi", pods=10, labels={ZONE: "rz1"}),
               node("n2", cpu=16, memory="64Gi", pods=10, labels={ZONE: "rz1"}),
               node("n3", cpu=16, memory="64Gi", pods=10), node("n4", cpu=16, memory="64Gi", pods=10),
               node("n5", cpu=16, memory="64Gi", pods=10, labels={ZONE: "rz2"}),
               podgroup("pg1", namespace="c1"),
               pod("p3", namespace="c1", group="pg1", cpu="1", memory="1Gi", annotations={ZONE: "*"})]
    ssn = open_session(objects, tdm_config('tdm.revocable-zone.rz1: "0:00-0:00", tdm.revocable-zone.rz2: "0:00-0:01"'),
                       at=at("12:00"))
    p3 = task(ssn, "c1/p3")
    assert mask_of(ssn, "c1/p3") == {"n1": True, "n2": True, "n3": True, "n4": True, "n5": False}
    assert dict(zip(ssn.nodes.names, ssn.plugins["tdm"].node_order(p3, None).tolist(), strict=True)) == {
        "n1": 100.0, "n2": 100.0, "n3": 0.0, "n4": 0.0, "n5": 0.0}


@pytest.mark.parametrize("window,victims", [("0:00-0:00", 0), ("0:00-0:01", 2)],
                         ids=["case 1: open all day", "case 0: closed"])
def test_volcano_tdm_victims_all_day_window(window: str, victims: int) -> None:
    """Volcano pkg/scheduler/plugins/tdm/tdm_test.go Test_TDM_victimsFn cases 1 ("0:00-0:00": no victims) and 0
    ("0:00-0:01", closed: want 2, the job's jdb-max-unavailable 30% of 5 pods rounded up, taken at once)."""
    objects = [node("n1", cpu=16, memory="64Gi", pods=10, labels={ZONE: "rz1"}),
               podgroup("pg1", namespace="c1", annotations={"volcano.sh/jdb-max-unavailable": "30%"})]
    objects += [pod(f"p{i}", namespace="c1", group="pg1", nodeName="n1",
                    annotations={"volcano.sh/preemptable": "true" if i <= 3 else "false"}) for i in range(1, 6)]
    ssn = open_session(objects, tdm_config(f'tdm.revocable-zone.rz1: "{window}", tdm.evict.period: 100ms'),
                       at=at("12:00"))
    assert len(ssn.victim_tasks()) == victims


# -- masks, reasons, scores ---------------------------------------------------------------------
NODES = [
    node("reg", cpu=4),
    node("open1", cpu=4, labels={ZONE: "rz1"}),
    node("closed2", cpu=4, labels={ZONE: "rz2"}),
    node("nowhere", cpu=4, labels={ZONE: "rz9"}),  # no window configured: never open
    node("blank", cpu=4, labels={ZONE: ""}),  # an empty zone marks nothing
    node("open1b", cpu=4, labels={ZONE: "rz1"}),
]
TWO_ZONES = 'tdm.revocable-zone.rz1: "22:00-06:00", tdm.revocable-zone.rz2: "08:00-18:00"'


def mask_of(ssn, key: str) -> dict[str, bool]:
    t = task(ssn, key)
    return dict(zip(ssn.nodes.names, ssn.plugins["tdm"].predicate(t, None).tolist(), strict=True))


def test_masks_at_night() -> None:
    ssn = open_session(NODES + [pod("batch", annotations=PREEMPTABLE), pod("web")], tdm_config(TWO_ZONES),
                       at=at("23:30"))
    assert mask_of(ssn, "default/batch") == {"reg": True, "open1": True, "closed2": False, "nowhere": False,
                                             "blank": True, "open1b": True}
    assert mask_of(ssn, "default/web") == {"reg": True, "open1": False, "closed2": False, "nowhere": False,
                                           "blank": True, "open1b": False}


def test_masks_by_day_and_they_are_read_only() -> None:
    ssn = open_session(NODES + [pod("batch", annotations=PREEMPTABLE)], tdm_config(TWO_ZONES), at=at("12:00"))
    assert mask_of(ssn, "default/batch") == {"reg": True, "open1": False, "closed2": True, "nowhere": False,
                                             "blank": True, "open1b": False}
    mask = ssn.plugins["tdm"].predicate(task(ssn, "default/batch"), None)
    with pytest.raises(ValueError):
        mask[0] = False


def test_predicate_reasons() -> None:
    ssn = open_session(NODES + [pod("batch", annotations=PREEMPTABLE), pod("web")], tdm_config(TWO_ZONES),
                       at=at("12:00"))
    plugin = ssn.plugins["tdm"]
    among = np.ones(ssn.nodes.count, dtype=bool)
    assert plugin.predicate_reasons(task(ssn, "default/web"), None, among) == {NOT_PREEMPTABLE: 4}
    assert plugin.predicate_reasons(task(ssn, "default/batch"), None, among) == {
        "node(s) in revocable zone rz1 outside its window 22:00-06:00": 2,
        "node(s) in revocable zone rz9, which is never open: no window is configured (tdm.revocable-zone.rz9)": 1,
    }
    among[ssn.nodes.pos["open1"]] = False  # a node an earlier predicate refused is not counted again
    assert plugin.predicate_reasons(task(ssn, "default/batch"), None, among)[
        "node(s) in revocable zone rz1 outside its window 22:00-06:00"] == 1


def test_explain_names_the_window() -> None:
    ssn = open_session([node("reg", cpu=1), node("rev", cpu=4, labels={ZONE: "rz1"}),
                        pod("batch", cpu=2, annotations=PREEMPTABLE)], tdm_config(), at=at("12:00"))
    why = ssn.explain(task(ssn, "default/batch"), ssn.nodes.free())
    assert why == ("0/2 nodes are available: 1 Insufficient cpu, "
                   "1 node(s) in revocable zone rz1 outside its window 22:00-06:00")


def test_scores_prefer_open_revocable_nodes_for_preemptable_pods_only() -> None:
    ssn = open_session(NODES + [pod("batch", annotations=PREEMPTABLE), pod("web")], tdm_config(TWO_ZONES),
                       at=at("23:30"))
    plugin = ssn.plugins["tdm"]
    batch, web = task(ssn, "default/batch"), task(ssn, "default/web")
    assert dict(zip(ssn.nodes.names, plugin.node_order(batch, None).tolist(), strict=True)) == {
        "reg": 0.0, "open1": 100.0, "closed2": 0.0, "nowhere": 0.0, "blank": 0.0, "open1b": 100.0}
    assert plugin.node_order(web, None) is None  # no opinion: the session skips it
    assert plugin.node_order(batch, np.array([1, 2])).tolist() == [100.0, 0.0]
    assert plugin.score_key(batch) != plugin.score_key(web)
    scores = plugin.node_order(batch, None)
    scores[:] = -1  # the score cache writes into what it is given: it must be a fresh array
    assert plugin.node_order(batch, None)[1] == 100.0


# -- who is preemptable -------------------------------------------------------------------------
@pytest.mark.parametrize("pod_ann,group_ann,expected", [
    ({}, {}, False),
    ({"volcano.sh/preemptable": "true"}, {}, True),
    ({"volcano.sh/preemptable": "false"}, {}, False),
    ({ZONE: "*"}, {}, True),
    ({ZONE: "rz1"}, {}, False),
    ({}, {"volcano.sh/preemptable": "true"}, True),
    ({}, {ZONE: "*"}, True),
    ({"volcano.sh/preemptable": "false"}, {"volcano.sh/preemptable": "true"}, False),
    ({}, {"volcano.sh/preemptable": "maybe"}, False),
], ids=["nothing", "pod says true", "pod says false", "pod zone *", "pod zone named (not Volcano's *)",
        "group says true", "group zone *", "pod false beats group true", "bad group value: unset"])
def test_preemptable(pod_ann: dict, group_ann: dict, expected: bool) -> None:
    ssn = open_session([node("n"), podgroup("g", annotations=group_ann or None), pod("p", group="g", annotations=pod_ann)],
                       tdm_config())
    assert ssn.plugins["tdm"].preemptable(task(ssn, "default/p")) is expected


def test_bad_group_value_warned_once(caplog) -> None:
    objects = [node("n"), podgroup("g", annotations={"volcano.sh/preemptable": "maybe"}), pod("p", group="g")]
    cache = cache_of(objects)
    sched = Scheduler(cache, config=tdm_config(), clock=lambda: NOON)
    with caplog.at_level(logging.WARNING, logger="scheduler.plugins.tdm"):
        sched.run_once()
        sched.run_once()
    assert sum("PodGroup default/g: ignoring" in r.message for r in caplog.records) == 1


# -- budgets ------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,total,expected", [("2", 5, 2), ("0", 5, 0), ("50%", 5, 3), ("34%", 3, 2),
                                                  ("100%", 4, 4)])
def test_parse_budget(value: str, total: int, expected: int) -> None:
    assert parse_budget(value, total) == expected


@pytest.mark.parametrize("value", ["-1", "150%", "half", "1.5", ""])
def test_parse_budget_refuses(value: str) -> None:
    with pytest.raises(ValueError):
        parse_budget(value, 4)


@pytest.mark.parametrize("min_member,annotations,running,allowed", [
    (1, None, 1, 1),
    (1, None, 3, 3),
    (2, None, 2, 0),
    (2, None, 3, 1),
    (1, {"volcano.sh/jdb-min-available": "3"}, 3, 0),
    (1, {"volcano.sh/jdb-min-available": "2"}, 3, 1),
    (1, {"volcano.sh/jdb-min-available": "50%"}, 4, 2),
    (3, {"volcano.sh/jdb-min-available": "1"}, 3, 2),
    (1, {"volcano.sh/jdb-max-unavailable": "1"}, 4, 1),
    (1, {"volcano.sh/jdb-max-unavailable": "50%"}, 4, 2),
    (1, {"volcano.sh/jdb-min-available": "4", "volcano.sh/jdb-max-unavailable": "4"}, 4, 0),
    (2, {"volcano.sh/jdb-min-available": "lots"}, 2, 0),
], ids=["lone pod", "no gang", "gang at minMember", "gang above minMember", "min-available held",
        "min-available allows one", "min-available percent", "budget replaces minMember", "max-unavailable",
        "max-unavailable percent", "min-available read first", "bad budget: minMember"])
def test_evictable_count(min_member: int, annotations: dict | None, running: int, allowed: int) -> None:
    objects = [node("rev", cpu=16, labels={ZONE: "rz1"}),
               podgroup("g", minMember=min_member, annotations=annotations)]
    objects += [pod(f"g-{i}", group="g", nodeName="rev", annotations=PREEMPTABLE) for i in range(running)]
    ssn = open_session(objects, tdm_config())
    assert ssn.plugins["tdm"].evictable_count(ssn.jobs["default/g"])[0] == allowed


def test_max_unavailable_counts_pods_already_down() -> None:
    objects = [node("rev", cpu=16, labels={ZONE: "rz1"}),
               podgroup("g", annotations={"volcano.sh/jdb-max-unavailable": "2"}),
               pod("g-pending", group="g", annotations=PREEMPTABLE)]
    objects += [pod(f"g-{i}", group="g", nodeName="rev", annotations=PREEMPTABLE) for i in range(3)]
    ssn = open_session(objects, tdm_config())
    allowed, limit = ssn.plugins["tdm"].evictable_count(ssn.jobs["default/g"])
    assert allowed == 1 and "1 are" in limit


# -- victims and the shuffle action -------------------------------------------------------------
def closed_zone_objects() -> list[dict]:
    objects = [node("rev", cpu=16, labels={ZONE: "rz1"}), node("reg", cpu=16),
               node("nowhere", cpu=16, labels={ZONE: "rz9"}),
               podgroup("a"), podgroup("gang", minMember=2)]
    objects += [pod(f"a-{i}", group="a", nodeName="rev", annotations=PREEMPTABLE) for i in range(3)]
    objects += [pod(f"gang-{i}", group="gang", nodeName="rev", annotations=PREEMPTABLE) for i in range(2)]
    objects += [pod("web", nodeName="rev"),  # not preemptable: tdm never evicts it
                pod("elsewhere", nodeName="reg", annotations=PREEMPTABLE),  # not on a revocable node
                pod("stray", nodeName="nowhere", annotations=PREEMPTABLE)]  # zone without a window: kept
    return objects


def test_victim_tasks_one_per_job_lowest_priority_first() -> None:
    objects = closed_zone_objects() + [pod("a-high", group="a", nodeName="rev", annotations=PREEMPTABLE,
                                           priority=100)]
    ssn = open_session(objects, tdm_config(), at=NOON)
    victims = ssn.victim_tasks()
    assert [(t.pod.key, reason) for t, reason in victims] == [
        ("default/a-2", "revocable zone rz1 closed at 06:00 (tdm)")]
    assert ssn.state("tdm")["held"] == {
        "default/gang": "job default/gang keeps its 2 pod(s) in closed revocable zone(s) rz1: "
                        "at its minimum (minMember 2, 2 placed)"}
    assert ssn.victim_tasks() == []  # asked again in the same session: the job had its victim


def test_no_victims_while_the_window_is_open() -> None:
    ssn = open_session(closed_zone_objects(), tdm_config(), at=at("23:30"))
    assert ssn.victim_tasks() == []


def test_enabled_victim_false_turns_evictions_off() -> None:
    config = parse_config("""
actions: "allocate, shuffle"
tiers:
- plugins:
  - name: tdm
    enabledVictim: false
    arguments: {tdm.revocable-zone.rz1: "22:00-06:00"}
""")
    ssn = open_session(closed_zone_objects(), config, at=NOON)
    assert ssn.victim_tasks() == []


def test_shuffle_evicts_through_one_statement_and_skips_tasks_not_running() -> None:
    ssn = open_session([node("n"), pod("run", nodeName="n"), pod("gone", nodeName="n"), pod("new")], tdm_config())
    run, gone, new = task(ssn, "default/run"), task(ssn, "default/gone"), task(ssn, "default/new")
    gone.job.set_status(gone, TaskStatus.RELEASING)
    ssn.victim_tasks = lambda: [(gone, "r1"), (new, "r2"), (run, "closed (test)")]
    Shuffle(Args({})).execute(ssn)
    assert [(t.pod.key, reason) for t, reason in ssn.evictions] == [("default/run", "closed (test)")]
    assert run.status == TaskStatus.RELEASING and ssn.commits == 1


def test_shuffle_with_nothing_to_do_commits_nothing() -> None:
    ssn = open_session([node("n")], tdm_config())
    Shuffle(Args({})).execute(ssn)
    assert ssn.commits == 0 and ssn.evictions == []


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def evicted(cache) -> list[str]:
    return sorted(p.name for p in cache.pods.values() if p.evicted)


def test_second_eviction_only_after_the_period() -> None:
    cache = cache_of(closed_zone_objects())
    clock = Clock(NOON)
    sched = Scheduler(cache, config=tdm_config('tdm.revocable-zone.rz1: "22:00-06:00", tdm.evict.period: 2m'),
                      clock=clock)
    assert sched.run_once().evictions == 1
    assert evicted(cache) == ["a-2"]
    assert cache.pods[next(u for u, p in cache.pods.items() if p.name == "a-2")].reason == \
        "Evicted: revocable zone rz1 closed at 06:00 (tdm)"
    for seconds in (0, 60, 119):  # cycles inside the period evict nothing more
        clock.now = NOON + timedelta(seconds=seconds)
        assert sched.run_once().evictions == 0
    clock.now = NOON + timedelta(minutes=2)
    assert sched.run_once().evictions == 1
    assert evicted(cache) == ["a-1", "a-2"]
    clock.now = NOON + timedelta(minutes=3)
    assert sched.run_once().evictions == 0
    clock.now = NOON + timedelta(minutes=4)
    assert sched.run_once().evictions == 1
    clock.now = NOON + timedelta(hours=1)
    assert sched.run_once().evictions == 0  # job a is gone; the gang is held at minMember; the rest is not tdm's
    assert evicted(cache) == ["a-0", "a-1", "a-2"]
    assert sched.plugin_state["tdm"]["last_eviction"] == {}  # forgotten once the period is over or the job gone


def test_period_is_per_job() -> None:
    objects = [node("rev", cpu=16, labels={ZONE: "rz1"}), podgroup("a"), podgroup("b")]
    objects += [pod(f"{g}-{i}", group=g, nodeName="rev", annotations=PREEMPTABLE) for g in "ab" for i in range(2)]
    cache = cache_of(objects)
    clock = Clock(NOON)
    sched = Scheduler(cache, config=tdm_config(), clock=clock)
    assert sched.run_once().evictions == 2  # one of each job
    assert evicted(cache) == ["a-1", "b-1"]
    clock.now = NOON + timedelta(seconds=30)
    assert sched.run_once().evictions == 0


def test_held_job_logged_once_and_released(caplog) -> None:
    objects = [node("rev", cpu=16, labels={ZONE: "rz1"}), podgroup("gang", minMember=2)]
    objects += [pod(f"gang-{i}", group="gang", nodeName="rev", annotations=PREEMPTABLE) for i in range(2)]
    cache = cache_of(objects)
    clock = Clock(NOON)
    sched = Scheduler(cache, config=tdm_config(), clock=clock)
    with caplog.at_level(logging.INFO, logger="scheduler.plugins.tdm"):
        for minutes in range(3):
            clock.now = NOON + timedelta(minutes=minutes)
            assert sched.run_once().evictions == 0
        clock.now = at("23:00")  # the window opens: nothing is stranded, the hold ends
        sched.run_once()
    messages = [r.message for r in caplog.records]
    assert sum("keeps its 2 pod(s)" in m for m in messages) == 1
    assert any("no longer held" in m for m in messages)
    assert sched.plugin_state["tdm"]["held"] == {}


def test_without_shuffle_nothing_is_evicted() -> None:
    cache = cache_of(closed_zone_objects())
    sched = Scheduler(cache, config=tdm_config(actions="enqueue, allocate"), clock=lambda: NOON)
    assert sched.run_once().evictions == 0


# -- the scheduler's clock ----------------------------------------------------------------------
def test_system_clock_is_local_and_aware() -> None:
    now = system_clock()
    assert now.tzinfo is not None
    assert now.utcoffset() == datetime.now().astimezone().utcoffset()
    assert abs(now.timestamp() - datetime.now(UTC).timestamp()) < 5
