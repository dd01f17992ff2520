"""The load history: sampling, hours closing into the week ring, forecasts, the SQLite store, NodeLoadHistory."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import yaml

from proto.codec import report_from_json
from scheduler.api.loader import load_workload
from scheduler.api.loadhistory import parse_node_load_history
from scheduler.api.manifests import ManifestError
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.nodeview import NodeTelemetry
from scheduler.history.learning import LoadHistory, span_hours, unix_hour, week_of
from scheduler.history.saver import HistorySaver
from scheduler.history.sqlitestore import SqliteHistoryStore
from scheduler.history.store import HistoryStoreError, WeekRecord
from scheduler.modes.simulator.simulation import simulate
from tests.support.builders import report
from tests.support.wire import full_report

MONDAY = datetime(2026, 1, 5, tzinfo=UTC).timestamp()  # hour 0 of a week
HOUR, DAY, WEEK = 3600, 86400, 7 * 86400
NAN = math.nan


def hourly(h: LoadHistory, node: str, start: float, values: list[float], memory: float = NAN) -> None:
    """One sample at the start of each hour from ``start``, then close everything up to the last hour's end."""
    for i, v in enumerate(values):
        h.observe(node, start + i * HOUR, v, memory)
    h.close_finished(start + len(values) * HOUR)


def at(h: LoadHistory, node: str, when: float) -> tuple[float, float]:
    f = h.forecast([node], when, 1)
    return f.cpu[0, 0], f.memory[0, 0]


# -- time layout ------------------------------------------------------------------------------------
def test_hour_of_week_zero_is_monday_midnight_utc() -> None:
    hour = unix_hour(MONDAY)
    assert week_of(hour) == week_of(hour + 167) == week_of(hour - 1) + 1
    assert week_of(hour + 168) == week_of(hour) + 1


@pytest.mark.parametrize("start,duration,hours", [
    (MONDAY, 1, 1), (MONDAY, HOUR, 1), (MONDAY, HOUR + 1, 2), (MONDAY + 1800, HOUR, 2), (MONDAY, 2 * HOUR, 2),
    (MONDAY + 12 * HOUR, 1800, 1),
])
def test_span_hours(start: float, duration: float, hours: int) -> None:
    assert span_hours(start, duration) == hours


# -- sampling and closing hours ------------------------------------------------------------------------
def test_an_hour_closes_into_its_high_quantile_when_the_next_begins() -> None:
    h = LoadHistory()
    for minute in range(60):  # 1..60 percent
        h.observe("n", MONDAY + 10 * HOUR + minute * 60, minute + 1, 2 * (minute + 1))
    assert np.isnan(at(h, "n", MONDAY + WEEK + 10 * HOUR)[0])  # still open
    h.observe("n", MONDAY + 11 * HOUR, 5, 5)
    assert at(h, "n", MONDAY + WEEK + 10 * HOUR) == (54, 100)  # nearest-rank p90 of 60 samples; above 100 counts as 100


@pytest.mark.parametrize("quantile,expect", [(0.5, 30), (0.9, 54), (1.0, 60), (0.01, 1)])
def test_hour_quantile(quantile: float, expect: int) -> None:
    h = LoadHistory(hour_quantile=quantile)
    for minute in range(60):
        h.observe("n", MONDAY + minute * 60, minute + 1, NAN)
    h.close_finished(MONDAY + HOUR)
    assert at(h, "n", MONDAY + WEEK)[0] == expect


def test_fractions_round_up_to_whole_percents() -> None:
    h = LoadHistory()
    hourly(h, "n", MONDAY, [20.01, 0.0])
    assert at(h, "n", MONDAY + WEEK)[0] == 21 and at(h, "n", MONDAY + WEEK + HOUR)[0] == 0


def test_at_most_one_sample_a_minute_and_never_an_older_one() -> None:
    h = LoadHistory(hour_quantile=1.0)
    assert h.observe("n", MONDAY + 5, 10, NAN)
    assert not h.observe("n", MONDAY + 59, 90, NAN)   # same minute
    assert h.observe("n", MONDAY + 60, 20, NAN)
    assert not h.observe("n", MONDAY + 1, 99, NAN)    # older
    h.close_finished(MONDAY + HOUR)
    assert at(h, "n", MONDAY + WEEK)[0] == 20


def test_close_finished_closes_silent_nodes_but_not_the_current_hour() -> None:
    h = LoadHistory()
    h.observe("quiet", MONDAY + 60, 40, 50)
    h.observe("busy", MONDAY + 3 * HOUR + 60, 70, 70)
    assert h.close_finished(MONDAY + 3 * HOUR + 120) == 1
    assert at(h, "quiet", MONDAY + WEEK) == (40, 50)
    assert np.isnan(at(h, "busy", MONDAY + WEEK + 3 * HOUR)[0])


def test_closing_one_hour_and_closing_many_agree() -> None:
    rng = np.random.default_rng(7)
    one, many = LoadHistory(), LoadHistory()
    for week in range(3):
        for hour in (5, 7):
            start = MONDAY + week * WEEK + hour * HOUR
            samples = rng.uniform(0, 100, size=(40, 60, 2))
            samples[::7, :, 1] = NAN  # some nodes without memory
            for node in range(40):
                for minute in range(0, 60, 1 + node % 5):
                    cpu, memory = samples[node, minute]
                    one.observe(f"n{node}", start + minute * 60, cpu, memory)
                    many.observe(f"n{node}", start + minute * 60, cpu, memory)
            for node in range(40):  # `one` closes each hour as its node's next hour begins (that sample undone)
                one.observe(f"n{node}", start + HOUR, 0, 0)
                one._hist[node] = 0
                one._open[node] = -1
            many.close_finished(start + HOUR)
    names = [f"n{node}" for node in range(40)]
    a, b = one.forecast(names, MONDAY + 3 * WEEK, WEEK), many.forecast(names, MONDAY + 3 * WEEK, WEEK)
    assert np.array_equal(a.cpu, b.cpu, equal_nan=True) and np.array_equal(a.memory, b.memory, equal_nan=True)
    assert (~np.isnan(a.cpu)).sum() == 40 * 2 and np.isnan(a.memory[::7]).all()


def test_memory_not_measured_stays_unknown() -> None:
    h = LoadHistory()
    hourly(h, "n", MONDAY, [30])
    cpu, memory = at(h, "n", MONDAY + WEEK)
    assert cpu == 30 and np.isnan(memory)


# -- the ring of weeks ----------------------------------------------------------------------------------
def test_only_the_last_k_weeks_predict_an_hour() -> None:
    h = LoadHistory(weeks=2)
    for week, value in enumerate([90, 30, 40]):
        hourly(h, "n", MONDAY + week * WEEK + 9 * HOUR, [value])
    assert at(h, "n", MONDAY + 3 * WEEK + 9 * HOUR)[0] == 40   # weeks 1 and 2; week 0 (90) was overwritten
    assert np.isnan(at(h, "n", MONDAY + 3 * WEEK + 10 * HOUR)[0])  # an hour never seen


def test_weeks_older_than_k_are_not_used_even_if_nothing_overwrote_them() -> None:
    h = LoadHistory(weeks=2)
    hourly(h, "n", MONDAY + 9 * HOUR, [90])
    assert at(h, "n", MONDAY + 2 * WEEK + 9 * HOUR)[0] == 90
    assert np.isnan(at(h, "n", MONDAY + 3 * WEEK + 9 * HOUR)[0])  # three weeks later: too old


def test_an_hour_is_predicted_only_from_weeks_before_it() -> None:
    h = LoadHistory()
    hourly(h, "n", MONDAY + 9 * HOUR, [50])
    assert np.isnan(at(h, "n", MONDAY + 9 * HOUR)[0])  # the same week's own hour is no prediction of itself
    assert at(h, "n", MONDAY + WEEK + 9 * HOUR)[0] == 50


@pytest.mark.parametrize("quantile,weeks,expect", [(1.0, None, 90), (0.5, None, 50), (0.0, None, 10),
                                                   (1.0, 1, 50), (1.0, 2, 90)])
def test_forecast_quantile_and_weeks(quantile: float, weeks: int | None, expect: float) -> None:
    h = LoadHistory(weeks=4)
    for week, value in enumerate([10, 90, 50]):  # the most recent week last
        hourly(h, "n", MONDAY + week * WEEK + 9 * HOUR, [value])
    f = h.forecast(["n"], MONDAY + 3 * WEEK + 9 * HOUR, 1, quantile=quantile, weeks=weeks)
    assert f.cpu[0, 0] == expect


def test_hours_without_history_and_unknown_nodes_are_nan() -> None:
    h = LoadHistory()
    hourly(h, "n", MONDAY + 9 * HOUR, [50, 60])
    f = h.forecast(["n", "never-seen"], MONDAY + WEEK + 8 * HOUR, 4 * HOUR)
    assert f.hours.tolist() == [unix_hour(MONDAY + WEEK) + k for k in (8, 9, 10, 11)]
    assert np.array_equal(f.cpu[0], [NAN, 50, 60, NAN], equal_nan=True)
    assert np.isnan(f.cpu[1]).all() and np.isnan(f.memory).all()


def test_forecast_is_vectorised_over_many_nodes() -> None:
    h = LoadHistory()
    names = [f"n{i}" for i in range(300)]
    for day in range(7):
        for hour in range(24):
            t = MONDAY + day * DAY + hour * HOUR
            for i, name in enumerate(names):
                h.observe(name, t, (i % 50) + (40 if hour == 18 else 0), i % 100)
    h.close_finished(MONDAY + WEEK)
    f = h.forecast(names[::-1], MONDAY + WEEK + 16 * HOUR, 4 * HOUR)  # 16:00-20:00 on the next Monday
    base = np.array([i % 50 for i in range(300)][::-1], dtype=float)
    assert f.cpu.shape == (300, 4)
    assert np.array_equal(f.cpu[:, 2], base + 40) and np.array_equal(f.cpu[:, 0], base)
    cpu_peak, memory_peak = f.peak()
    assert np.array_equal(cpu_peak, base + 40)
    assert np.array_equal(memory_peak, np.array([i % 100 for i in range(300)][::-1], dtype=float))
    first = f.first_over(base + 10, 100)
    assert (first == 2).all()
    assert (f.first_over(200, 200) == -1).all()


def test_a_span_longer_than_a_week_is_one_week_of_hours() -> None:
    h = LoadHistory()
    assert h.forecast(["n"], MONDAY + 1800, 30 * DAY).hours.size == 168


# -- learning from reports ---------------------------------------------------------------------------------
def test_online_load_is_usage_less_offline_pods() -> None:
    r = full_report()  # 8 cores, 32Gi; uses 3.75 cores and 12Gi, of which a BE pod 2.5 cores and 8Gi
    load = NodeTelemetry(r, 0.0).online()
    assert (load.cpu_millis, load.memory_bytes) == (1250, 4 * 2**30)
    assert load.percent() == (15.625, 12.5)


def test_the_cache_samples_reports_once_a_minute() -> None:
    cache = ClusterCache()
    cache.history = h = LoadHistory(hour_quantile=1.0)
    doc = report("n1", zones=[10], zoneMemory="10Gi", cpuUsed=4, memoryUsed="5Gi",
                 pods=[{"uid": "be", "qos": "BE", "cpu": 1, "memory": "1Gi"}, {"uid": "web", "qos": "LS", "cpu": 2}])
    r = report_from_json(doc)
    for second in range(HOUR):
        r.identity.sample_time_ns = int((MONDAY + second) * 1e9)
        assert cache.accept_report(r, MONDAY + second, register=True, capacity_key="k")
    assert len(h._minute) == 1 and h._hist[0].sum() == 2 * 60  # 60 samples of cpu and of memory
    h.close_finished(MONDAY + HOUR)
    assert at(h, "n1", MONDAY + WEEK) == (30, 40)


# -- the store ---------------------------------------------------------------------------------------------
def learned(weeks: int = 3) -> LoadHistory:
    h = LoadHistory()
    for day in range(7 * weeks):
        for hour in range(24):
            t = MONDAY + day * DAY + hour * HOUR
            for i in range(3):
                h.observe(f"n{i}", t, 10 * i + hour, 50 + (day % 7))
    h.close_finished(MONDAY + weeks * WEEK)
    return h


def same_forecasts(a: LoadHistory, b: LoadHistory, when: float) -> None:
    names = ["n0", "n1", "n2", "other"]
    fa, fb = a.forecast(names, when, WEEK), b.forecast(names, when, WEEK)
    assert np.array_equal(fa.cpu, fb.cpu, equal_nan=True) and np.array_equal(fa.memory, fb.memory, equal_nan=True)
    assert not np.isnan(fa.cpu[:3]).any()


def test_save_and_restore_predict_the_same(tmp_path: Path) -> None:
    now = MONDAY + 3 * WEEK
    h = learned()
    saver = HistorySaver(h, SqliteHistoryStore(tmp_path / "history.sqlite"), clock=lambda: now)
    assert saver.flush() == 3 * 3  # three nodes, three weeks: one batch
    assert saver.flush() == 0
    saver.stop()
    again = LoadHistory()
    store = SqliteHistoryStore(tmp_path / "history.sqlite")
    assert again.restore(store.load(), now) == 9
    same_forecasts(h, again, now)


def test_stop_saves_the_hours_that_finished_since(tmp_path: Path) -> None:
    clock = [MONDAY + 3 * WEEK]
    h = learned()
    saver = HistorySaver(h, SqliteHistoryStore(tmp_path / "h.sqlite"), clock=lambda: clock[0], every=3600)
    saver.start()
    h.observe("n0", clock[0] + 60, 99, 99)  # an hour that ends before stop
    clock[0] += HOUR + 1
    saver.stop()
    again = LoadHistory()
    again.restore(SqliteHistoryStore(tmp_path / "h.sqlite").load(), clock[0])
    assert at(again, "n0", MONDAY + 4 * WEEK)[0] == 99


def test_old_weeks_are_forgotten(tmp_path: Path) -> None:
    store = SqliteHistoryStore(tmp_path / "h.sqlite")
    h = learned(weeks=6)
    HistorySaver(h, store, clock=lambda: MONDAY + 6 * WEEK).flush()
    weeks = {r.week for r in store.load()}
    assert weeks == {week_of(unix_hour(MONDAY)) + k for k in (2, 3, 4, 5)}  # K=4: ring slots reused, rows pruned


def test_a_failed_save_changes_nothing_and_is_retried(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    store = SqliteHistoryStore(path)
    store.save([WeekRecord("a", 1, bytes(168), bytes(168))])

    def half_then_fail():
        yield WeekRecord("b", 1, bytes(168), bytes(168))
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        store.save(half_then_fail())
    assert [r.node for r in SqliteHistoryStore(path).load()] == ["a"]  # never half-written

    class Flaky(SqliteHistoryStore):
        fail = True

        def save(self, records, **kw):
            if self.fail:
                self.fail = False
                raise HistoryStoreError("disk full")
            super().save(records, **kw)

    h = learned(weeks=1)
    saver = HistorySaver(h, Flaky(path), clock=lambda: MONDAY + WEEK)
    with pytest.raises(HistoryStoreError):
        saver.flush()
    assert saver.flush() == 3


def corrupt(path: Path) -> None:
    path.write_bytes(b"this is not a database" * 100)


def foreign(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")


def newer(path: Path) -> None:
    SqliteHistoryStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")


def bad_row(path: Path) -> None:
    SqliteHistoryStore(path).save([WeekRecord("a", 1, b"short", bytes(168))])


@pytest.mark.parametrize("spoil,needle", [
    (corrupt, "not a readable SQLite database"), (foreign, "another program (application_id 0, tables users)"),
    (newer, "schema 99"), (bad_row, "row 'a' week 1: cpu is not 168 percentages"),
], ids=["corrupt", "foreign", "newer", "bad-row"])
def test_an_unusable_file_is_refused_and_left_alone(tmp_path: Path, spoil, needle: str) -> None:
    path = tmp_path / "history.sqlite"
    spoil(path)
    before = path.read_bytes()
    with pytest.raises(HistoryStoreError) as err:
        SqliteHistoryStore(path).load()
    assert str(path) in str(err.value) and needle in str(err.value)
    assert path.read_bytes() == before


# -- the NodeLoadHistory document --------------------------------------------------------------------------
def doc(**spec_changes) -> dict:
    spec = {"capacity": {"cpu": "10", "memory": "100Gi"},
            "series": [{"start": "2026-01-05T00:00:00Z", "step": "1h", "onlineCpu": [1, "2500m", 5],
                        "onlineMemory": ["10Gi", "20Gi", "50Gi"]}]}
    for path, value in spec_changes.items():
        target = spec
        *parts, last = path.split("__")
        for part in parts:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
    return {"apiVersion": "scoria.io/v1", "kind": "NodeLoadHistory", "metadata": {"name": "node-a"}, "spec": spec}


DELETE = object()


def test_a_document_becomes_samples_in_percent() -> None:
    name, h = parse_node_load_history(doc(), "f.yaml:1")
    assert name == "node-a" and (h.cpu_millis, h.memory_bytes) == (10_000, 100 * 2**30)
    assert h.samples() == [(MONDAY, 10, 10), (MONDAY + HOUR, 25, 20), (MONDAY + 2 * HOUR, 50, 50)]
    _, h = parse_node_load_history(doc(series__0__onlineMemory=DELETE, series__0__start=datetime(
        2026, 1, 5, tzinfo=UTC)), "f")
    assert [s[:2] for s in h.samples()] == [(MONDAY, 10), (MONDAY + HOUR, 25), (MONDAY + 2 * HOUR, 50)]
    assert all(math.isnan(s[2]) for s in h.samples())


BAD_DOCS = [
    ("bad start", {"series__0__start": "yesterday"}, "spec.series[0].start: expected an RFC 3339 time"),
    ("no offset", {"series__0__start": "2026-01-05T00:00:00"}, "spec.series[0].start: 2026-01-05T00:00:00 has no offset"),
    ("zero step", {"series__0__step": "0s"}, "spec.series[0].step: must be longer than 0"),
    ("negative step", {"series__0__step": -60}, "spec.series[0].step: must be longer than 0"),
    ("bad step", {"series__0__step": "hourly"}, "spec.series[0].step: expected a duration"),
    ("negative cpu", {"series__0__onlineCpu": [1, -2, 3]}, "spec.series[0].onlineCpu[1]: -2 is outside 0"),
    ("NaN cpu", {"series__0__onlineCpu": [1, 2, float("nan")]}, "spec.series[0].onlineCpu[2]: invalid quantity nan"),
    ("above capacity", {"series__0__onlineCpu": [1, 2, 11]}, "onlineCpu[2]: 11 is outside 0 and the capacity (10 cores)"),
    ("bad memory", {"series__0__onlineMemory": ["1Gi", "lots", "1Gi"]}, "spec.series[0].onlineMemory[1]: invalid"),
    ("lengths differ", {"series__0__onlineMemory": ["1Gi"]}, "spec.series[0].onlineMemory: 1 samples but onlineCpu has 3"),
    ("too many", {"series__0__onlineCpu": [1] * 10_001, "series__0__onlineMemory": DELETE},
     "spec.series[0].onlineCpu: expected a list of 1-10000 samples"),
    ("empty series", {"series": []}, "spec.series: expected a list of 1-100 series"),
    ("unknown field", {"series__0__onlineMem": ["1Gi"]}, "spec.series[0].onlineMem: unknown field"),
    ("no capacity", {"capacity": DELETE}, "spec.capacity: expected a mapping"),
    ("zero capacity", {"capacity__cpu": "0"}, "spec.capacity.cpu: must be more than 0"),
]


@pytest.mark.parametrize("changes,needle", [c[1:] for c in BAD_DOCS], ids=[c[0] for c in BAD_DOCS])
def test_bad_documents_are_refused_naming_the_field(changes: dict, needle: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_node_load_history(doc(**changes), "f.yaml:3")
    assert needle in str(err.value) and "f.yaml:3: NodeLoadHistory node-a" in str(err.value)


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(ManifestError, match="metadata.name: expected a node name, got 'Node_A'"):
        parse_node_load_history({**doc(), "metadata": {"name": "Node_A"}}, "f")


def test_the_loader_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump_all([doc(), doc(series__0__step="0")]).replace("node-a", "node-b", 1))
    with pytest.raises(ManifestError, match=rf"{path}:\d+: NodeLoadHistory node-a: spec.series\[0\].step"):
        load_workload([path])


# -- the simulator ------------------------------------------------------------------------------------------
def test_the_simulator_learns_history_documents(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(doc()))
    sim = simulate([path], at=datetime.fromtimestamp(MONDAY + 4 * HOUR, UTC))
    f = sim.cache.history.forecast(["node-a"], MONDAY + WEEK, 3 * HOUR)
    assert f.cpu[0].tolist() == [10, 25, 50] and f.memory[0].tolist() == [10, 20, 50]


def test_no_history_documents_no_history(tmp_path: Path) -> None:
    path = tmp_path / "n.yaml"
    path.write_text(yaml.safe_dump(report("n1")))
    assert simulate([path], at=datetime.now(UTC)).cache.history is None


def test_a_sample_after_the_simulated_time_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(doc()))
    with pytest.raises(ManifestError, match="spec.series: a sample at 2026-01-05T02:00:00\\+00:00 is after"):
        simulate([path], at=datetime.fromtimestamp(MONDAY + HOUR, UTC))


# -- serve --state-dir ---------------------------------------------------------------------------------------
def serve(tmp_path: Path, *args: str):
    """``python -m scheduler -v serve`` (info logging) on a free port."""
    import subprocess
    import sys

    from hack.lib.processes import ROOT
    return subprocess.Popen([sys.executable, "-m", "scheduler", "-v", "serve", "--port-file", str(tmp_path / "port"),
                             "--insecure", "--listen", "127.0.0.1:0", "--metrics-port", "0", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def serve_and_stop(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Start serve, wait until it listens, stop it with SIGTERM: (exit status, its log)."""
    import signal

    from hack.lib.processes import wait_port
    proc = serve(tmp_path, *args)
    try:
        wait_port(tmp_path / "port", proc, 20)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_serve_keeps_history_across_a_restart(tmp_path: Path) -> None:
    import time

    state = tmp_path / "state"
    state.mkdir()
    week = week_of(unix_hour(time.time())) - 1
    cpu = bytes([30] * 168)
    SqliteHistoryStore(state / "history.sqlite").save([WeekRecord("n1", week, cpu, cpu),
                                                       WeekRecord("n2", week, cpu, cpu)])
    returncode, err = serve_and_stop(tmp_path, "--state-dir", str(state))
    assert returncode == 0, err
    assert "2 node-week(s) restored from" in err and "kept in memory only" not in err
    assert sorted(r.node for r in SqliteHistoryStore(state / "history.sqlite").load()) == ["n1", "n2"]


def test_serve_refuses_an_unreadable_history_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    corrupt(state / "history.sqlite")
    proc = serve(tmp_path, "--state-dir", str(state))
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 2 and f"{state / 'history.sqlite'}: not a readable SQLite database" in err
    assert (state / "history.sqlite").read_bytes() == b"this is not a database" * 100


def test_serve_without_a_state_dir_says_so_once(tmp_path: Path) -> None:

    _, err = serve_and_stop(tmp_path)
    assert err.count("kept in memory only") == 1
