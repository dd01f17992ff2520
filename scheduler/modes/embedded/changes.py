"""A version number that moves whenever something ``get -w`` or the web view shows may have changed.

The store moves it on every committed change, node lifecycle when a node's
condition changes.  A watcher sends the version it last saw and is answered as
soon as the version differs from it (or after a while, with the same one), then
lists what it watches again.  The version starts at the scheduler's start time
in milliseconds, so a watcher that saw an earlier scheduler's version is
answered at once rather than waiting for this one to catch up.
"""

from __future__ import annotations

import threading
import time


class Changes:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.version = int(time.time() * 1000)

    def bump(self) -> None:
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        """The version once it is not ``seen``, or after ``timeout`` seconds (then possibly still ``seen``)."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != seen, timeout)
            return self.version
