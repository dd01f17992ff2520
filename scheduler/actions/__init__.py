"""Built-in actions; importing this package registers them."""

from scheduler.actions import allocate, backfill, enqueue, preempt, reclaim, shuffle  # noqa: F401
