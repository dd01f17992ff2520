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

    before = signal.getsignal(signal.SIGALRM)  # pytest-timeout's, or the default
    start = time.monotonic()
    with pytest.raises(Hang, match="ran past 0.2 s"):
        hangs()
    assert time.monotonic() - start < 5
    assert signal.getsignal(signal.SIGALRM) is before


def test_an_outer_bound_on_the_same_signal_is_put_back_less_the_time_taken() -> None:
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)

        @timeboxed(5)
        def short() -> None:
            time.sleep(0.2)

        short()
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 29 < left < 29.9 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_example_within_the_bound_runs_as_it_is() -> None:
    seen = []

    @settings(max_examples=5, deadline=None, database=None)
    @given(st.integers(0, 9))
    @timeboxed(5)
    def quick(n: int) -> None:
        seen.append(n)

    outer = signal.getitimer(signal.ITIMER_REAL)[0]  # pytest-timeout's bound on this test, if it set one
    quick()
    assert len(seen) == 5 and signal.getitimer(signal.ITIMER_REAL)[0] <= (outer or 0.0)
