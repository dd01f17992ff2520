"""A bound on how long one fuzz example may run, so that a hang fails the test instead of stopping the suite.

The fuzz properties say that no input yields a traceback, a hang or partial state; hypothesis runs them
without a deadline (a busy machine makes timings noisy), so without this a hanging input would never end.
The bound is generous — examples take milliseconds — and it is raised as :class:`Hang`, a BaseException,
so that no ``except Exception`` in the code under test can take it for an ordinary error.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
EXAMPLE_SECONDS = 30.0


class Hang(BaseException):
    """One example ran past its bound."""


def timeboxed(seconds: float = EXAMPLE_SECONDS) -> Callable[[F], F]:
    """Run each call of the decorated function under a ``seconds`` wall-clock bound (SIGALRM; the main thread
    only, where pytest runs tests — elsewhere the call runs unbounded)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return fn(*args, **kwargs)

            def expired(signum: int, frame: Any) -> None:
                raise Hang(f"{fn.__name__}: one example ran past {seconds:g} s (a hang)")

            # an outer bound on the same signal (pytest-timeout's, for the whole test) is put back afterwards,
            # less the time this call took
            previous = signal.signal(signal.SIGALRM, expired)
            outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
            started = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                if outer:
                    signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))

        return bounded  # type: ignore[return-value]

    return wrap
