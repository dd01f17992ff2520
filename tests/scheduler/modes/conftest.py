"""The fixtures of the Kubernetes-mode tests (test_kubernetes.py, test_kubernetes_faults.py)."""

from __future__ import annotations

import pytest

from hack.lib.fake_apiserver import FakeApiServer
from tests.support.kube_harness import Harness


@pytest.fixture
def api():
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def harness(api):
    """``harness(config=None, **mode_options)``: a :class:`Harness` on ``api``, closed at the end."""
    made = []

    def make(config: str | None = None, **kwargs) -> Harness:
        h = Harness(api, config, **kwargs)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
