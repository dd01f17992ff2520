"""The fixtures of the vcctl-against-a-cluster tests: the Volcano Job tests' own (tests/support/kube_jobs.py)."""

from __future__ import annotations

import pytest

from tests.support.kube_jobs import clusters, two_node_api

api = pytest.fixture(two_node_api, name="api")
cluster = pytest.fixture(clusters, name="cluster")
