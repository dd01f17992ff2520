"""Where learned weeks survive a restart: the store interface and the record it keeps.

A store is read whole when the scheduler starts and written in batches of the weeks that changed
(:mod:`scheduler.history.saver`). :mod:`scheduler.history.sqlitestore` keeps them in a file;
:mod:`scheduler.modes.kubernetes.history_store` on the Nodes themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import NamedTuple

from proto.errors import InputError


class WeekRecord(NamedTuple):
    """One node's learned week as stored: a byte per hour of the week (percent, 255 unknown) per resource."""

    node: str
    week: int
    cpu: bytes
    memory: bytes


class HistoryStoreError(InputError):
    """A history file that cannot be used (the message names it); it is left as it is."""


class HistoryStore(ABC):
    """Where learned weeks survive a restart: all of them read at start, changed ones written in batches."""

    location: str

    @abstractmethod
    def load(self) -> list[WeekRecord]:
        """Every stored week; HistoryStoreError when the store is not a readable history."""

    @abstractmethod
    def save(self, records: Iterable[WeekRecord], *, forget_before: int | None = None) -> None:
        """Write ``records`` (and drop weeks before ``forget_before``) all at once or not at all."""

    @abstractmethod
    def close(self) -> None:
        """Let go of the store (a store that holds nothing open says so by doing nothing)."""
