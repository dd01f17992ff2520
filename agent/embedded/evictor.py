"""The agent's evictions under pressure, carried out by the local runtime (embedded mode's Evictor)."""

from __future__ import annotations

from agent.embedded.runtime import LocalRuntime
from agent.intents import Evict


class LocalEvictor:
    """Evicts through :meth:`LocalRuntime.evict`: SIGTERM, SIGKILL after the grace, then Failed/Evicted.

    Idempotent (a pod already leaving, or gone, counts as evicted).  Under pressure a pod gets its own
    grace period but at most ``max_grace`` seconds: memory does not wait 30 s.
    """

    def __init__(self, runtime: LocalRuntime, *, max_grace: float = 10.0):
        self.runtime = runtime
        self.max_grace = max_grace

    def evict(self, intent: Evict) -> bool:
        return self.runtime.evict(intent.uid, intent.reason, at_most=self.max_grace)
