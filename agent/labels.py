"""This node's labels: they select the QoS profile's per-node overrides, in every mode.

Static labels from the command line (``--node-labels k=v,...``), and in Kubernetes mode the Node
object's labels read from the API server as well.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from proto.errors import InputError

log = logging.getLogger(__name__)


class NodeLabels:
    """This node's labels (they select the QoS profile's per-node overrides).

    Static labels from the command line, or the Node object's labels read from
    the API server at most every ``refresh`` seconds; when a read fails the last
    labels read stay in force and the failure is logged once per outage.
    """

    def __init__(self, static: dict[str, str] | None = None, *, core_v1: Any = None, node_name: str = "",
                 refresh: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.static = dict(static or {})
        self.api, self.node_name, self.refresh, self.clock = core_v1, node_name, refresh, clock
        self._labels: dict[str, str] = {}
        self._read_at: float | None = None
        self._failing = False

    def __call__(self) -> dict[str, str]:
        if self.api is not None:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= self.refresh:
                self._read_at = now
                self._read()
        return {**self._labels, **self.static}

    def _read(self) -> None:
        try:
            node = self.api.read_node(self.node_name)
            self._labels = dict(node.metadata.labels or {})
            if self._failing:
                log.info("node %s labels readable again", self.node_name)
            self._failing = False
        except Exception as exc:  # API trouble: keep the last labels
            if not self._failing:
                log.warning("cannot read node %s labels (keeping the last ones): %s", self.node_name, exc)
            self._failing = True


def parse_labels(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` -> dict; ValueError naming the bad item."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--node-labels: {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out
