"""SQLite files the scheduler owns (the embedded store, the load history): marked as ours, checked before use.

Only a path where no file exists is made ours: it gets its tables and two
marks — ``application_id`` (which of our files it is) and ``user_version``
(its schema).  Any file that exists, an empty one included, must carry both
marks and pass SQLite's quick check; otherwise it is refused and never
written, so a wrong ``--state`` cannot damage another program's database and
a file emptied by accident is not taken for a new, empty cluster.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def open_owned(path: str | Path, *, application_id: int, schema_version: int, schema: list[str], what: str,
               error: Callable[[str], Exception],
               upgrades: dict[int, list[str]] | None = None) -> sqlite3.Connection:
    """A connection to ``path`` (autocommit: use :func:`transaction`); ``error(problem)`` is raised otherwise.

    ``upgrades[v]`` are the statements that take a file of schema ``v`` to ``v + 1``: an older file of ours is
    brought up to ``schema_version`` in one transaction (all steps or none); a newer one is refused."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)  # made here, or there before
    except FileExistsError:
        created = False
    except OSError as exc:
        raise error(f"cannot create ({exc.strerror})") from None
    else:
        os.close(fd)
        created = True
    if not created and path.is_file() and path.stat().st_size == 0:
        raise error(f"an empty file, not a {what} (only a path where no file exists is made into a new one)")
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        _forget(path, created)
        raise error(f"not a readable SQLite database ({exc})") from None
    try:
        if created:  # a new file: make it ours
            with transaction(db):
                for statement in schema:
                    db.execute(statement)
                db.execute(f"PRAGMA application_id = {application_id}")
                db.execute(f"PRAGMA user_version = {schema_version}")
            return db
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if app != application_id:
            raise error(f"a SQLite database of another program (application_id {app}, tables "
                        f"{', '.join(tables) or 'none'}), not a {what}")
        steps = upgrades or {}
        if version != schema_version and not (version < schema_version and
                                              all(v in steps for v in range(version, schema_version))):
            raise error(f"{what} schema {version}, this scheduler reads {schema_version}")
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise error(f"damaged ({check})")
        if version < schema_version:
            with transaction(db):
                for v in range(version, schema_version):
                    for statement in steps[v]:
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {schema_version}")
        return db
    except sqlite3.Error as exc:
        db.close()
        _forget(path, created)
        raise error(f"cannot create ({exc})" if created else f"not a readable SQLite database ({exc})") from None
    except BaseException:
        db.close()
        _forget(path, created)
        raise


def _forget(path: Path, created: bool) -> None:
    """Remove a file this call created and could not finish (a full disk), so the next start may try again."""
    if created:
        for name in (path, path.with_name(path.name + "-journal")):
            with contextlib.suppress(OSError):
                name.unlink()


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (taken at once: BEGIN IMMEDIATE); rolled back on any exception, a failed
    COMMIT (a full disk) included, so the connection is ready for the next one."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite may already have rolled back (SQLITE_FULL, SQLITE_IOERR)
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise
