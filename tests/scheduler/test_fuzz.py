"""Property-based fuzzing of the scheduler's inputs (issue 13): manifests through the simulator and through the
embedded apply path, and scheduler configurations.  No input yields anything but a result or one
``InputError``: no other exception (a traceback), no hang, and a refused apply stores nothing.

Inputs are valid documents with values swapped at random paths for random JSON values, and the YAML text with
random tokens (anchors, aliases, tags, brackets, control characters) inserted.  Each property is bounded in
examples and needs no deadline, so the suite stays fast and steady on a busy machine.
"""

from __future__ import annotations

import copy
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.errors import InputError
from scheduler.api.loader import iter_text, node_report_from_doc
from scheduler.builtins import register_builtins
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import parse_config
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Store
from scheduler.modes.simulator.simulation import simulate
from tests.support.builders import node, pod, podgroup, priority_class, queue, report
from tests.support.timebox import timeboxed

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 1, 1, 12, tzinfo=UTC)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _objects() -> list[dict]:
    gang = pod("g-0", group="g", cpu="1", annotations={"volcano.sh/numa-topology-policy": "best-effort"})
    gang["spec"].update(terminationGracePeriodSeconds=5, restartPolicy="Never",
                        tolerations=[{"key": "k", "operator": "Exists"}],
                        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}})
    gang["spec"]["containers"][0].update(command=["sleep", "1"], env=[{"name": "A", "value": "b"}])
    return [queue("q", capability={"cpu": "8"}), priority_class("high", 1000),
            podgroup("g", minMember=2, queue="q", minResources={"cpu": "2"}), gang,
            pod("g-1", group="g", cpu="1", priorityClassName="high"),
            pod("offline", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 1000}),
            pod("shared-gpu", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 1000})]


OBJECTS = _objects()
CLUSTER = [node("n1", cpu=8, taints=["k=v:NoSchedule"]),
           report("n1", zones=[4, 4], batchCpu=4000, batchMemory="4Gi", gpus=[{"memory": "16Gi", "zone": 0}])]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        out += [p for k, v in value.items() for p in _paths(v, (*path, k))]
    elif isinstance(value, list):
        out += [p for i, v in enumerate(value) for p in _paths(v, (*path, i))]
    return out


_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "1", "-1", "1e400", "500m", "1Gi", "a/b", "Pod", "v1", "q", "g", "n1", "default", "In",
                     "Exists", "NoSchedule", "single-numa-node", "BE", "2h", "A=B", "ünï", "x" * 300]))
_json = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                     max_leaves=6)
_TOKENS = ["\n", " ", ": ", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "!!int ", "!!binary ", "!!set ", "<<: ",
           "'", '"', "#", "\t", "?", "~", "\x00", "\x07", "é", "!t ", "2024-01-01"]


def _mutated(base: list[dict]) -> st.SearchStrategy[str]:
    """YAML text of ``base`` with up to three values replaced and up to three tokens inserted."""
    paths = [p for p in _paths(base) if p]
    swaps = st.lists(st.tuples(st.sampled_from(paths), _json), max_size=3)
    inserts = st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(_TOKENS)), max_size=3)
    return st.tuples(swaps, inserts).map(lambda m: _apply_mutations(base, *m))


def _apply_mutations(base: list[dict], swaps: list, inserts: list) -> str:
    docs = copy.deepcopy(base)
    for path, value in swaps:
        target: Any = docs
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):  # an earlier swap changed the shape above this path
            pass
    text = yaml.safe_dump_all(docs, sort_keys=False)
    for pos, token in inserts:
        pos %= len(text) + 1
        text = text[:pos] + token + text[pos:]
    return text


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    register_builtins()


@FUZZ
@given(_mutated(OBJECTS + CLUSTER))
@timeboxed()
def test_simulator_takes_any_manifest_or_refuses_it(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("sim") / "x.yaml"
    path.write_text(text)
    try:
        result = simulate([path], at=AT, cycles=2).to_dict()
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(result, allow_nan=False)


_stores = itertools.count()


@FUZZ
@given(_mutated(OBJECTS))
@timeboxed()
def test_apply_takes_any_manifest_whole_or_stores_nothing(tmp_path_factory, text: str) -> None:
    folder = tmp_path_factory.mktemp(f"apply{next(_stores)}")
    cache = ClusterCache()
    embedded = Embedded(cache, Store(folder / "store.sqlite"), clock=lambda: AT.timestamp())
    try:
        _, r = node_report_from_doc(report("n1", zones=[4, 4], batchCpu=4000, batchMemory="4Gi"), "test")
        r.identity.sample_time_ns = int(AT.timestamp() * 1e9)
        cache.accept_report(r, AT.timestamp(), register=True, capacity_key="n1")
        try:
            applied = embedded.apply(list(iter_text(text, "x.yaml")))
        except InputError as exc:
            assert "\n" not in str(exc)
            assert embedded.store.load() == [] and not cache.pods and set(cache.queues) <= {"default"}
            return
        assert len(embedded.store.load()) == len(applied)
        # what was accepted schedules, starts and loads again after a restart
        Scheduler(cache, effects=embedded.effects, clock=lambda: AT).run_once()
        for action in embedded.pod_actions("n1", type("View", (), {"runtime": []})()):
            json.loads(action.pod_json)
        assert Embedded(ClusterCache(), embedded.store).load() == len(applied)
    finally:
        embedded.store.close()


CONFIG = yaml.safe_load((ROOT / "daemonset" / "config" / "scheduler-colocation.conf").read_text())


@FUZZ
@given(_mutated([CONFIG]))
@timeboxed()
def test_any_scheduler_config_is_refused_or_schedules(tmp_path_factory, text: str) -> None:
    try:
        config = parse_config(text, "scheduler.conf")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    path = tmp_path_factory.mktemp("conf") / "x.yaml"
    path.write_text(yaml.safe_dump_all(OBJECTS + CLUSTER))
    try:
        simulate([path], config=config, at=AT, cycles=2)
    except InputError as exc:  # e.g. a plugin's argument only the workload shows wrong
        assert "\n" not in str(exc)
