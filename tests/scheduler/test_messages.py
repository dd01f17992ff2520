"""Reasons that name the real cause (issue 19 item 7): a pod no node could ever hold is a node shortage, not a
queue's share; a gang that asks only for batch resources is never told about a deserved share of CPU; the
server hands out whole reasons (the table's width is the client's business)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

from scheduler.framework.config import default_config, load_config
from scheduler.modes.simulator.simulation import simulate
from tests.support.builders import node, pod, podgroup, queue

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
COLOCATION = Path(__file__).resolve().parents[2] / "daemonset" / "config" / "scheduler-colocation.conf"
BATCH = {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"}


def reasons(tmp_path: Path, *objects: dict, config=None) -> dict[str, str]:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    sim = simulate([path], config=config or default_config(), at=AT, cycles=3)
    return {p["name"]: p["reason"] for p in sim.to_dict()["pods"]}


def batch_pod(name: str, group: str, queue_name: str | None = None) -> dict:
    doc = pod(name, cpu=None, memory=None, group=group, extra=BATCH, annotations={"volcano.sh/qos-level": "BE"})
    if queue_name:
        doc["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = queue_name
    return doc


def test_a_pod_no_node_could_hold_names_the_node_shortage_not_its_queues_share(tmp_path: Path) -> None:
    """Found: an 8-CPU pod said 'queue default would exceed its deserved share' though no node has 8 CPUs."""
    got = reasons(tmp_path, node("n1", cpu=4), node("n2", cpu=4), queue("other"),
                  pod("big", cpu=8), pod("wants", cpu=6, queue="other"))
    assert got == {"big": "0/2 nodes are available: 2 Insufficient cpu",
                   "wants": "0/2 nodes are available: 2 Insufficient cpu"}


def test_a_pod_that_fits_a_node_still_hears_of_its_queues_share(tmp_path: Path) -> None:
    got = reasons(tmp_path, node("n1", cpu=4), node("n2", cpu=4), queue("other"),
                  pod("runs", cpu=3, nodeName="n1", phase="Running"), pod("more", cpu=3),
                  pod("wants", cpu=3, queue="other"), pod("wants2", cpu=3, queue="other"))
    assert got["more"].startswith("queue default "), got


def test_a_pod_in_a_cluster_without_nodes_is_told_so(tmp_path: Path) -> None:
    """Found: with no node (none had reported yet) a pod said 'queue default is at its deserved share:
    allocated cpu 0, memory 0 of deserved cpu 0, memory 0'."""
    got = reasons(tmp_path, pod("web", cpu=1))
    assert got == {"web": "0/0 nodes are available: the cluster has no nodes"}


def test_a_gang_asking_only_for_batch_resources_never_hears_of_a_deserved_cpu_share(tmp_path: Path) -> None:
    """Found: a gang asking only for batch resources said 'at its deserved share: allocated cpu 0 of deserved cpu 0'."""
    for config in (default_config(), load_config(COLOCATION)):
        cases = [
            (),  # no node at all
            (node("n1", cpu=4),),  # a node offering no batch resources
            (node("n1", cpu=4, extra={"kubernetes.io/batch-cpu": "400", "kubernetes.io/batch-memory": "1Gi"}),),
        ]
        for nodes in cases:
            got = reasons(tmp_path, *nodes, queue("batch"), podgroup("etl", minMember=2, queue="batch"),
                          batch_pod("etl-0", "etl"), batch_pod("etl-1", "etl"), config=config)
            for name, reason in got.items():
                assert "deserved" not in reason and "gang default/etl" in reason, (nodes, name, reason)
    # its queue at its share of CPU (an online pod there uses all it deserves): still placed on batch resources
    got = reasons(tmp_path, node("n1", cpu=4, extra={"kubernetes.io/batch-cpu": "2000",
                                                      "kubernetes.io/batch-memory": "1Gi"}),
                  queue("batch"), pod("online", cpu=2, queue="batch", nodeName="n1", phase="Running"),
                  pod("greedy", cpu=4), podgroup("etl", minMember=2, queue="batch"),
                  batch_pod("etl-0", "etl"), batch_pod("etl-1", "etl"))
    assert got["etl-0"] is None and got["etl-1"] is None, got


def test_the_control_api_hands_out_whole_reasons_however_long(tmp_path: Path) -> None:
    """Found: the table cut reasons at 100 characters.  The server never cuts them (``get -o json`` and the
    wide table show them whole)."""
    from scheduler.modes.embedded.server import ControlServer
    from tests.scheduler.modes.test_embedded import cluster, docs

    embedded, sched = cluster(tmp_path / "s")
    embedded.apply(docs(podgroup("trio", minMember=3),
                        *[pod(f"trio-{i}", cpu=1, group="trio", nodeSelector={"zone": "nowhere"}) for i in range(3)]))
    sched.run_once()
    server = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    try:
        status, items = server.objects("Pod")
        reason = items[0]["status"]["reason"]
        assert status == 200 and len(reason) > 100, reason
        assert reason.endswith("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector"), reason
    finally:
        server.stop()
