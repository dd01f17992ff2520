"""What a pod says about preemption, read at load: ``volcano.sh/preemptable`` (annotation, else label, as Volcano's
GetPodPreemptable), ``spec.preemptionPolicy`` and the names of ``spec.resourceClaims``."""

from __future__ import annotations

import pytest

from scheduler.api.manifests import ManifestError, parse_object
from tests.support.action_runs import with_
from tests.support.builders import pod

KEY = "volcano.sh/preemptable"


@pytest.mark.parametrize("annotations,labels,expected", [
    ({}, {}, True),
    ({KEY: "false"}, {}, False),
    ({}, {KEY: "False"}, False),
    ({KEY: "TRUE"}, {KEY: "false"}, True),  # the annotation is read first
    ({KEY: "false"}, {KEY: "true"}, False),
    ({KEY: ""}, {KEY: "false"}, False),  # an empty annotation says nothing
], ids=["unset", "annotation", "label", "annotation first", "annotation first (false)", "empty annotation"])
def test_preemptable(annotations: dict, labels: dict, expected: bool) -> None:
    doc = with_(pod("p"), annotations=annotations, labels=labels)
    assert parse_object(doc, "test").preemptable is expected


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_a_bad_preemptable_value_refuses_a_pending_pod_naming_the_field(where: str) -> None:
    doc = with_(pod("p"), **{where: {KEY: "maybe"}})
    with pytest.raises(ManifestError, match=rf"metadata\.{where}\[volcano\.sh/preemptable\]: must be \"true\" or "
                                            r"\"false\", got 'maybe'"):
        parse_object(doc, "test")


def test_a_bound_pod_with_a_bad_value_is_counted_and_not_preemptable() -> None:
    """A running pod must still be counted; Volcano reads a value it cannot parse as false."""
    doc = with_(pod("p", nodeName="n1"), annotations={KEY: "maybe"})
    assert parse_object(doc, "test").preemptable is False


def test_preemption_policy() -> None:
    assert parse_object(pod("p"), "test").preemption_policy == "PreemptLowerPriority"
    assert parse_object(with_(pod("p"), preemptionPolicy="Never"), "test").preemption_policy == "Never"
    with pytest.raises(ManifestError, match="spec.preemptionPolicy: must be one of PreemptLowerPriority, Never, "
                                            "got 'Sometimes'"):
        parse_object(with_(pod("p"), preemptionPolicy="Sometimes"), "test")


def test_resource_claims() -> None:
    doc = with_(pod("p"), resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "nic"}])
    assert parse_object(doc, "test").resource_claims == ("gpu", "nic")
    assert parse_object(pod("p"), "test").resource_claims == ()
    with pytest.raises(ManifestError, match=r"spec.resourceClaims\[0\].name: must be set"):
        parse_object(with_(pod("p"), resourceClaims=[{"source": {}}]), "test")
    with pytest.raises(ManifestError, match=r"spec.resourceClaims\[0\]: expected a mapping"):
        parse_object(with_(pod("p"), resourceClaims=["gpu"]), "test")
