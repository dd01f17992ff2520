"""What the agent reads from the kubelet's own configuration: the topology manager policy.

The kubelet's configuration file is a ``KubeletConfiguration`` (YAML or JSON;
``/var/lib/kubelet/config.yaml`` on kubeadm nodes).  Its ``topologyManagerPolicy``
is one of ``none``, ``best-effort``, ``restricted``, ``single-numa-node``; a file
without the key means the kubelet's default, ``none``.

The policy goes into ``Capacity.topology_policy`` so that the scheduler knows
whether the kubelet will itself insist on NUMA alignment.  ``""`` means unknown:
no file (a kubelet started by flags only, or no kubelet), or a file or value the
agent cannot read — said once as a warning, never a crash.  An operator's
``--topology-policy`` overrides the file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import yaml

from proto.errors import InputError
from proto.vocab.placement import NUMA_POLICIES

TOPOLOGY_POLICIES = NUMA_POLICIES  # the kubelet's topology manager policies: Volcano's NUMA policy names
KUBELET_DEFAULT_POLICY = "none"
DEFAULT_CONFIG = "var/lib/kubelet/config.yaml"  # below the host root
_KEY = "topologyManagerPolicy"


class TopologyPolicy:
    """``policy()``: the node's topology manager policy now; the file is read on every call.

    Called when the agent refreshes the node's capacity (a minute apart), so an
    edited kubelet configuration is seen without restarting the agent.
    """

    def __init__(self, path: Path | None, *, override: str | None = None,
                 log: logging.Logger | None = None):
        if override is not None and override not in TOPOLOGY_POLICIES:
            raise InputError(f"--topology-policy: must be one of {', '.join(TOPOLOGY_POLICIES)}, got {override!r}")
        self.path = path
        self.override = override
        self._log = log or logging.getLogger(__name__)
        self._warned: set[str] = set()

    def __call__(self) -> str:
        if self.override is not None:
            return self.override
        if self.path is None:
            return ""
        policy, problem = read_topology_policy(self.path)
        if problem and problem not in self._warned:
            self._warned.add(problem)
            self._log.warning("%s; the node's topology policy is reported as unknown", problem)
        return policy


def read_topology_policy(path: Path) -> tuple[str, str | None]:
    """(policy, problem): ``("", None)`` for a missing file, ``("", "why")`` for one that cannot be used."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return "", None
    except (OSError, UnicodeDecodeError) as exc:
        return "", f"kubelet configuration {path}: cannot be read ({exc})"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return "", f"kubelet configuration {path}: not YAML ({_first_line(exc)})"
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        return "", f"kubelet configuration {path}: expected a KubeletConfiguration mapping, got {type(doc).__name__}"
    kind = doc.get("kind")
    if kind is not None and kind != "KubeletConfiguration":
        return "", f"kubelet configuration {path}: kind is {kind!r}, not KubeletConfiguration"
    value = doc.get(_KEY, KUBELET_DEFAULT_POLICY)
    if value not in TOPOLOGY_POLICIES:
        return "", (f"kubelet configuration {path}: {_KEY} must be one of {', '.join(TOPOLOGY_POLICIES)}, "
                    f"got {value!r}")
    return value, None


def topology_policy_source(host_root: str | Path, config: str | None, override: str | None,
                           log: logging.Logger | None = None) -> Callable[[], str]:
    """The CLI's policy source: ``--kubelet-config`` as given, else the default path below the host root."""
    path = Path(config) if config else Path(host_root) / DEFAULT_CONFIG
    return TopologyPolicy(path, override=override, log=log)


def _first_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"{problem}, line {mark.line + 1}" if mark is not None else problem
