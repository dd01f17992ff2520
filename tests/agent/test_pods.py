"""Pod inventory and node identity: QoS levels from annotations and classes, node labels for profile overrides."""

from __future__ import annotations

import pytest
from kubernetes.client import V1Node, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from agent.labels import NodeLabels, parse_labels
from agent.pods import pod_info
from proto.model import QosLevel


class FakeCoreV1:
    """``read_node`` as the kubernetes client's CoreV1Api has it, returning its model objects."""

    def __init__(self, labels: dict[str, str]):
        self.labels, self.calls, self.fail = labels, 0, False

    def read_node(self, name: str) -> V1Node:
        self.calls += 1
        if self.fail:
            raise ApiException(status=503, reason="Service Unavailable")
        return V1Node(metadata=V1ObjectMeta(name=name, labels=dict(self.labels)))


def test_node_labels_come_from_the_node_refreshed_and_kept_through_outages() -> None:
    now = [0.0]
    api = FakeCoreV1({"scoria.io/pool": "latency-critical", "zone": "a"})
    labels = NodeLabels({"zone": "b"}, core_v1=api, node_name="node-a", refresh=60, clock=lambda: now[0])
    assert labels() == {"scoria.io/pool": "latency-critical", "zone": "b"}  # the command line's win
    api.labels = {"scoria.io/pool": "batch"}
    now[0] = 30
    assert labels()["scoria.io/pool"] == "latency-critical" and api.calls == 1  # not yet due
    now[0] = 61
    assert labels()["scoria.io/pool"] == "batch" and api.calls == 2
    api.fail = True
    now[0] = 200
    assert labels()["scoria.io/pool"] == "batch"  # the API server is away: the last labels stay


def test_static_labels_parse_and_bad_ones_are_named() -> None:
    assert parse_labels(" pool=batch , zone=a,") == {"pool": "batch", "zone": "a"}
    assert NodeLabels(parse_labels("pool=batch"))() == {"pool": "batch"}
    with pytest.raises(ValueError, match="'zone' is not key=value"):
        parse_labels("pool=batch,zone")


@pytest.mark.parametrize("annotations,qos_class,requests,expected", [
    ({"volcano.sh/qos-level": "LC"}, "BestEffort", {}, QosLevel.LC),      # the annotation decides
    ({"volcano.sh/qos-level": "BE"}, "Guaranteed", {"cpu": "1"}, QosLevel.BE),
    ({}, "BestEffort", {}, QosLevel.BE),
    ({}, "Burstable", {"kubernetes.io/batch-cpu": "500"}, QosLevel.BE),  # asks for batch resources: offline
    ({}, "Guaranteed", {"cpu": "1"}, QosLevel.LC),
    ({}, "Burstable", {"cpu": "1"}, QosLevel.LS),
])
def test_qos_level_from_annotation_then_class(annotations, qos_class, requests, expected) -> None:
    doc = {"metadata": {"uid": "u1", "namespace": "ns", "name": "p", "annotations": annotations},
           "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
           "status": {"qosClass": qos_class}}
    assert pod_info(doc).qos_level == expected
