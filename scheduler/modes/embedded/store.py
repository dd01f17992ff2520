"""The embedded mode's store: the cluster kept in SQLite, so a restart of the scheduler loses nothing.

One table of objects — manifests as the user applied them (JSON), keyed by
kind and namespace/name, with what the scheduler and the agents decided about
them kept apart in ``status`` (a pod's node, phase, reason, annotations
written at bind) — and one of metadata (schema version).  Every change is one
transaction: an ``apply`` of a whole file, a cycle's binds and statuses, a
delete: either all of it is there after a crash or none of it (SQLite's WAL
journal, ``synchronous=FULL``).  A file that is not a Scoria store is refused
with its name, never overwritten.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from proto.errors import InputError
from scheduler.sqlitefile import open_owned, transaction

APPLICATION_ID = 0x53434F53  # "SCOS": marks a SQLite file as a Scoria embedded store
SCHEMA_VERSION = 1
KINDS = ("PriorityClass", "Queue", "Node", "PodGroup", "Pod")  # the order objects are loaded in


class StoreError(InputError):
    """A store file that cannot be used (the message names it); it is left as it is."""


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
            "status TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (kind, key))"],
            what="Scoria store", error=lambda problem: StoreError(f"{self.path}: {problem}"))
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path}: not a readable SQLite database ({exc})") from None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, transaction(self._db) as db:
            yield db

    # -- reading ---------------------------------------------------------------------------------
    def load(self) -> list[Stored]:
        """Every object, in dependency order (classes and queues before groups, groups before pods)."""
        with self._lock:
            rows = self._db.execute("SELECT kind, key, manifest, status FROM objects").fetchall()
        order = {k: i for i, k in enumerate(KINDS)}
        out = []
        for kind, key, manifest, status in sorted(rows, key=lambda r: (order.get(r[0], 99), r[1])):
            try:
                out.append(Stored(kind, key, json.loads(manifest), json.loads(status)))
            except ValueError as exc:
                raise StoreError(f"{self.path}: {kind} {key} is not readable JSON ({exc})") from None
        return out

    def get(self, kind: str, key: str) -> Stored | None:
        with self._lock:
            row = self._db.execute("SELECT manifest, status FROM objects WHERE kind=? AND key=?", (kind, key)).fetchone()
        return Stored(kind, key, json.loads(row[0]), json.loads(row[1])) if row else None

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
                db.execute("UPDATE objects SET status=? WHERE kind=? AND key=?",
                           (json.dumps(status, sort_keys=True), kind, key))

    def delete(self, kind: str, key: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM objects WHERE kind=? AND key=?", (kind, key)).rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
