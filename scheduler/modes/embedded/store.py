"""The embedded mode's store: the cluster kept in SQLite, so a restart of the scheduler loses nothing.

One table of objects — manifests as the user applied them (JSON), keyed by
kind and namespace/name, with what the scheduler and the agents decided about
them kept apart in ``status`` (a pod's node, phase, reason, annotations
written at bind) — and one of the latest events (:mod:`.events`: at most
:data:`MAX_EVENTS`, the oldest dropped first), so a restart keeps recent ones.
Schema 1 (before events) is upgraded in place.  Every change is one
transaction: an ``apply`` of a whole file, a cycle's binds and statuses, a
delete: either all of it is there after a crash or none of it (SQLite's WAL
journal, ``synchronous=FULL``).  A file that is not a Scoria store — another
program's, a damaged one, an empty one — is refused with its name, never
overwritten; a row that cannot be read (not UTF-8, not a JSON object) is
refused at start with its kind and key.

Two kinds of failure: :class:`StoreError` is a file that cannot be used (bad
input: one line, exit 2 at start); :class:`StoreFault` is the store failing
while running — a full disk, an I/O error — which fails the one request or
cycle that met it, with the cause in its message, and leaves nothing of it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from proto.errors import InputError
from scheduler.sqlitefile import open_owned, transaction

APPLICATION_ID = 0x53434F53  # "SCOS": marks a SQLite file as a Scoria embedded store
SCHEMA_VERSION = 2
EVENTS_TABLE = "CREATE TABLE events (id INTEGER PRIMARY KEY, event TEXT NOT NULL)"
UPGRADES = {1: [EVENTS_TABLE]}  # schema 1 had no events
MAX_EVENTS = 1000  # events kept; the oldest go first
KINDS = ("Namespace", "PriorityClass", "Queue", "Node", "PodGroup", "Pod")  # the order objects are loaded in (then
# the rest: the Volcano Jobs and Commands and the objects their controller makes, read by the controllers' host)


class StoreError(InputError):
    """A store file that cannot be used (the message names it); it is left as it is."""


class StoreFault(Exception):
    """The store could not be written or read while running; the message names the file and the cause.

    Not bad input and not a bug: the change that met it was not made (its
    transaction rolled back).  ``http_status`` is what the control endpoint
    answers with: 507 (Insufficient Storage) for a full disk, else 500.
    """

    def __init__(self, message: str, *, full: bool = False):
        super().__init__(message)
        self.full = full
        self.http_status = 507 if full else 500


@dataclass
class Stored:
    kind: str
    key: str  # namespace/name, or name
    manifest: dict
    status: dict


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        # checked before anything that writes: a foreign file is left exactly as it was
        self._db = open_owned(self.path, application_id=APPLICATION_ID, schema_version=SCHEMA_VERSION, schema=[
            "CREATE TABLE objects (kind TEXT NOT NULL, key TEXT NOT NULL, manifest TEXT NOT NULL, "
            "status TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (kind, key))", EVENTS_TABLE],
            what="Scoria store", error=lambda problem: StoreError(f"{self.path}: {problem}"), upgrades=UPGRADES)
        #: called after each change is committed (embedded mode wakes its watchers with it)
        self.on_change: Callable[[], None] | None = None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path}: not a readable SQLite database ({exc})") from None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        before = self._db.total_changes
        with self._lock, self._faults("be written"), transaction(self._db) as db:
            yield db
        if self.on_change is not None and self._db.total_changes != before:  # a report that changed nothing: quiet
            self.on_change()

    @contextmanager
    def _faults(self, doing: str) -> Iterator[None]:
        """SQLite's errors while running as a StoreFault naming the file and the cause."""
        try:
            yield
        except sqlite3.Error as exc:
            full = isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)
            raise StoreFault(f"the store {self.path} could not {doing}: {exc}"
                             + (" — free space on its file system; nothing of this change was kept" if full else ""),
                             full=full) from None

    # -- reading ---------------------------------------------------------------------------------
    def load(self) -> list[Stored]:
        """Every object, in dependency order (classes and queues before groups, groups before pods).

        A row that cannot be read — text that is not UTF-8, a manifest or
        status that is not a JSON object — is a StoreError naming it: the
        store is refused at start rather than loaded without it.
        """
        with self._lock, self._faults("be read"):
            rows = self._db.execute("SELECT CAST(kind AS BLOB), CAST(key AS BLOB), CAST(manifest AS BLOB), "
                                    "CAST(status AS BLOB) FROM objects").fetchall()
        order = {k: i for i, k in enumerate(KINDS)}
        out = [self._row(*row) for row in rows]
        return sorted(out, key=lambda s: (order.get(s.kind, 99), s.key))

    def of_kind(self, kind: str) -> list[Stored]:
        """Every object of one kind, by key."""
        with self._lock, self._faults("be read"):
            rows = self._db.execute("SELECT CAST(kind AS BLOB), CAST(key AS BLOB), CAST(manifest AS BLOB), "
                                    "CAST(status AS BLOB) FROM objects WHERE kind=? ORDER BY key", (kind,)).fetchall()
        return [self._row(*row) for row in rows]

    def get(self, kind: str, key: str) -> Stored | None:
        with self._lock, self._faults("be read"):
            row = self._db.execute("SELECT CAST(manifest AS BLOB), CAST(status AS BLOB) FROM objects "
                                   "WHERE kind=? AND key=?", (kind, key)).fetchone()
        return self._row(kind.encode(), key.encode(), *row) if row else None

    def _row(self, kind: bytes, key: bytes, manifest: bytes, status: bytes) -> Stored:
        names = []
        for column, raw in (("kind", kind), ("key", key)):
            try:
                names.append(bytes(raw).decode())
            except UnicodeDecodeError as exc:
                raise StoreError(f"{self.path}: a row's {column} is not UTF-8 text (byte {exc.start}: "
                                 f"{bytes(raw)[:60]!r})") from None
        docs = []
        for column, raw in (("manifest", manifest), ("status", status)):
            try:
                doc = json.loads(bytes(raw).decode())
            except (UnicodeDecodeError, ValueError) as exc:
                raise StoreError(f"{self.path}: {names[0]} {names[1]}: {column} is not readable JSON text "
                                 f"({exc})") from None
            if not isinstance(doc, dict):
                raise StoreError(f"{self.path}: {names[0]} {names[1]}: {column} is not a JSON object")
            docs.append(doc)
        return Stored(names[0], names[1], docs[0], docs[1])

    # -- writing: each call one transaction -------------------------------------------------------
    def put(self, objects: list[Stored]) -> None:
        """Insert or replace these objects (manifest and status) all at once."""
        with self._tx() as db:
            for o in objects:
                db.execute("INSERT OR REPLACE INTO objects (kind, key, manifest, status) VALUES (?, ?, ?, ?)",
                           (o.kind, o.key, json.dumps(o.manifest, sort_keys=True), json.dumps(o.status, sort_keys=True)))

    def update_status(self, changes: list[tuple[str, str, dict]]) -> None:
        """Merge each ``(kind, key, fields)`` into that object's status, all at once; unknown objects are skipped."""
        if not changes:
            return
        with self._tx() as db:
            for kind, key, fields in changes:
                row = db.execute("SELECT status FROM objects WHERE kind=? AND key=?", (kind, key)).fetchone()
                if row is None:
                    continue
                status = json.loads(row[0])
                status.update(fields)
                text = json.dumps(status, sort_keys=True)
                if text != row[0]:  # most reports change nothing: nothing written, no watcher woken
                    db.execute("UPDATE objects SET status=? WHERE kind=? AND key=?", (text, kind, key))

    def commit(self, writes: list[Stored | tuple[str, str] | tuple[str, str, dict]]) -> None:
        """Several changes in one transaction, in order: a :class:`Stored` is put (manifest and status replaced),
        ``(kind, key)`` deleted, ``(kind, key, fields)`` merged into a status (as :meth:`update_status`)."""
        if not writes:
            return
        with self._tx() as db:
            for w in writes:
                if isinstance(w, Stored):
                    db.execute("INSERT OR REPLACE INTO objects (kind, key, manifest, status) VALUES (?, ?, ?, ?)",
                               (w.kind, w.key, json.dumps(w.manifest, sort_keys=True),
                                json.dumps(w.status, sort_keys=True)))
                elif len(w) == 2:
                    db.execute("DELETE FROM objects WHERE kind=? AND key=?", w)
                else:
                    row = db.execute("SELECT status FROM objects WHERE kind=? AND key=?", w[:2]).fetchone()
                    if row is not None:
                        status = json.loads(row[0])
                        status.update(w[2])
                        db.execute("UPDATE objects SET status=? WHERE kind=? AND key=?",
                                   (json.dumps(status, sort_keys=True), *w[:2]))

    def delete(self, kind: str, key: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM objects WHERE kind=? AND key=?", (kind, key)).rowcount > 0

    # -- events ------------------------------------------------------------------------------------
    def events(self) -> list[tuple[int, dict]]:
        """The kept events, oldest first, as ``(id, event)``; one that does not read back is skipped."""
        with self._lock, self._faults("be read"):
            rows = self._db.execute("SELECT id, CAST(event AS BLOB) FROM events ORDER BY id").fetchall()
        out = []
        for ident, raw in rows:
            try:
                doc = json.loads(bytes(raw).decode())
            except (UnicodeDecodeError, ValueError):
                continue  # an event is worth less than a start: left out, not refused
            if isinstance(doc, dict):
                out.append((int(ident), doc))
        return out

    def put_events(self, events: list[tuple[int, dict]], gone: Sequence[int] = (), keep: int = MAX_EVENTS) -> None:
        """Insert or replace these ``(id, event)`` rows, delete the ``gone`` ids and drop all but the newest ``keep``,
        in one transaction."""
        if not events and not gone:
            return
        with self._tx() as db:
            db.executemany("DELETE FROM events WHERE id = ?", [(i,) for i in gone])
            for ident, doc in events:
                db.execute("INSERT OR REPLACE INTO events (id, event) VALUES (?, ?)",
                           (ident, json.dumps(doc, sort_keys=True)))
            db.execute("DELETE FROM events WHERE id NOT IN (SELECT id FROM events ORDER BY id DESC LIMIT ?)", (keep,))

    def close(self) -> None:
        with self._lock:
            self._db.close()
