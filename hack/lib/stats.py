"""Figures over measurements: latency percentiles and the like.

* :func:`latency_summary`: the load generator's latencies (seconds; ``ERR`` and ``PENDING`` slots count as
  slower than any answer) as counts, p50/p90/p99 (numpy's ``higher`` method), mean and max in ms;
* :func:`nearest_rank`: one percentile of values already sorted, as the demo's probe reports them;
* :func:`step_summary`: a value sampled now and then (a step function), time-weighted over a window;
* :func:`ratio`: x / y rounded, None when either is missing.

numpy is imported where it is used: the benchmark's child processes import this module's siblings and
should start without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from hack.lib.loadgen import ERR, PENDING


def latency_summary(lat, mask) -> dict:
    """Requests ``lat[mask]`` (a numpy array of seconds, ERR or PENDING): how many were sent, answered,
    failed, unanswered, and p50, p90, p99, mean, max in ms (None where there is no figure)."""
    import numpy as np
    sel = lat[mask]
    answered = sel[sel >= 0]
    failed = int((sel == ERR).sum())
    unanswered = int((sel == PENDING).sum())
    # a request that failed or got no answer counts as slower than any answer
    ms = np.concatenate([answered, np.full(failed + unanswered, np.inf)]) * 1000
    out = {"sent": int(mask.sum()), "answered": int(answered.size), "errors": failed, "unanswered": unanswered}
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        v = float(np.percentile(ms, q, method="higher")) if ms.size else None
        out[key] = round(v, 3) if v is not None and np.isfinite(v) else None
    out["mean"] = round(float(answered.mean() * 1000), 3) if answered.size else None
    out["max"] = round(float(answered.max() * 1000), 3) if answered.size else None
    return out


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The value at rank ⌊n·q⌋ (0-based, the last at most) of ``ordered`` (sorted, not empty); ``q`` a
    fraction: 0.5 is the median (the upper one of an even count), 0.99 the p99."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def step_summary(samples: list[tuple[float, float | None]], start: float, end: float) -> dict | None:
    """``samples`` ((time, value), in time order; each value holds until the next sample, the last until
    ``end``; None: no value) over [start, end): {"weighted": ∫value dt, "seconds": time with a value,
    "min", "max"}; None when there was no value in the window."""
    total = weighted = 0.0
    low = high = None
    for (t, q), (t_next, _) in zip(samples, samples[1:] + [(end, None)], strict=True):
        if q is None:
            continue
        span = max(0.0, min(t_next, end) - max(t, start))
        total += span
        weighted += q * span
        low, high = min(q, low if low is not None else q), max(q, high if high is not None else q)
    return {"weighted": weighted, "seconds": total, "min": low, "max": high} if total else None


def ratio(x: float | None, y: float | None, digits: int = 3) -> float | None:
    """``x / y`` rounded to ``digits``; None when x is None or y is None or 0."""
    return round(x / y, digits) if x is not None and y else None
