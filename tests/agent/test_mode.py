"""Which run mode the agent's flags pick, and what each mode gives the loop (agent/mode.py, agent/cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.backend import V1Backend
from agent.cgroups.layout import FixedLayout
from agent.cgroups.tree import V1_CONTROLLERS
from agent.cli import build_parser, make_agent, pick_mode
from agent.embedded import LocalEvictor, LocalRuntime
from agent.embedded.mode import EmbeddedMode
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.kubernetes.evictor import KubernetesEvictor
from agent.kubernetes.mode import KubernetesMode
from agent.kubernetes.node import NodeResources, NodeTaint
from agent.kubernetes.pods import KubernetesPodSource
from agent.labels import NodeLabels
from agent.metrics import AgentMetrics
from agent.mode import HostMode, ModeContext
from agent.pods import CgroupPodSource, StaticPodSource
from hack.lib.cgroup_fixtures import make_proc, make_tree
from hack.lib.fake_apiserver import FakeApiServer, pod
from proto.errors import InputError
from proto.model import Directive, PodAction, PodActionKind
from tests.support.sysfs_fixtures import make_host


def args(*argv: str):
    return build_parser().parse_args(list(argv))


# -- choosing -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,enforce,name,parent", [
    (["run"], True, "cgroups", None),
    (["run", "--pods-from", "cgroups"], True, "cgroups", None),
    (["run", "--dry-run"], False, "cgroups", None),
    (["run", "--cgroup-parent", "mine"], True, "cgroups", "mine"),
    (["run", "--pods-from", "none"], True, "none", None),
    (["run", "--pods-from", "kubernetes"], True, "kubernetes", None),
    (["run", "--pods-from", "kubernetes", "--dry-run"], False, "kubernetes", None),
    (["run", "--embedded", "--state", "s"], True, "embedded", "scoria"),
    (["run", "--embedded", "--state", "s", "--cgroup-parent", "mine"], True, "embedded", "mine"),
    (["report", "--once"], False, "cgroups", None),
    (["report", "--once", "--pods-from", "none"], False, "none", None),
    (["report", "--once", "--pods-from", "kubernetes"], False, "kubernetes", None),
], ids=["default", "cgroups", "dry-run", "cgroup-parent", "none", "kubernetes", "kubernetes-dry-run", "embedded",
        "embedded-parent", "report", "report-none", "report-kubernetes"])
def test_each_flag_combination_picks_its_mode(argv: list[str], enforce: bool, name: str, parent: str | None) -> None:
    choice = pick_mode(args(*argv), enforce=enforce)
    assert (choice.name, choice.cgroup_parent) == (name, parent)


@pytest.mark.parametrize("argv,enforce,words", [
    (["run", "--embedded"], True, "--embedded needs --state DIR"),
    (["run", "--embedded", "--dry-run"], False, "--embedded needs --state DIR"),  # checked in this order
    (["run", "--embedded", "--state", "s", "--pods-from", "kubernetes"], True, "drop --pods-from"),
    (["run", "--embedded", "--state", "s", "--pods-from", "cgroups"], True, "drop --pods-from"),
    (["run", "--embedded", "--state", "s", "--dry-run"], False, "cannot be a --dry-run"),
    (["run", "--embedded", "--state", "s", "--shutdown-grace", "-1"], True, "--shutdown-grace must be >= 0, got -1"),
], ids=["no-state", "no-state-dry-run", "pods-from-kubernetes", "pods-from-cgroups", "dry-run", "negative-grace"])
def test_flags_that_do_not_go_together_are_refused_before_anything_is_made(argv: list[str], enforce: bool,
                                                                          words: str) -> None:
    with pytest.raises(InputError, match=words):
        pick_mode(args(*argv), enforce=enforce)


# -- what each mode gives the loop ----------------------------------------------------------------------

@pytest.fixture
def context(tmp_path: Path) -> ModeContext:
    for c in V1_CONTROLLERS:
        (tmp_path / "cg" / c).mkdir(parents=True)
    paths = HostPaths(sys=tmp_path / "sys", proc=tmp_path / "proc", cgroup=tmp_path / "cg")
    backend = V1Backend(paths)
    return ModeContext("node-a", paths, backend, FixedLayout(backend, "scoria"), AgentMetrics(),
                       NodeLabels({"pool": "batch"}), enforce=True)


@pytest.mark.parametrize("argv,source", [(["run"], CgroupPodSource), (["run", "--pods-from", "none"], StaticPodSource)],
                         ids=["cgroups", "none"])
def test_host_modes_find_pods_on_the_host_and_only_log_evictions(context: ModeContext, argv: list[str],
                                                                 source: type) -> None:
    mode = pick_mode(args(*argv), enforce=True).build(context)
    assert isinstance(mode, HostMode) and isinstance(mode.pods, source) and isinstance(mode.evictor, RecordingEvictor)
    assert (mode.taint, mode.node_resources, mode.runtime) == (None, None, None)
    assert mode.node_labels() == {"pool": "batch"}
    mode.start()
    assert mode.ready(0)
    mode.on_directive(Directive())
    mode.shutdown()


def test_the_executor_counts_its_errors_in_the_agents_metrics(context: ModeContext) -> None:
    mode = HostMode(context, pods=StaticPodSource())
    mode.executor.on_error("EACCES")
    assert context.metrics.registry.get_sample_value("scoria_agent_cgroup_write_errors_total",
                                                     {"kind": "EACCES"}) == 1


def test_embedded_mode_is_built_whole_around_one_executor(context: ModeContext, tmp_path: Path) -> None:
    mode = pick_mode(args("run", "--embedded", "--state", str(tmp_path / "state"), "--shutdown-grace", "0"),
                     enforce=True).build(context)
    assert isinstance(mode, EmbeddedMode) and isinstance(mode.local, LocalRuntime)
    assert mode.pods is mode.local and mode.runtime is mode.local and isinstance(mode.evictor, LocalEvictor)
    assert mode.local.executor is mode.executor  # shared from the start: nothing patched afterwards
    assert (mode.taint, mode.node_resources) == (None, None) and mode.node_labels() == {"pool": "batch"}
    assert (tmp_path / "cg" / "cpu" / "scoria" / "offline").is_dir()  # the runtime was made, parents and all
    mode.on_directive(Directive(pod_actions=[PodAction(PodActionKind.START, "u1", "team", "web", pod_json="{bad")]))
    assert [(p.uid, p.phase) for p in mode.local.runtime()] == [("u1", "Failed")]
    mode.shutdown()
    assert not (tmp_path / "cg" / "cpu" / "scoria").exists()  # every cgroup it made is gone


@pytest.mark.parametrize("enforce", [True, False], ids=["enforcing", "observing"])
def test_kubernetes_mode_watches_the_api_and_patches_the_node_only_when_enforcing(context: ModeContext,
                                                                                 enforce: bool) -> None:
    with FakeApiServer() as api:
        api.put_node("node-a", {"zone": "a"})
        api.put_pod(pod("u-web", "web-0", "node-a"))
        ctx = ModeContext(context.node_name, context.paths, context.backend, context.layout, context.metrics,
                          context.labels, enforce=enforce)
        mode = KubernetesMode(ctx, core_v1=api.core_v1())
        assert isinstance(mode.pods, KubernetesPodSource) and isinstance(mode.evictor, KubernetesEvictor)
        assert mode.runtime is None
        if enforce:
            assert isinstance(mode.taint, NodeTaint) and isinstance(mode.node_resources, NodeResources)
        else:
            assert (mode.taint, mode.node_resources) == (None, None)
        mode.start()
        try:
            assert mode.ready(10)
            assert [p.uid for p in mode.pods.pods()] == ["u-web"]
            assert mode.node_labels() == {"zone": "a", "pool": "batch"}  # the Node's, the command line's on top
        finally:
            mode.shutdown()


def test_the_loop_gets_the_modes_parts(tmp_path: Path) -> None:
    host = tmp_path / "host"
    make_host(host)
    make_proc(host / "proc")
    make_tree(host / "sys" / "fs" / "cgroup", version=1)
    agent, mode = make_agent(args("run", "--embedded", "--state", str(tmp_path / "state"), "--host-root", str(host),
                                  "--no-devices", "--node-name", "box"), enforce=True)
    try:
        assert isinstance(mode, EmbeddedMode)
        assert agent.pods is mode.pods and agent.evictor is mode.evictor and agent.runtime is mode.runtime
        assert agent.executor is mode.executor is mode.local.executor  # one seam for every cgroup write
        assert agent.taint is None and agent.node_resources is None and agent.config.node_name == "box"
    finally:
        mode.shutdown()
