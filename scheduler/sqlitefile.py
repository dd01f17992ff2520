"""SQLite files the scheduler owns (the embedded store, the load history): marked as ours, checked before use.

A new, empty file gets its tables and two marks — ``application_id`` (which of
our files it is) and ``user_version`` (its schema).  Any other file must carry
both marks and pass SQLite's quick check; otherwise it is refused and never
written, so a wrong ``--state`` cannot damage another program's database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def open_owned(path: str | Path, *, application_id: int, schema_version: int, schema: list[str], what: str,
               error: Callable[[str], Exception]) -> sqlite3.Connection:
    """A connection to ``path`` (autocommit: use :func:`transaction`); ``error(problem)`` is raised otherwise."""
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise error(f"not a readable SQLite database ({exc})") from None
    try:
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if app == 0 and not tables:  # a new file: make it ours
            with transaction(db):
                for statement in schema:
                    db.execute(statement)
                db.execute(f"PRAGMA application_id = {application_id}")
                db.execute(f"PRAGMA user_version = {schema_version}")
            return db
        if app != application_id:
            raise error(f"a SQLite database of another program (application_id {app}, tables "
                        f"{', '.join(tables) or 'none'}), not a {what}")
        if version != schema_version:
            raise error(f"{what} schema {version}, this scheduler reads {schema_version}")
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise error(f"damaged ({check})")
        return db
    except sqlite3.Error as exc:
        db.close()
        raise error(f"not a readable SQLite database ({exc})") from None
    except BaseException:
        db.close()
        raise


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (taken at once: BEGIN IMMEDIATE); rolled back on any exception."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
