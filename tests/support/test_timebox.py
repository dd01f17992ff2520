"""The fuzz tests' bound on one example: a hang fails the test, and a normal example is untouched."""

from __future__ import annotations

import signal
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.timebox import Hang, timeboxed


def test_a_hanging_example_fails_instead_of_hanging() -> None:
    @settings(max_examples=3, deadline=None, database=None)
    @given(st.integers())
    @timeboxed(0.2)
    def hangs(n: int) -> None:
        while True:
            try:
                time.sleep(10)
            except Exception:  # noqa: BLE001, S112 - code under test that swallows errors does not swallow Hang
                continue

    start = time.monotonic()
    with pytest.raises(Hang, match="ran past 0.2 s"):
        hangs()
    assert time.monotonic() - start < 5
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.default_int_handler, None)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_an_example_within_the_bound_runs_as_it_is() -> None:
    seen = []

    @settings(max_examples=5, deadline=None, database=None)
    @given(st.integers(0, 9))
    @timeboxed(5)
    def quick(n: int) -> None:
        seen.append(n)

    quick()
    assert len(seen) == 5 and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
