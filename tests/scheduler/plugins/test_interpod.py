"""Inter-pod affinity and anti-affinity (kube-scheduler's InterPodAffinity): parsing, the filter in both
directions, the score, gangs placed in one statement, and a property: no bind ever breaks a required term."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.manifests import ManifestError, parse_object
from scheduler.api.objects import Requirement
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import parse_config
from scheduler.plugins.shared.podaffinity import NAMESPACES_REASON
from tests.support import builders
from tests.support.scenario import check, run_scenario

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
DEFAULT = '''actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
'''
BINPACK = '''actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: binpack
    arguments: {binpack.weight: 10}
'''


def _manifest(spec_affinity: dict, labels: dict | None = None, namespace: str = "ns1") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": namespace, "labels": labels or {}},
            "spec": {"affinity": spec_affinity, "containers": [{"name": "c"}]}}


def _term(selector: Any = None, key: str = ZONE, **extra: Any) -> dict:
    term = {"topologyKey": key, **extra}
    if selector is not None:
        term["labelSelector"] = selector
    return term


def _run(objects: list, tmp: Path, config: str = DEFAULT) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    return run_scenario({"config": config, "objects": objects}, tmp)


def _bound(result: dict) -> dict[str, str | None]:
    return {f"{p['namespace']}/{p['name']}": p["node"] for p in result["pods"]}


# -- parsing -------------------------------------------------------------------------------
def test_terms_resolve_namespaces_and_merge_match_label_keys() -> None:
    raw = _manifest({
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"matchLabels": {"app": "db"}}, matchLabelKeys=["version", "absent"], mismatchLabelKeys=["team"]),
            _term({"matchLabels": {"app": "db"}}, namespaceSelector={}),
            _term({}, namespaces=["b", "a"], namespaceSelector={"matchLabels": {"env": "x"}}),
        ]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 7, "podAffinityTerm": _term(None, HOST)}]},
    }, labels={"version": "v2", "team": "red"})
    pod = parse_object(raw, "test")
    aff = pod.pod_affinity
    assert aff is not None and not aff.preferred and not aff.anti_required
    first, every, listed = aff.required
    assert first.selector == (Requirement("app", "In", ("db",)), Requirement("version", "In", ("v2",)),
                              Requirement("team", "NotIn", ("red",)))
    assert first.namespaces == ("ns1",) and first.topology_key == ZONE
    assert every.namespaces is None and every.namespace_selector is None  # namespaceSelector {}: every namespace
    # another selector: the namespaces listed, and those whose Namespace's labels match
    assert listed.namespaces == ("a", "b") and listed.selector == ()
    assert listed.namespace_selector == (Requirement("env", "In", ("x",)),)
    assert first.namespace_selector is None
    (anti,) = aff.anti_preferred
    assert anti.weight == 7 and anti.selector is None  # no labelSelector: matches no pod


def test_a_pod_without_terms_has_none() -> None:
    assert parse_object(_manifest({}), "test").pod_affinity is None


@pytest.mark.parametrize(("affinity", "message"), [
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}},
     r"requiredDuringSchedulingIgnoredDuringExecution\[0\]\.topologyKey: required"),
    ({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "podAffinityTerm": _term({})}]}}, r"\[0\]\.weight: must be 1-100"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        _term({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})]}}, r"operator: must be one of"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(None, matchLabelKeys=["a"])]}},
     r"matchLabelKeys: needs a labelSelector"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}}, r"expected a list"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        _term({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "{{.bad}}"]}]})]}},
     r"labelSelector\.matchExpressions\[0\]\.values\[1\]: '\{\{\.bad\}\}'"),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        _term({}, namespaceSelector={"matchExpressions": [{"key": "bad key", "operator": "Exists"}]})]}},
     r"namespaceSelector\.matchExpressions\[0\]\.key"),
])
def test_bad_terms_are_refused_with_their_path(affinity: dict, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_object(_manifest(affinity), "test")


# -- the filter ------------------------------------------------------------------------------
def _zones(n: int = 2, **extra: Any) -> list:
    return [{"node": {"name": f"n{i}", "cpu": 8, "memory": "8Gi", "labels": {ZONE: f"z{i}"}, **extra}}
            for i in range(n)]


def test_required_affinity_follows_the_database_zone(tmp_path: Path) -> None:
    db = {"pod": {"name": "db", "cpu": 1, "nodeName": "n1", "phase": "Running", "labels": {"app": "db"}}}
    web = {"pod": {"name": "web", "cpu": 1, "affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term({"matchLabels": {"app": "db"}})]}}}}
    # least requested alone would pick n0 (empty)
    assert _bound(_run([*_zones(), db, web], tmp_path))["default/web"] == "n1"


def test_existing_anti_affinity_keeps_new_pods_away_and_says_so(tmp_path: Path) -> None:
    guard = {"pod": {"name": "guard", "cpu": 1, "nodeName": "n0", "phase": "Running", "affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"matchLabels": {"app": "web"}})]}}}}
    web = {"pod": {"name": "web", "cpu": 1, "labels": {"app": "web"}, "nodeSelector": {ZONE: "z0"}}}
    result = _run([*_zones(), guard, web], tmp_path)
    assert not check(result, {"bound": {"default/web": None}, "reasons": {"default/web": (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules")}})


def test_namespaces_scope_a_term(tmp_path: Path) -> None:
    other = {"pod": {"name": "db", "namespace": "other", "cpu": 1, "nodeName": "n1", "phase": "Running",
                     "labels": {"app": "db"}}}

    def web(name: str, **term: Any) -> dict:
        return {"pod": {"name": name, "cpu": 1, "affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term({"matchLabels": {"app": "db"}}, **term)]}}}}

    bound = _bound(_run([*_zones(), other, web("own"), web("all", namespaceSelector={}),
                         web("named", namespaces=["other"])], tmp_path))
    assert bound["default/own"] is None  # its own namespace holds no db
    assert bound["default/all"] == bound["default/named"] == "n1"


def test_a_namespace_selector_matches_namespace_labels(tmp_path: Path) -> None:
    """A namespaceSelector other than {} selects the namespaces whose Namespace objects carry matching labels;
    every namespace has kubernetes.io/metadata.name, declared or not."""
    dbs = [{"pod": {"name": "db", "namespace": ns, "cpu": 1, "nodeName": node, "phase": "Running",
                    "labels": {"app": "db"}}} for ns, node in (("blue-team", "n0"), ("red-team", "n1"))]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "blue-team", "labels": {"team": "blue"}}}]

    def web(name: str, selector: dict) -> dict:
        return {"pod": {"name": name, "cpu": 1, "affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                _term({"matchLabels": {"app": "db"}}, namespaceSelector=selector)]}}}}

    bound = _bound(_run([*_zones(), *namespaces, *dbs,
                         web("blue", {"matchLabels": {"team": "blue"}}),
                         web("by-name", {"matchLabels": {"kubernetes.io/metadata.name": "red-team"}}),
                         web("none", {"matchLabels": {"team": "green"}})], tmp_path))
    assert bound["default/blue"] == "n0"
    assert bound["default/by-name"] == "n1"  # red-team has no Namespace object, but has its name label
    assert bound["default/none"] is None


def test_namespaces_are_read_and_checked() -> None:
    ns = parse_object({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "team-a", "labels": {"team": "a"}}}, "test")
    assert ns.labels == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    with pytest.raises(ManifestError, match=r"Namespace team\.a: metadata\.name"):
        parse_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}}, "test")


# -- namespaces not listed yet (Kubernetes mode before its Namespace informer's first list) ----------
PREEMPT = '''actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
'''


def _unlisted(*docs: dict, config: str = DEFAULT) -> tuple[ClusterCache, Scheduler]:
    """A cache that has not heard of its namespaces yet, holding two zones and ``docs``, and its scheduler."""
    cache = ClusterCache()
    cache.set_namespaces_known(False)
    for i in range(2):
        cache.upsert(parse_object(builders.node(f"n{i}", labels={ZONE: f"z{i}"}), "test"))
    for doc in docs:
        cache.upsert(parse_object(doc, "test"))
    return cache, Scheduler(cache, config=parse_config(config, "test"))


def _labelled(doc: dict, **labels: str) -> dict:
    doc["metadata"]["labels"] = labels
    return doc


def _selecting(name: str, kind: str, selector: dict | None = None, **extra: Any) -> dict:
    """A pod with one ``kind`` term (podAffinity/podAntiAffinity, required or preferred) on app=db pods."""
    term = _term({"matchLabels": {"app": "db"}}, **extra)
    aff, _, how = kind.partition(".")
    terms = [term] if how == "required" else [{"weight": 50, "podAffinityTerm": term}]
    field = f"{how}DuringSchedulingIgnoredDuringExecution"
    return builders.pod(name, cpu=1, affinity={aff: {field: terms}}, **(selector or {}))


def test_a_pod_selecting_namespaces_by_label_waits_until_they_are_listed() -> None:
    """Its terms cannot be matched yet, required or preferred: no node, with the reason; pods whose terms name
    their namespaces (or have none) schedule meanwhile; once the namespaces are listed it is placed."""
    db = _labelled(builders.pod("db", namespace="team-b", nodeName="n1", phase="Running"), app="db")
    blue = {"matchLabels": {"team": "blue"}}
    cache, sched = _unlisted(
        db, builders.pod("plain"),
        _selecting("by-label", "podAffinity.required", namespaceSelector=blue),
        _selecting("shy", "podAntiAffinity.preferred", namespaceSelector=blue),
        _selecting("by-name", "podAffinity.required", namespaces=["team-b"]),
        _selecting("anywhere", "podAffinity.required", namespaceSelector={}))
    sched.run_once()
    pods = cache.pods
    assert pods["default/plain"].node_name and pods["default/by-name"].node_name == "n1"
    assert pods["default/anywhere"].node_name == "n1"  # {} selects every namespace: nothing to list
    for name in ("by-label", "shy"):
        assert not pods[f"default/{name}"].node_name
        assert pods[f"default/{name}"].reason == f"0/2 nodes are available: 2 {NAMESPACES_REASON}"
    assert "namespaces are not listed yet" in NAMESPACES_REASON
    sched.run_once()
    assert not pods["default/by-label"].node_name  # still waiting: nothing changed
    cache.upsert(parse_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "team-b", "labels": {"team": "blue"}}}, "test"))
    cache.set_namespaces_known(True)
    sched.run_once()
    assert pods["default/by-label"].node_name == "n1" and pods["default/shy"].node_name == "n0"


def test_a_waiting_pod_does_not_preempt() -> None:
    """Preemption cannot make room for a pod whose terms cannot be matched yet: it evicts nothing."""
    low = [builders.pod(f"low-{i}", cpu=8, memory="1Gi", nodeName=f"n{i}", phase="Running", priority=1)
           for i in range(2)]
    high = _selecting("high", "podAntiAffinity.required", namespaceSelector={"matchLabels": {"team": "x"}})
    high["spec"]["priority"] = 1000
    cache, sched = _unlisted(*low, high, config=PREEMPT)
    assert sched.run_once().evictions == 0 and not cache.pods["default/high"].node_name
    assert NAMESPACES_REASON in (cache.pods["default/high"].reason or "")
    cache.set_namespaces_known(True)
    assert sched.run_once().evictions == 1  # listed: its term matches nothing, and it preempts as any pod


def test_existing_required_anti_affinity_selecting_namespaces_blocks_until_they_are_listed() -> None:
    """A placed pod's required anti-affinity term with a namespaceSelector is taken to select every namespace
    while namespaces are not listed: pods it might repel stay out of its domain; others are not held back."""
    guard = builders.pod("guard", nodeName="n0", phase="Running", affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"matchLabels": {"app": "web"}}, namespaceSelector={"matchLabels": {"team": "red"}})]}})
    web = _labelled(builders.pod("web", nodeSelector={ZONE: "z0"}), app="web")
    other = _labelled(builders.pod("other", nodeSelector={ZONE: "z0"}), app="other")
    cache, sched = _unlisted(guard, web, other)
    sched.run_once()
    assert cache.pods["default/other"].node_name == "n0"  # its labels are not selected, whatever the namespaces
    assert not cache.pods["default/web"].node_name
    assert cache.pods["default/web"].reason == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules")
    cache.set_namespaces_known(True)  # listed: default is not team=red
    sched.run_once()
    assert cache.pods["default/web"].node_name == "n0"


def test_existing_preferred_terms_selecting_namespaces_count_only_once_listed() -> None:
    """A placed pod's preferred term with a namespaceSelector scores nothing by its selector until the
    namespaces are listed (it neither refuses nor allows a node)."""
    def cycle(known: bool) -> str:
        host = builders.pod("host", cpu=4, nodeName="n1", phase="Running", affinity={"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": _term(
                {"matchLabels": {"app": "web"}},
                namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "default"}})}]}})
        cache, sched = _unlisted(host, _labelled(builders.pod("web"), app="web"))
        cache.set_namespaces_known(known)
        sched.run_once()
        return cache.pods["default/web"].node_name

    assert cycle(True) == "n1"  # pulled to the host's zone
    assert cycle(False) == "n0"  # the emptier node, as without the term


# -- gangs: members constrain each other within one statement -------------------------------
def _gang(n_nodes: int, tmp: Path, config: str) -> dict[str, str | None]:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        _term({"matchLabels": {"app": "ring"}}, HOST)]}}
    objects: list = [{"node": {"name": f"n{i}", "cpu": 8, "memory": "8Gi"}} for i in range(n_nodes)]
    objects.append({"podgroup": {"name": "ring", "minMember": 3}})
    objects += [{"pod": {"name": f"ring-{i}", "group": "ring", "cpu": 1, "labels": {"app": "ring"},
                         "affinity": anti}} for i in range(3)]
    return _bound(_run(objects, tmp, config))


@pytest.mark.parametrize("config", [DEFAULT, BINPACK], ids=["default", "binpack"])
def test_a_gang_that_must_not_share_a_node_is_spread_or_not_placed(tmp_path: Path, config: str) -> None:
    spread = _gang(3, tmp_path / "three", config)
    assert sorted(v for v in spread.values() if v) == ["n0", "n1", "n2"]
    assert set(_gang(2, tmp_path / "two", config).values()) == {None}  # all or nothing


# -- the score -------------------------------------------------------------------------------
def test_preferred_terms_outweigh_free_room(tmp_path: Path) -> None:
    cache = {"pod": {"name": "cache", "cpu": 4, "nodeName": "n1", "phase": "Running", "labels": {"app": "cache"}}}
    near = {"pod": {"name": "near", "cpu": 1, "affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": _term({"matchLabels": {"app": "cache"}})}]}}}}
    far = {"pod": {"name": "far", "cpu": 1, "affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": _term({"matchLabels": {"app": "cache"}})}]}}}}
    bound = _bound(_run([*_zones(), cache, near, far], tmp_path))
    assert bound["default/near"] == "n1" and bound["default/far"] == "n0"


def test_placed_pods_preferred_terms_count_too(tmp_path: Path) -> None:
    """Symmetry: a placed pod's preferred affinity to web pulls web to its zone."""
    host = {"pod": {"name": "host", "cpu": 4, "nodeName": "n1", "phase": "Running", "affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": _term({"matchLabels": {"app": "web"}})}]}}}}
    web = {"pod": {"name": "web", "cpu": 1, "labels": {"app": "web"}}}
    assert _bound(_run([*_zones(), host, web], tmp_path))["default/web"] == "n1"
    off = DEFAULT.replace("  - name: nodeorder\n", "  - name: nodeorder\n    arguments: {podaffinity.weight: 0}\n")
    assert _bound(_run([*_zones(), host, web], tmp_path / "off", off))["default/web"] == "n0"


# -- the property: no bind breaks a required term, whatever the scoring --------------------
LABELS = ("a", "b")
term_st = st.builds(lambda app, key: (app, key), st.sampled_from(LABELS), st.sampled_from((HOST, ZONE)))
pod_st = st.fixed_dictionaries({
    "app": st.sampled_from(LABELS),
    "affinity": st.lists(term_st, max_size=1),
    "anti": st.lists(term_st, max_size=2),
    "gang": st.booleans(),
})


def _affinity(pod: dict) -> dict:
    out: dict = {}
    if pod["affinity"]:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"matchLabels": {"app": a}}, k) for a, k in pod["affinity"]]}
    if pod["anti"]:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term({"matchLabels": {"app": a}}, k) for a, k in pod["anti"]]}
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_nodes=st.integers(1, 4), existing=st.lists(pod_st, max_size=3), pending=st.lists(pod_st, min_size=1,
       max_size=6), binpack=st.booleans())
def test_no_bind_breaks_a_required_term(tmp_path_factory: pytest.TempPathFactory, n_nodes: int, existing: list,
                                        pending: list, binpack: bool) -> None:
    nodes = [{"node": {"name": f"n{i}", "cpu": 8, "memory": "8Gi", "labels": {ZONE: f"z{i // 2}"}}}
             for i in range(n_nodes)]
    zone = {f"n{i}": f"z{i // 2}" for i in range(n_nodes)}
    objects: list = [*nodes, {"podgroup": {"name": "g", "minMember": max(1, sum(p["gang"] for p in pending))}}]
    pods: dict[str, dict] = {}
    for i, pod in enumerate(existing):
        name = f"e{i}"
        pods[f"default/{name}"] = pod
        objects.append({"pod": {"name": name, "cpu": 1, "nodeName": f"n{i % n_nodes}", "phase": "Running",
                                "labels": {"app": pod["app"]}, "affinity": _affinity(pod)}})
    for i, pod in enumerate(pending):
        name = f"p{i}"
        pods[f"default/{name}"] = pod
        extra = {"group": "g"} if pod["gang"] else {}
        objects.append({"pod": {"name": name, "cpu": 1, "labels": {"app": pod["app"]}, "affinity": _affinity(pod),
                                **extra}})
    bound = _bound(_run(objects, tmp_path_factory.mktemp("prop"), BINPACK if binpack else DEFAULT))

    def domain(node: str, key: str) -> str:
        return node if key == HOST else zone[node]

    placed = {k: v for k, v in bound.items() if v}
    for key, node in placed.items():
        if key.startswith("default/e"):
            continue
        pod = pods[key]
        others = [(o, n) for o, n in placed.items() if o != key]
        for app, tkey in pod["anti"]:  # its own anti-affinity
            assert not [o for o, n in others if pods[o]["app"] == app and domain(n, tkey) == domain(node, tkey)], key
        for o, n in others:  # others' anti-affinity (symmetric)
            for app, tkey in pods[o]["anti"]:
                assert not (pod["app"] == app and domain(n, tkey) == domain(node, tkey)), (key, o)
        for app, tkey in pod["affinity"]:  # affinity: a match in its domain, or the first of its kind
            assert pod["app"] == app or [o for o, n in others
                                         if pods[o]["app"] == app and domain(n, tkey) == domain(node, tkey)], key
