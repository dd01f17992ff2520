"""Issue 13 item 2: a node's report speaks only of the pods bound to that node, and never says where logs are.

Embedded mode is where reports say most about pods (the runtime list: phases, restarts, log
folders), so these tests run the intake with :class:`Embedded`'s pod actions on a real store.
tests/proto/test_tls.py runs the same forgery with two nodes' certificates over mTLS.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import yaml

from proto.model import ContainerRuntime, PodActionKind, PodRuntime
from scheduler.api.loader import iter_text
from scheduler.cluster.cache import ClusterCache
from scheduler.intake.reports import ReportIntake, StreamState
from scheduler.metrics import SchedulerMetrics
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Store
from tests.support.builders import pod
from tests.support.wire import full_report

FORGED_LOGS = "/root/.ssh"


def embedded(tmp_path: Path, *names: str) -> Embedded:
    cache = ClusterCache()
    emb = Embedded(cache, Store(tmp_path / "store.sqlite"), agent_state=tmp_path / "agent")
    emb.apply(list(iter_text(yaml.safe_dump_all([pod(n) for n in names]), "test.yaml")))
    return emb


def by_name(emb: Embedded, name: str):
    return next(p for p in emb.cache.pods.values() if p.name == name)


def runtime(p, phase: str = "Running", log_dir: str = "", **kw) -> PodRuntime:
    return PodRuntime(p.uid, p.namespace, p.name, phase, kw.get("reason", ""), kw.get("message", ""), 0, 1,
                      log_dir, [ContainerRuntime("main", "terminated" if phase == "Succeeded" else "running")])


def node_report(node: str, sequence: int, *pods: PodRuntime):
    r = full_report(node, sequence=sequence)
    r.colocation.evictions = []
    r.runtime = list(pods)
    return r


class View:
    def __init__(self, *pods: PodRuntime):
        self.runtime = list(pods)


def test_a_node_cannot_finish_or_relocate_another_nodes_pod(tmp_path: Path) -> None:
    emb = embedded(tmp_path, "web")
    web = by_name(emb, "web")
    emb.effects.bind(web, "node-b", {})
    emb.effects.flush()  # embedded binds land at the cycle's end, with its statuses
    intake = ReportIntake(emb.cache, SchedulerMetrics(), register_nodes=True, pod_actions=emb.pod_actions)
    b, a = StreamState(), StreamState()
    assert intake.receive(b, node_report("node-b", 1, runtime(web))).ack.code == 0
    before = emb.store.get("Pod", "default/web").status
    assert before["runtime"]["phase"] == "Running"
    # node-a, with a report valid in every other way, says node-b's pod succeeded and keeps its logs in /root/.ssh
    d = intake.receive(a, node_report("node-a", 1, runtime(web, "Succeeded", FORGED_LOGS, reason="forged by node-a")))
    assert d.ack.code == 0  # the report is kept (its node's figures are fine) ...
    assert not any(x.pod_uid == web.uid for x in d.pod_actions)
    assert emb.store.get("Pod", "default/web").status == before  # ... and what it said of node-b's pod is not
    assert (web.node_name, web.phase, web.reason) == ("node-b", "Running", None)
    assert intake.cache.telemetry["node-a"].report.runtime == []
    assert intake.metrics.registry.get_sample_value("scoria_scheduler_report_entries_ignored_total",
                                                    {"field": "runtime"}) == 1
    # node-b's own stream and reports go on as before
    assert intake.streams["node-b"] is b and not b.superseded
    assert intake.receive(b, node_report("node-b", 2, runtime(web, "Succeeded"))) is not None
    assert emb.store.get("Pod", "default/web").status["phase"] == "Succeeded" and web.phase == "Succeeded"


def test_what_a_node_says_of_a_pod_not_bound_to_it_is_not_recorded(tmp_path: Path) -> None:
    emb = embedded(tmp_path, "pending", "elsewhere")
    pending, elsewhere = by_name(emb, "pending"), by_name(emb, "elsewhere")
    emb.effects.bind(elsewhere, "node-b", {})
    emb.effects.flush()  # embedded binds land at the cycle's end, with its statuses
    before = {key: emb.store.get("Pod", key).status for key in ("default/pending", "default/elsewhere")}
    actions = emb.pod_actions("node-a", View(runtime(pending, "Succeeded", FORGED_LOGS),
                                             runtime(elsewhere, "Failed", FORGED_LOGS)))
    # nothing unbound runs on node-a: it is told to stop them, and nothing of what it said is kept
    assert [(a.kind, a.pod_uid, a.reason) for a in actions] == [
        (PodActionKind.STOP, pending.uid, "not bound to this node"),
        (PodActionKind.STOP, elsewhere.uid, "not bound to this node")]
    assert {key: emb.store.get("Pod", key).status for key in before} == before
    assert (pending.phase, pending.node_name, elsewhere.phase) == ("Pending", "", "Running")


def test_a_runtime_reason_is_kept_short(tmp_path: Path) -> None:
    emb = embedded(tmp_path, "web")
    web = by_name(emb, "web")
    emb.effects.bind(web, "node-a", {})
    emb.effects.flush()  # embedded binds land at the cycle's end, with its statuses
    emb.pod_actions("node-a", View(runtime(web, "Failed", reason="Error", message="m" * 3_000_000)))
    status = emb.store.get("Pod", "default/web").status
    assert len(status["runtime"]["message"]) == 1024 and len(status["reason"]) < 1100


def logs(server: str, name: str) -> str:
    from scheduler.modes.embedded.client import logs as logs_command

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        logs_command(argparse.Namespace(server=server, name=name, namespace="default", container=None, tail=None))
    return out.getvalue()


def test_logs_come_from_the_agents_log_root_never_from_a_report(tmp_path: Path) -> None:
    from scheduler.modes.embedded.server import ControlServer

    emb = embedded(tmp_path, "web")
    web = by_name(emb, "web")
    emb.effects.bind(web, "node-a", {})
    emb.effects.flush()  # embedded binds land at the cycle's end, with its statuses
    real = tmp_path / "agent" / "logs" / f"default_web_{web.uid}"
    real.mkdir(parents=True)
    (real / "main.log").write_text("the pod's own output\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "main.log").write_text("a file the report pointed at\n")
    emb.pod_actions("node-a", View(runtime(web, log_dir=str(secret))))  # the pod's own node, lying about its logs
    assert emb.store.get("Pod", "default/web").status["runtime"]["logDir"] == str(real)
    control = ControlServer(emb, socket_path=tmp_path / "control.sock")
    control.start()
    try:
        server = f"unix://{control.socket_path}"
        assert logs(server, "web") == "the pod's own output\n"
        # a record an older version stored with the report's path is answered with the log root's as well
        emb.store.update_status([("Pod", "default/web", {"runtime": {"phase": "Running", "logDir": str(secret)}})])
        assert logs(server, "web") == "the pod's own output\n"
    finally:
        control.stop()


def test_a_pod_log_folder_stays_inside_the_log_root(tmp_path: Path) -> None:
    emb = embedded(tmp_path)
    assert emb.log_root == (tmp_path / "agent" / "logs").absolute()
    assert emb.pod_log_dir("shop", "web", "u-1") == emb.log_root / "shop_web_u-1"
    assert emb.pod_log_dir("../../etc", "x", "u") is None and emb.pod_log_dir("a", "b/c", "u") is None
    (tmp_path / "s2").mkdir()
    default = Embedded(ClusterCache(), Store(tmp_path / "s2" / "store.sqlite"))
    assert default.log_root == (tmp_path / "s2" / "agent" / "logs").absolute()  # the README's layout


def test_the_folder_is_the_one_the_agents_runtime_writes(tmp_path: Path) -> None:
    """The scheduler names a pod's log folder itself; it must be the agent's (agent/embedded/records.py)."""
    from agent.embedded.records import PodRecord, StateDir

    state = StateDir(tmp_path / "agent")
    emb = Embedded(ClusterCache(), Store(tmp_path / "store.sqlite"), agent_state=tmp_path / "agent")
    record = PodRecord("u-1", "shop", "web")
    assert emb.pod_log_dir("shop", "web", "u-1") == state.log_dir(record).absolute()
