"""Score caches refresh only the nodes that changed: that is exact only if a plugin scores a few nodes
exactly as it scores them among all, and if the cached sums follow the placements."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.framework.config import default_config, parse_config
from scheduler.framework.scores import Scorer
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from tests.support.builders import node, pod
from tests.support.sessions import open_session

BINPACK_GPU = parse_config("""
actions: "allocate"
tiers:
- plugins:
  - name: nodeorder
    arguments: {mostrequested.weight: 1, leastrequested.weight: 2, balancedresource.weight: 3}
  - name: binpack
    arguments: {binpack.weight: 3, binpack.cpu: 2, binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: 5}
""")


def _cluster(seed: int) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(40):
        extra = {"nvidia.com/gpu": rng.choice((4, 8))} if i % 5 == 0 else None
        docs.append(node(f"n{i}", cpu=rng.choice((2, 4, 16)), memory=rng.choice(("4Gi", "16Gi", "64Gi")), extra=extra))
    for i in range(60):  # running pods, some past what their node offers
        docs.append(pod(f"run-{i}", cpu=rng.choice(("500m", "1", "3")), memory=rng.choice(("1Gi", "6Gi")),
                        nodeName=f"n{rng.randrange(40)}"))
    for i in range(12):
        extra = {"nvidia.com/gpu": 1} if i % 4 == 0 else None
        docs.append(pod(f"new-{i}", cpu=rng.choice(("100m", "1", "2", "20")), memory=rng.choice(("1Gi", "3Gi")),
                        extra=extra))
    return docs


def _pending(ssn: Session) -> list:
    return sorted((t for j in ssn.jobs.values() for t in j.pending_tasks()), key=lambda t: t.pod.name)


@pytest.mark.parametrize("config", [default_config(), BINPACK_GPU], ids=["default", "weighted binpack"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_plugin_scores_a_few_nodes_as_it_scores_them_among_all(config, seed: int) -> None:
    ssn = open_session(_cluster(seed), config)
    rng = random.Random(seed)
    scorers = list(ssn._flat["node_order"])
    assert scorers
    for task in _pending(ssn):
        for plugin in scorers:
            full = plugin.node_order(task, None)
            for size in (1, 2, 7, 40):
                some = np.array(sorted(rng.sample(range(ssn.nodes.count), size)))
                assert np.array_equal(plugin.node_order(task, some), full[some]), (plugin.name, task.pod.name, size)


@pytest.mark.parametrize("config", [default_config(), BINPACK_GPU], ids=["default", "weighted binpack"])
def test_cached_score_sums_follow_placements_and_their_undoing(config) -> None:
    ssn = open_session(_cluster(7), config)
    scorers: list[Scorer] = list(ssn._flat["node_order"])
    tasks = _pending(ssn)

    def fresh_sum(task) -> np.ndarray:
        total = scorers[0].node_order(task, None).copy()
        for plugin in scorers[1:]:
            total = total + plugin.node_order(task, None)
        return total

    stmt = Statement(ssn)
    for i, task in enumerate(tasks):
        for other in tasks:  # every shape's sum, refreshed where the placements so far changed nodes
            assert np.array_equal(ssn.node_scores(other), fresh_sum(other)), (i, other.pod.name)
        mask = ssn.feasible(task, ssn.nodes.free(task))
        if mask.any():
            best = ssn.best_node(task, mask)
            assert mask[best] and ssn.node_scores(task)[best] == fresh_sum(task)[mask].max()
            stmt.allocate(task, best)
    stmt.discard()
    for other in tasks:
        assert np.array_equal(ssn.node_scores(other), fresh_sum(other))
