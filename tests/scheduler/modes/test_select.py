"""``serve`` picks its run mode in one place (scheduler.cli.select_mode), and the rest of serve talks
to the Mode interface only."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli import build_parser, select_mode
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.intake.server import ServeError
from scheduler.modes.base import Mode
from scheduler.modes.embedded.mode import EmbeddedMode
from scheduler.modes.kubernetes.mode import KubernetesMode

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def serve_args(*flags: str):
    return build_parser().parse_args(["serve", *flags])


def test_plain_serve_is_the_cache_only_mode() -> None:
    mode = select_mode(serve_args())
    assert type(mode) is Mode and not mode.register_nodes
    assert select_mode(serve_args("--register-nodes")).register_nodes
    assert mode.leading() and mode.ready() and mode.pod_actions() is None and mode.history_store() is None


def test_embedded_needs_its_state_folder_and_registers_reporting_nodes(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="--embedded needs --state"):
        select_mode(serve_args("--embedded"))
    mode = select_mode(serve_args("--embedded", "--state", str(tmp_path)))
    assert isinstance(mode, EmbeddedMode) and mode.register_nodes
    assert mode.pod_actions() is None  # nothing until started
    effects = mode.start(ClusterCache(), None, None)  # embedded mode uses neither the stop event nor metrics
    assert isinstance(effects, CacheEffects) and mode.pod_actions() is not None
    assert (tmp_path / "store.sqlite").exists()
    mode.embedded.store.close()


def test_kubernetes_mode_and_its_history_on_the_nodes(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    mode = select_mode(serve_args("--kubernetes", "--kubeconfig", str(config), "--kube-qps", "7"))
    assert isinstance(mode, KubernetesMode) and not mode.register_nodes
    assert mode.settings["qps"] == 7.0
    assert not mode.leading() and not mode.ready()  # nothing listed before start
    assert type(mode.history_store()).__name__ == "NodeAnnotationHistoryStore"


def test_embedded_and_kubernetes_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="exclude each other"):
        select_mode(serve_args("--embedded", "--state", str(tmp_path), "--kubernetes"))
