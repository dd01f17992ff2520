"""A token bucket for the scheduler's requests to the API server (``--kube-qps``, ``--kube-burst``).

Like client-go's limiter: ``burst`` requests may go at once, then ``qps`` a
second on average; a caller that finds the bucket empty waits for its token.
Long-running watches are not counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from proto.errors import InputError


class RateLimiter:
    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if qps <= 0 or burst < 1:
            raise InputError(f"rate limit: qps must be > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps, self.burst = float(qps), int(burst)
        self.clock, self.sleep = clock, sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds callers spent waiting: a sign the limit is too low

    def acquire(self) -> None:
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
            self.waited += wait
        if wait > 0:
            self.sleep(wait)
