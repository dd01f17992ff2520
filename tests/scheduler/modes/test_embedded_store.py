"""Embedded mode's store under faults: damaged and foreign files, rows that cannot be read, a full disk, and
``serve --embedded`` killed while applies arrive (issue 13, item 10).

A file that cannot be used is refused at start in one line (exit 2) and left as it was; a full disk fails the
one request that met it with the cause named and keeps nothing of it; every acknowledged apply survives SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from hack.lib.processes import ROOT, ControlError, control
from scheduler.cluster.cache import ClusterCache
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Store, Stored, StoreError, StoreFault
from tests.scheduler.modes.test_embedded import docs
from tests.support.builders import pod, queue


def filled(path: Path, pods: int = 40) -> None:
    store = Store(path)
    store.put([Stored("Pod", f"default/p{i}", {"kind": "Pod", "metadata": {"name": f"p{i}"}, "pad": "x" * 500}, {})
               for i in range(pods)])
    store.close()


def truncated(path: Path) -> None:
    filled(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(64 * 1024))


def sql(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    try:
        with db:
            for statement in statements:
                db.execute(statement)
    finally:
        db.close()


def foreign(path: Path) -> None:
    sql(path, "CREATE TABLE users (name TEXT)", "INSERT INTO users VALUES ('alice')")


def empty(path: Path) -> None:
    path.write_bytes(b"")


def newer(path: Path) -> None:
    Store(path).close()
    sql(path, "PRAGMA user_version = 9")


def _spoil_row(path: Path, column: str, hex_bytes: str) -> None:
    filled(path, pods=2)
    sql(path, f"UPDATE objects SET {column} = CAST(x'{hex_bytes}' AS TEXT) WHERE key = 'default/p1'")


def bad_utf8(path: Path) -> None:
    _spoil_row(path, "manifest", "7b226b696e64223a2250ff6f64227d")  # {"kind":"P\xffod"}


def bad_utf8_key(path: Path) -> None:
    _spoil_row(path, "key", "64656661756c742fff")  # default/\xff


def not_an_object(path: Path) -> None:
    _spoil_row(path, "status", "5b312c325d")  # [1,2]


def not_json(path: Path) -> None:
    _spoil_row(path, "manifest", "7b6b696e64")  # {kind


SPOILED = [
    (truncated, "store.sqlite: "), (garbage, "not a readable SQLite database"),
    (foreign, "a SQLite database of another program (application_id 0, tables users), not a Scoria store"),
    (empty, "an empty file, not a Scoria store"), (newer, "Scoria store schema 9, this scheduler reads 2"),
    (bad_utf8, "Pod default/p1: manifest is not readable JSON text ('utf-8' codec can't decode byte 0xff"),
    (bad_utf8_key, "a row's key is not UTF-8 text (byte 8: b'default/\\xff')"),
    (not_an_object, "Pod default/p1: status is not a JSON object"),
    (not_json, "Pod default/p1: manifest is not readable JSON text"),
]


@pytest.mark.parametrize("spoil,needle", SPOILED, ids=[s[0].__name__ for s in SPOILED])
def test_a_store_that_cannot_be_used_is_refused_and_left_as_it_is(tmp_path: Path, spoil, needle: str) -> None:
    path = tmp_path / "store.sqlite"
    spoil(path)
    before = path.read_bytes()
    with pytest.raises(StoreError) as info:
        Embedded(ClusterCache(), Store(path)).load()
    assert needle in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)
    assert path.read_bytes() == before  # nothing written
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


def test_only_a_missing_file_is_made_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    assert path.stat().st_mode & 0o777 == 0o600
    embedded = Embedded(ClusterCache(), Store(path))
    assert embedded.load() == 0
    with pytest.raises(StoreError, match="cannot create"):
        Store(tmp_path / "no" / "such" / "folder" / "store.sqlite")


def serve_embedded(state: Path, *extra: str, port_file: Path | None = None, **popen) -> subprocess.Popen:
    """``serve --embedded`` on ``state``: agents on STATE/agent.sock, the control API on STATE/control.sock
    (``port_file`` gets the agents' address once both listen)."""
    args = [sys.executable, "-m", "scheduler", "serve", "--embedded", "--state", str(state),
            "--metrics-port", "0", "--schedule-interval", "0.2"]
    if port_file is not None:
        args += ["--port-file", str(port_file)]
    return subprocess.Popen([*args, *extra], cwd=ROOT, **popen)


@pytest.mark.parametrize("spoil", [bad_utf8, empty], ids=["bad UTF-8 row", "empty file"])
def test_serve_embedded_refuses_a_bad_store_in_one_line(tmp_path: Path, spoil) -> None:
    (tmp_path / "state").mkdir()
    spoil(tmp_path / "state" / "store.sqlite")
    proc = serve_embedded(tmp_path / "state", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    lines = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "store.sqlite" in lines[0], err
    assert "Traceback" not in err


# -- a full disk ---------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "scoria-test", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(mount)], check=False)  # a file still open: detach it anyway


def test_a_full_disk_fails_the_apply_with_its_cause_and_keeps_nothing_of_it(small_disk: Path) -> None:
    path = small_disk / "store.sqlite"
    embedded = Embedded(ClusterCache(), Store(path))
    (small_disk / "filler").write_bytes(b"x" * 300_000)
    applied: list[str] = []
    fault = None
    for i in range(40):
        try:
            done = embedded.apply(docs(queue(f"q{i}"), pod(f"p{i}", queue=f"q{i}", annotations={"pad": "x" * 100_000})))
            applied += [a.name for a in done]
        except StoreFault as exc:
            fault = exc
            break
    assert fault is not None and fault.full and fault.http_status == 507
    assert str(path) in str(fault) and "database or disk is full" in str(fault) and "\n" not in str(fault)
    # exactly what was acknowledged, in the store and in the cache: the failed file left nothing
    stored = sorted(f"{s.kind.lower()}/{s.key}" for s in embedded.store.load())
    assert stored == sorted(applied) and len(applied) >= 4
    assert sorted(f"pod/{p.key}" for p in embedded.cache.pods.values()) == sorted(a for a in applied if "pod/" in a)
    assert sorted(embedded.cache.queues) == sorted(["default"] + [a.split("/")[1] for a in applied if "queue/" in a])
    # space comes back: the store takes writes again (no transaction was left open)
    (small_disk / "filler").unlink()
    assert embedded.apply(docs(pod("after"))) == [("pod/default/after", "created")]
    embedded.store.close()
    again = Embedded(ClusterCache(), Store(path))
    try:
        assert again.load() == len(applied) + 1
    finally:
        again.store.close()


# -- SIGKILL while applies arrive -------------------------------------------------------------------------
def _apply(sock: Path, text: str, source: str) -> tuple[int, dict]:
    try:
        return 200, control(sock, "POST", "/apply", text.encode(),
                            {"X-Source": source, "Content-Type": "application/yaml"})
    except ControlError as exc:
        return exc.status, {"error": str(exc)}


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("kills", [3])
def test_serve_embedded_killed_during_applies_keeps_every_acknowledged_one(tmp_path: Path, kills: int) -> None:
    """Applies of whole files (a queue, a group, three pods) stream in from a thread; the scheduler is SIGKILLed
    at a varying moment, restarted, and killed again.  Every file acknowledged (200) is there in full after each
    restart, and no file is there in part."""
    state = tmp_path / "state"
    acknowledged: list[int] = []
    counter = iter(range(10_000))

    def batch(n: int) -> str:
        manifests = [queue(f"q{n}"), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                      "metadata": {"name": f"g{n}"}, "spec": {"minMember": 3, "queue": f"q{n}"}}]
        manifests += [pod(f"g{n}-{i}", group=f"g{n}", cpu="10m", memory="1Mi") for i in range(3)]
        return yaml.safe_dump_all(manifests)

    for round_ in range(kills):
        port_file = tmp_path / f"port{round_}"
        proc = serve_embedded(state, port_file=port_file, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait(lambda port_file=port_file, proc=proc: (port_file.exists() and port_file.read_text().strip() != "")
                  or proc.poll() is not None, 30, "the control endpoint")
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            sock = state / "control.sock"
            stop = threading.Event()

            def applier(sock: Path = sock, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    n = next(counter)
                    with contextlib.suppress(OSError):
                        status, answer = _apply(sock, batch(n), f"batch{n}.yaml")
                        assert status == 200, answer
                        acknowledged.append(n)

            worker = threading.Thread(target=applier, daemon=True)
            worker.start()
            time.sleep(0.4 + 0.5 * round_)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            stop.set()
            worker.join(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        store = Store(state / "store.sqlite")  # what a restart starts from
        try:
            objects = {(s.kind, s.key) for s in store.load()}
        finally:
            store.close()
        for n in acknowledged:
            expected = {("Queue", f"q{n}"), ("PodGroup", f"default/g{n}")} | {("Pod", f"default/g{n}-{i}")
                                                                              for i in range(3)}
            assert expected <= objects, f"acknowledged batch {n} lost after kill {round_ + 1}"
        batches = {key.split("-")[0].split("/")[1] for kind, key in objects if kind == "Pod"}
        for g in batches:  # a batch is there whole or not at all
            n = int(g[1:])
            assert ("Queue", f"q{n}") in objects and ("PodGroup", f"default/g{n}") in objects
            assert all(("Pod", f"default/g{n}-{i}") in objects for i in range(3))
    assert len(acknowledged) >= kills, acknowledged  # the applies did run


def test_a_store_of_schema_1_gains_the_events_table_and_keeps_its_objects(tmp_path: Path) -> None:
    """Schema 2 added the events (issue 19): a store written before is upgraded in place, nothing of it lost."""
    path = tmp_path / "store.sqlite"
    store = Store(path)
    store.put([Stored("Queue", "q", {"kind": "Queue"}, {"allocated": {"cpu": 1000}})])
    store.close()
    with sqlite3.connect(path) as db:  # as schema 1 left it
        db.execute("DROP TABLE events")
        db.execute("PRAGMA user_version = 1")
    again = Store(path)
    assert [(s.kind, s.key, s.status) for s in again.load()] == [("Queue", "q", {"allocated": {"cpu": 1000}})]
    again.put_events([(1, {"reason": "Scheduled"})])
    assert again.events() == [(1, {"reason": "Scheduled"})]
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
