"""The kubelet's topology manager policy, from KubeletConfiguration files in tests/fixtures/kubelet/."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from agent.kubernetes.kubelet import TopologyPolicy, read_topology_policy, topology_policy_source

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "kubelet"
LOGGER = "agent.kubernetes.kubelet"

CASES = {
    "kubeadm-default-means-none": ("kubeadm-default.yaml", "none", None),
    "single-numa-node": ("gpu-node-single-numa.yaml", "single-numa-node", None),
    "json-form": ("best-effort.json", "best-effort", None),
    "unknown-policy": ("unknown-policy.yaml", "", "topologyManagerPolicy must be one of none, best-effort, "
                                                   "restricted, single-numa-node, got 'numa-strict'"),
    "not-yaml": ("not-yaml.yaml", "", "not YAML"),
    "wrong-kind": ("wrong-kind.yaml", "", "kind is 'KubeProxyConfiguration', not KubeletConfiguration"),
}


@pytest.mark.parametrize("name,want,problem", CASES.values(), ids=list(CASES))
def test_policy_from_the_file(name, want, problem):
    got, why = read_topology_policy(FIXTURES / name)
    assert got == want
    if problem is None:
        assert why is None
    else:
        assert problem in why and name in why


@pytest.mark.parametrize("text,want,problem", [
    ("", "none", None),
    ("- a list\n", "", "expected a KubeletConfiguration mapping, got list"),
    ("topologyManagerPolicy: 3\n", "", "got 3"),
    ("topologyManagerPolicy: restricted\n", "restricted", None),
], ids=["empty-file-is-the-default", "a-list", "a-number", "no-kind-line"])
def test_policy_from_text(tmp_path, text, want, problem):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    got, why = read_topology_policy(path)
    assert got == want
    assert why is None if problem is None else problem in why


def test_missing_file_is_unknown_without_a_warning(tmp_path, caplog):
    policy = TopologyPolicy(tmp_path / "nope.yaml")
    assert policy() == "" and caplog.records == []


def test_unreadable_file_is_unknown_with_a_warning(tmp_path, caplog):
    (tmp_path / "config.yaml").mkdir()  # a directory where the file should be: EISDIR
    assert TopologyPolicy(tmp_path / "config.yaml")() == ""
    (record,) = caplog.records
    assert "cannot be read" in record.getMessage() and "reported as unknown" in record.getMessage()


def test_a_bad_file_is_warned_about_once_and_a_fix_is_picked_up(tmp_path, caplog):
    path = tmp_path / "config.yaml"
    shutil.copy(FIXTURES / "unknown-policy.yaml", path)
    policy = TopologyPolicy(path)
    assert [policy() for _ in range(3)] == ["", "", ""]
    assert len([r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]) == 1
    shutil.copy(FIXTURES / "gpu-node-single-numa.yaml", path)
    assert policy() == "single-numa-node", "read afresh on each call"


def test_the_override_wins_over_the_file():
    assert TopologyPolicy(FIXTURES / "best-effort.json", override="restricted")() == "restricted"
    assert TopologyPolicy(None, override="none")() == "none"


def test_a_bad_override_is_refused():
    with pytest.raises(ValueError, match="--topology-policy: must be one of .* got 'strict'"):
        TopologyPolicy(None, override="strict")


def test_default_path_is_below_the_host_root(tmp_path):
    (tmp_path / "var" / "lib" / "kubelet").mkdir(parents=True)
    shutil.copy(FIXTURES / "gpu-node-single-numa.yaml", tmp_path / "var" / "lib" / "kubelet" / "config.yaml")
    assert topology_policy_source(tmp_path, None, None)() == "single-numa-node"
    assert topology_policy_source(tmp_path, str(FIXTURES / "best-effort.json"), None)() == "best-effort"
    assert topology_policy_source(tmp_path / "elsewhere", None, None)() == ""
