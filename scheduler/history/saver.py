"""Saving the load history as it learns: a thread that closes finished hours and writes changed weeks."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from scheduler.history.learning import LoadHistory, unix_hour, week_of
from scheduler.history.store import HistoryStore

log = logging.getLogger(__name__)


class HistorySaver:
    """Closes finished hours and saves changed weeks every ``every`` seconds from a thread, and at :meth:`stop`."""

    def __init__(self, history: LoadHistory, store: HistoryStore, *, every: float = 60.0,
                 clock: Callable[[], float] = time.time):
        self.history, self.store, self.every, self.clock = history, store, every, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="history-saver", daemon=True)

    def flush(self) -> int:
        """Close the hours that ended and save every changed week in one batch; how many weeks were written."""
        now = self.clock()
        self.history.close_finished(now)
        records = self.history.take_dirty()
        if records:
            try:
                self.store.save(records, forget_before=week_of(unix_hour(now)) - self.history.weeks)
            except Exception:
                self.history.requeue(records)
                raise
        return len(records)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.flush()
            except Exception:  # keep learning; the weeks stay queued for the next try
                log.exception("saving the load history to %s failed", self.store.location)

    def stop(self) -> None:
        """Stop the thread, save what is finished once more and close the store."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            saved = self.flush()
            log.info("load history: saved %d node-week(s) to %s", saved, self.store.location)
        except Exception:
            log.exception("saving the load history to %s at shutdown failed", self.store.location)
        finally:
            self.store.close()
