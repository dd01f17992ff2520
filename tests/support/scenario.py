"""The declarative scenario harness: YAML in, expected binds, phases and evictions out.

A scenario file (``tests/fixtures/scenarios/*.yaml``)::

    name: what it shows
    config: |            # optional scheduler configuration (Volcano format)
      actions: "enqueue, allocate"
      ...
    at: 2026-01-01T12:00:00Z   # optional fixed clock
    cycles: 3                  # optional: exactly N cycles instead of until settled
    objects:                   # full manifests or the compact forms of tests/support/builders.py
    - node: {name: n1, cpu: 4}
    - pods: {prefix: web, count: 2, cpu: 1}
    expect:
      bound: {default/web-0: n1, default/web-1: "*", default/big-0: null, default/x-0: [n1, n2]}
      evicted: [default/low-0]          # exactly these pods are evicted
      phases: {default/job: Running}
      reasons: {default/big-0: "Insufficient cpu"}   # substrings of the pending reason
      queues: {q1: {cpu: 4.0}}          # allocated, for the resources given
      bound_count: {"default/q1-": 3}   # pods bound whose key starts with the prefix
      pending_count: {"default/q1-": 1}
      evicted_count: {"default/low-": 2}
      numa: {default/web-0: [0]}        # the NUMA zones a pod was placed in (null: not pinned)
      devices: {default/train-0: [4, 5, 6, 7]}   # indices of the devices it was given, in any order
      binds: {default/web-0: n1}        # exactly these binds happened in the run, no others (Volcano's
                                        # ExpectBindMap: pods that had no node before and have one after)
      nominated: {default/big-0: n2}    # status.nominatedNodeName (room made for it; null: none)
      filter: {default/p: {n1: null, n2: "didn't match pod anti-affinity"}}   # before any cycle: per node,
                                        # null where the pod passes every filter, else a substring of why not
      scores: {default/p: {n1: 100, n2: 0}}   # before any cycle: the summed node scores of the configured
                                        # plugins for the pod (the nodes named), to the unit
      refused: "metadata.name"          # loading fails: a substring of the one located error (InputError)

Beyond tests/support/builders.py, the compact forms take: ``pod``/``pods``: ``labels``,
``preemptionPolicy``, ``nominatedNodeName``; ``podgroup``: ``minTaskMember`` (role -> count);
``queue``: ``priority``; ``priorityclass``: ``preemptionPolicy``; ``node``: ``hostnameLabel: false``
(no ``kubernetes.io/hostname`` label, as Volcano's test nodes have none).  Each goes where Kubernetes
and Volcano keep it in the manifest.

The harness writes the manifests to a file and runs the real simulator on it,
so every scenario also exercises parsing and loading.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from proto.errors import InputError
from scheduler.api.loader import load_workload
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.framework.config import SchedulerConfig, default_config, parse_config
from scheduler.framework.keeper import take_snapshot
from scheduler.framework.session import Session
from scheduler.modes.simulator.simulation import simulate
from tests.support.builders import expand

DEFAULT_AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def load_scenario(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# compact-form keys this harness adds to tests/support/builders.py, by kind
_EXTRA = {"pod": ("labels", "preemptionPolicy", "nominatedNodeName"),
          "pods": ("labels", "preemptionPolicy", "nominatedNodeName"),
          "podgroup": ("minTaskMember",), "queue": ("priority",), "node": ("hostnameLabel",),
          "priorityclass": ("preemptionPolicy",)}


def _expand(item: dict) -> list[dict]:
    """One scenario entry -> manifests: builders' compact forms plus the keys in ``_EXTRA``."""
    if len(item) != 1 or "apiVersion" in item or "kind" in item:
        return expand(item)
    (kind, args), = item.items()
    if kind not in _EXTRA or not isinstance(args, dict):
        return expand(item)
    extra = {k: args[k] for k in _EXTRA[kind] if k in args}
    docs = expand({kind: {k: v for k, v in args.items() if k not in extra}})
    for doc in docs:
        if "labels" in extra:
            doc["metadata"].setdefault("labels", {}).update(extra["labels"])
        if "preemptionPolicy" in extra:
            doc.get("spec", doc)["preemptionPolicy"] = extra["preemptionPolicy"]  # a PriorityClass has it at the top
        if "nominatedNodeName" in extra:
            doc.setdefault("status", {})["nominatedNodeName"] = extra["nominatedNodeName"]
        if "minTaskMember" in extra:
            doc["spec"]["minTaskMember"] = extra["minTaskMember"]
        if "priority" in extra:
            doc["spec"]["priority"] = extra["priority"]
        if extra.get("hostnameLabel") is False:
            doc["metadata"]["labels"].pop("kubernetes.io/hostname", None)
    return docs


def run_scenario(scenario: dict, tmp: Path) -> dict:
    manifests = [m for item in scenario["objects"] for m in _expand(item)]
    placed_before = {f"{m['metadata'].get('namespace') or 'default'}/{m['metadata']['name']}"
                     for m in manifests if m.get("kind") == "Pod" and (m.get("spec") or {}).get("nodeName")}
    path = tmp / "objects.yaml"
    path.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    config = parse_config(scenario["config"], "scenario config") if scenario.get("config") else None
    at = scenario.get("at") or DEFAULT_AT
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    expect = scenario.get("expect") or {}
    if "refused" in expect:
        try:
            simulate([path], config=config, at=at, cycles=scenario.get("cycles"))
        except InputError as exc:
            return {"refused": str(exc), "pods": [], "podGroups": [], "queues": []}
        return {"refused": None, "pods": [], "podGroups": [], "queues": []}
    probes = _probe(path, config, at, set(expect.get("filter") or {}) | set(expect.get("scores") or {}))
    sim = simulate([path], config=config, at=at, cycles=scenario.get("cycles"))
    result = sim.to_dict()
    nominated = {f"{p.namespace}/{p.name}": p.nominated_node or None for p in sim.cache.pods.values()}
    for pod in result["pods"]:
        key = f"{pod['namespace']}/{pod['name']}"
        pod["nominated"] = nominated.get(key)
        pod["placedBefore"] = key in placed_before
    result.update(probes)
    return result


def _probe(path: Path, config: SchedulerConfig | None, at: datetime, keys: set[str]) -> dict:
    """Per pod in ``keys``, before any cycle: each node's filter verdict (None: it passes) and node score,
    from a session opened on the loaded cluster as a cycle opens one."""
    if not keys:
        return {}
    cache = ClusterCache.from_workload(load_workload([path]))
    ssn = Session(take_snapshot(cache, now=at.timestamp()), config or default_config(), now=at,
                  effects=CacheEffects(cache))
    ssn.open()
    try:
        tasks = {t.pod.key: t for job in ssn.jobs.values() for t in job.tasks.values()}
        names = ssn.nodes.names
        verdicts, scores = {}, {}
        for key in sorted(keys):
            task = tasks[key]
            verdicts[key] = dict(zip(names, ssn.refusals(task, ssn.nodes.free(task)), strict=True))
            total = ssn.node_scores(task)
            scores[key] = {n: (0.0 if total is None else float(total[i])) for i, n in enumerate(names)}
        return {"filter": verdicts, "scores": scores}
    finally:
        ssn.close()


def check(result: dict, expect: dict[str, Any]) -> list[str]:
    """Every way ``result`` differs from ``expect``; empty when it matches."""
    pods = {f"{p['namespace']}/{p['name']}": p for p in result["pods"]}
    groups = {f"{g['namespace']}/{g['name']}": g for g in result["podGroups"]}
    queues = {q["name"]: q["allocated"] for q in result["queues"]}
    problems: list[str] = []
    for key, node in (expect.get("bound") or {}).items():
        got = pods[key]["node"]
        if node == "*":
            if got is None:
                problems.append(f"{key}: expected bound, is pending ({pods[key]['reason']})")
        elif isinstance(node, list):
            if got not in node:
                problems.append(f"{key}: expected one of {node}, got {got} ({pods[key]['reason']})")
        elif got != node:
            problems.append(f"{key}: expected node {node}, got {got} ({pods[key]['reason']})")
    if "evicted" in expect:
        got = sorted(k for k, p in pods.items() if p["evicted"])
        if got != sorted(expect["evicted"]):
            problems.append(f"evicted: expected {sorted(expect['evicted'])}, got {got}")
    for key, phase in (expect.get("phases") or {}).items():
        if groups[key]["phase"] != phase:
            problems.append(f"{key}: expected phase {phase}, got {groups[key]['phase']}")
    for key, text in (expect.get("reasons") or {}).items():
        reason = pods[key]["reason"] or ""
        if text not in reason:
            problems.append(f"{key}: reason {reason!r} does not contain {text!r}")
    for name, amounts in (expect.get("queues") or {}).items():
        for res, amount in amounts.items():
            got = queues[name].get(res, 0)
            if abs(got - amount) > 1e-6:
                problems.append(f"queue {name}: expected {res} {amount}, got {got}")
    for prefix, n in (expect.get("bound_count") or {}).items():
        got = sum(1 for k, p in pods.items() if k.startswith(prefix) and p["node"])
        if got != n:
            problems.append(f"bound pods {prefix}*: expected {n}, got {got}")
    for prefix, n in (expect.get("evicted_count") or {}).items():
        got = sum(1 for k, p in pods.items() if k.startswith(prefix) and p["evicted"])
        if got != n:
            problems.append(f"evicted pods {prefix}*: expected {n}, got {got}")
    for prefix, n in (expect.get("pending_count") or {}).items():
        got = sum(1 for k, p in pods.items() if k.startswith(prefix) and not p["node"] and not p["evicted"])
        if got != n:
            problems.append(f"pending pods {prefix}*: expected {n}, got {got}")
    for key, zones in (expect.get("numa") or {}).items():
        if pods[key]["numaNodes"] != zones:
            problems.append(f"{key}: expected NUMA zones {zones}, got {pods[key]['numaNodes']} ({pods[key]['reason']})")
    if "binds" in expect:
        got = {k: p["node"] for k, p in pods.items() if p["node"] and not p["placedBefore"]}
        want = expect["binds"] or {}
        if got != want:
            problems.append(f"binds: expected {dict(sorted(want.items()))}, got {dict(sorted(got.items()))}"
                            + "".join(f"\n    {k} pending: {pods[k]['reason']}" for k in sorted(set(want) - set(got))
                                      if k in pods))
    for key, node in (expect.get("nominated") or {}).items():
        if pods[key]["nominated"] != node:
            problems.append(f"{key}: expected nominated node {node}, got {pods[key]['nominated']}")
    for key, want_nodes in (expect.get("filter") or {}).items():
        got_nodes = result["filter"][key]
        for node, want in want_nodes.items():
            got = got_nodes[node]
            if (want is None) != (got is None) or (want is not None and want not in got):
                problems.append(f"{key} on {node}: expected {'to pass' if want is None else repr(want)}, "
                                f"got {'a pass' if got is None else repr(got)}")
        if set(want_nodes) != set(got_nodes):
            problems.append(f"{key}: filter expectations name {sorted(want_nodes)}, the cluster has {sorted(got_nodes)}")
    for key, want_scores in (expect.get("scores") or {}).items():
        got_scores = result["scores"][key]
        for node, want in want_scores.items():
            if abs(got_scores[node] - want) > 1e-6:
                problems.append(f"{key} on {node}: expected score {want}, got {got_scores[node]:g}")
    if "refused" in expect:
        got = result.get("refused")
        if got is None or expect["refused"] not in got:
            problems.append(f"expected loading to be refused with {expect['refused']!r}, got {got!r}")
    for key, indices in (expect.get("devices") or {}).items():
        got = sorted(d["index"] for d in pods[key]["devices"])
        if got != sorted(indices):
            problems.append(f"{key}: expected devices {sorted(indices)}, got {got} ({pods[key]['reason']})")
    return problems
