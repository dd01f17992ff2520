"""Waiting in a test for what another thread or process does (a server, an informer, the controllers)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, message: str = "condition not reached in time",
               *, poll: float = 0.02) -> None:
    """Return once ``predicate()`` is true, asking every ``poll`` seconds; an AssertionError saying ``message``
    once ``timeout`` seconds have gone by without it."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message
        time.sleep(poll)
