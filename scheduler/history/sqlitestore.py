"""The load history in one SQLite file: a row per node and week, each save one transaction."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from scheduler.history.learning import HOURS_PER_WEEK, UNKNOWN
from scheduler.history.store import HistoryStore, HistoryStoreError, WeekRecord
from scheduler.sqlitefile import open_owned, transaction

_CELLS = bytes(range(101)) + bytes([UNKNOWN])  # what a stored hour may hold
APPLICATION_ID = 0x53434C48  # "SCLH": marks a SQLite file as a Scoria load history
SCHEMA_VERSION = 1


class SqliteHistoryStore(HistoryStore):
    """One SQLite file: a row per node and week (two 168-byte blobs), each save one transaction.

    A file that is not SQLite, is another program's database or comes from a
    newer schema is refused with HistoryStoreError, never rewritten.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.location = str(self.path)
        self._lock = threading.Lock()
        self._db = open_owned(self.path, application_id=APPLICATION_ID, schema_version=SCHEMA_VERSION, schema=[
            "CREATE TABLE weeks (node TEXT NOT NULL, week INTEGER NOT NULL, cpu BLOB NOT NULL, "
            "memory BLOB NOT NULL, PRIMARY KEY (node, week)) WITHOUT ROWID"],
            what="Scoria load history", error=self._error)

    def _error(self, problem: str) -> HistoryStoreError:
        return HistoryStoreError(f"{self.location}: {problem}; the file was left as it is — move it away or "
                                 "choose another --state-dir")

    def load(self) -> list[WeekRecord]:
        out = []
        with self._lock:
            try:
                rows = self._db.execute("SELECT node, week, cpu, memory FROM weeks ORDER BY week").fetchall()
            except sqlite3.Error as exc:
                raise self._error(f"cannot read ({exc})") from None
        for node, week, cpu, memory in rows:
            if not isinstance(node, str) or not isinstance(week, int):
                raise self._error(f"row {node!r} week {week!r}: not a node name and a week number")
            for what, blob in (("cpu", cpu), ("memory", memory)):
                if not isinstance(blob, bytes) or len(blob) != HOURS_PER_WEEK or blob.translate(None, _CELLS):
                    raise self._error(f"row {node!r} week {week}: {what} is not {HOURS_PER_WEEK} percentages")
            out.append(WeekRecord(node, week, cpu, memory))
        return out

    def save(self, records: Iterable[WeekRecord], *, forget_before: int | None = None) -> None:
        with self._lock:
            try:
                with transaction(self._db):
                    self._db.executemany("INSERT OR REPLACE INTO weeks VALUES (?, ?, ?, ?)", records)
                    if forget_before is not None:
                        self._db.execute("DELETE FROM weeks WHERE week < ?", (forget_before,))
            except sqlite3.Error as exc:
                raise self._error(f"cannot save ({exc})") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()
