"""The one place pods are evicted: the :class:`Evictor` interface, and the dry run's.

Idempotent: a pod asked to leave is not asked again while it is still
leaving.  The evictors that act: :class:`agent.kubernetes.evictor.KubernetesEvictor`
(the Eviction API) and :class:`agent.embedded.LocalEvictor` (the local runtime).
"""

from __future__ import annotations

import logging
from typing import Protocol

from agent.intents import Evict

log = logging.getLogger(__name__)


class Evictor(Protocol):
    def evict(self, intent: Evict) -> bool: ...


class RecordingEvictor:
    """Dry run: remembers what it would have evicted."""

    def __init__(self) -> None:
        self.evicted: list[Evict] = []

    def evict(self, intent: Evict) -> bool:
        log.warning("dry run: would evict %s/%s: %s", intent.namespace, intent.name, intent.reason)
        self.evicted.append(intent)
        return True
