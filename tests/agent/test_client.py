"""The agent's report stream when the agent's own loop fails: the node goes stale at the scheduler, it is
not kept fresh by a frozen copy of the last good report.  Real gRPC server, real agent loop on a fixture tree."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import detect_layout
from agent.client import ClientOptions, ReportClient
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.loop import Agent, AgentConfig
from agent.pods import PodInfo, StaticPodSource
from agent.profile import ProfileWatcher
from hack.lib.cgroup_fixtures import FakePod, make_proc, make_tree
from proto.model import Capacity, QosLevel
from tests.support.wire import full_report, running_client, running_server, wait_for

GI = 2**30
WEB = "0000aaaa-0000-4000-8000-000000000001"


async def _a_report_is_resent_only_while_recent() -> None:
    async with running_server() as (_, intake, port):
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.05, insecure=True, resend_for=0.3))
        client.publish(full_report())
        async with running_client(client):
            await wait_for(lambda: client.stats["acked"] >= 1, 5)
            await asyncio.sleep(0.5)  # past resend_for: the client has gone quiet
            sent, received = client.stats["sent"], intake.cache.telemetry["node-a"].received
            await asyncio.sleep(0.4)
            assert client.stats["sent"] == sent and intake.cache.telemetry["node-a"].received == received
            assert client.connected or client.stats["connects"] == 1  # the stream stays, it carries nothing
            client.publish(full_report(sample_ns=time.time_ns()))  # the agent reports again: sent at once
            await wait_for(lambda: client.stats["sent"] > sent, 2)
            await wait_for(lambda: intake.cache.telemetry["node-a"].received > received, 2)


def test_a_report_is_sent_again_only_while_it_is_recent() -> None:
    asyncio.run(_a_report_is_resent_only_while_recent())


class FailingPods(StaticPodSource):
    """A pod source that works once, then fails on every tick (a loop that breaks and stays broken)."""

    def __init__(self, pods: list[PodInfo]) -> None:
        super().__init__(pods)
        self.calls = 0

    def pods(self) -> list[PodInfo]:
        self.calls += 1
        if self.calls > 2:
            raise RuntimeError("the pod source broke")
        return super().pods()


def _agent(tmp_path: Path, pods: StaticPodSource, publish) -> Agent:
    tree = make_tree(tmp_path / "cg", version=2, driver="systemd", pods=[FakePod(WEB, "Burstable")])
    make_proc(tmp_path / "proc")
    paths = HostPaths(sys=tmp_path / "sys", proc=tmp_path / "proc", cgroup=tree.cgroup)
    backend = detect_backend(paths)
    return Agent(AgentConfig("node-a", slow_interval=0.1), paths=paths, backend=backend, layout=detect_layout(backend),
                 pods=pods, profiles=ProfileWatcher(None), evictor=RecordingEvictor(),
                 read_capacity=lambda p: Capacity(4000, 16 * GI), publish=publish)


async def _a_failing_loop_makes_the_node_stale(tmp_path: Path) -> None:
    async with running_server() as (_, intake, port):
        client = ReportClient(ClientOptions(f"127.0.0.1:{port}", interval=0.1, insecure=True, resend_for=0.3))
        pods = FailingPods([PodInfo(WEB, "web", "web-0", "Burstable", QosLevel.LS, cpu_request=1000)])
        agent = _agent(tmp_path, pods, client.publish)
        halt = threading.Event()
        loop = threading.Thread(target=agent.run, args=(halt,), daemon=True)
        loop.start()
        try:
            async with running_client(client):
                await wait_for(lambda: "node-a" in intake.cache.telemetry, 10)
                await wait_for(lambda: pods.calls > 5, 10)  # the loop has failed a few times since
                telemetry = intake.cache.telemetry["node-a"]
                assert telemetry.interval == 0.1
                # the scheduler stops hearing from the node: three of its intervals later it is stale (its
                # figures read as unknown), not a healthy node with frozen figures
                await wait_for(lambda: intake.cache.telemetry["node-a"].stale(time.time(), 3), 3)
                await asyncio.sleep(0.5)
                assert intake.cache.telemetry["node-a"].stale(time.time(), 3)
        finally:
            halt.set()
            loop.join(5)


def test_an_agent_whose_loop_fails_goes_stale_at_the_scheduler(tmp_path: Path) -> None:
    asyncio.run(_a_failing_loop_makes_the_node_stale(tmp_path))
