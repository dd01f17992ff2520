"""Kubernetes mode by hand, for tests/scheduler/modes/test_kubernetes*.py (their ``api`` and ``harness``
fixtures are in tests/scheduler/modes/conftest.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from hack.lib.fake_apiserver import FakeApiServer
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import parse_config
from scheduler.modes.kubernetes import mode


class Harness:
    """A fake API server, the informers and effects of Kubernetes mode, and a scheduler to cycle by hand."""

    def __init__(self, api: FakeApiServer, config: str | None = None, **kwargs):
        self.api = api
        self.cache = ClusterCache()
        self.stop = threading.Event()
        self.kube = mode.start(self.cache, api.client(), self.stop, resync=3600, **kwargs)
        self.scheduler = Scheduler(self.cache, effects=self.kube.effects,
                                   config=parse_config(config, "test") if config else None,
                                   clock=lambda: datetime.now(UTC))

    def cycle(self):
        result = self.scheduler.run_once()
        assert self.kube.effects.drain(10)
        return result

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        obj = self.api.get("pods", name, namespace)
        return obj["spec"].get("nodeName") if obj else None

    def close(self) -> None:
        self.stop.set()
        self.kube.close()
