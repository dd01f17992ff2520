"""Helpers for protocol tests: full reports, an in-process server on a real loopback socket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from agent.client import ReportClient
from proto.model import (
    Capacity,
    Colocation,
    ContainerRuntime,
    ContainerTermination,
    ContainerUsage,
    CpuTopology,
    DeviceProcess,
    Devices,
    Eviction,
    Gpu,
    GpuLink,
    GpuTopologyLevel,
    Identity,
    Load,
    LogicalCpu,
    MigMode,
    NodeReport,
    Npu,
    NumaZone,
    PodRuntime,
    PodUsage,
    Pressure,
    QosLevel,
)
from scheduler.cluster.cache import ClusterCache
from scheduler.intake.reports import ReportIntake
from scheduler.intake.server import AgentServer
from scheduler.metrics import SchedulerMetrics

GI = 2**30


def full_report(name: str = "node-a", *, sequence: int = 1, sample_ns: int | None = None,
                interval_ms: int = 1000) -> NodeReport:
    """A report with every field set to something other than its default."""
    return NodeReport(
        identity=Identity(name, "0.1.0-test", "boot-1234", sequence, sample_ns or time.time_ns(), interval_ms),
        capacity=Capacity(
            8000, 32 * GI,
            [NumaZone(0, [0, 1, 2, 3], 16 * GI, [10, 21]), NumaZone(1, [4, 5, 6, 7], 16 * GI, [21, 10])],
            CpuTopology(2, 4, 2, [LogicalCpu(i, i // 4, i // 2, i // 4) for i in range(8)]), "single-numa-node"),
        devices=Devices(
            [Gpu(0, "GPU-0b3c", "NVIDIA H100 80GB HBM3", 80 * GI, 3 * GI, 37.5, 12.25, 1, True, "",
                 MigMode.DISABLED, [DeviceProcess(4242, 2 * GI, "pod-uid-1", "trainer")],
                 [GpuLink(1, 18, GpuTopologyLevel.SYSTEM)]),
             Gpu(1, "GPU-77aa", "NVIDIA H100 80GB HBM3", 80 * GI, 0, 0.0, 0.0, -1, False, "XID 79",
                 MigMode.ENABLED, [], [GpuLink(0, 18, GpuTopologyLevel.SYSTEM)])],
            [Npu(3, 1, "Ascend910B3", 64 * GI, 5 * GI, 55.5, True, "", 0,
                 [DeviceProcess(7, GI, "pod-uid-2", "infer")])]),
        load=Load(3.75, 12 * GI, Pressure(1.5, 2.5, 0.5, 0.75, 1234, 567), Pressure(0.1, 0.2, 0.0, 0.05, 89, 12),
                  Pressure(4.0, 3.0, 2.0, 1.0, 99999, 8888),
                  [PodUsage("pod-uid-1", "ml", "trainer-0", QosLevel.BE, 2.5, 8 * GI),
                   PodUsage("pod-uid-3", "web", "frontend-0", QosLevel.LS, 0.75, GI,
                            [ContainerUsage("0123456789ab", 0.5, GI // 2), ContainerUsage("ba9876543210", 0.25, 1)],
                            Pressure(7.5, 2.0, 1.0, 0.5, 4321, 123))]),
        colocation=Colocation(2500, 6 * GI, 1750, [Eviction("pod-uid-9", "ml", "old-0", "memory pressure", 17)],
                              "default@0123abcd", True),
        runtime=[PodRuntime("pod-uid-1", "ml", "trainer-0", "Running", "", "", 2, 1234, "/var/lib/scoria/logs/x",
                            [ContainerRuntime("trainer", "running", 0, 2, 4242, "", "", 1200, 0,
                                              ContainerTermination(1, "Error", "", 1000, 1100))]),
                 PodRuntime("pod-uid-8", "ml", "done-0", "Failed", "Error", "exit code 3", 0, 99, "",
                            [ContainerRuntime("main", "terminated", 3, 0, 0, "Error", "", 50, 90)])])


@contextlib.asynccontextmanager
async def running_server(*, register: bool = True, tls=None, listen: str = "127.0.0.1:0", cache=None, profiles=None,
                         clock=time.time):
    cache = cache or ClusterCache()
    intake = ReportIntake(cache, SchedulerMetrics(), register_nodes=register, profiles=profiles, clock=clock)
    server = AgentServer(intake, listen=listen, tls=tls, insecure=tls is None)
    port = await server.start()
    try:
        yield server, intake, port
    finally:
        await server.stop(grace=0.2)


@contextlib.asynccontextmanager
async def running_client(client: ReportClient, stop: asyncio.Event | None = None, *,
                         bound: float = 15.0) -> AsyncIterator[asyncio.Task]:
    """``client.run(stop)`` as a task for the length of the block (which gets the task).  At its end, pass or
    fail, the client is told to stop and given ``bound`` seconds (then cancelled, and the test fails): a client
    left running for asyncio.run's clean-up once hung the suite.  Nest it inside the server's block, so that the
    client stops while the server is still up.  A ``stop`` shared by several clients stops them all.  What the
    client's run raised is raised here, as ``await task`` would."""
    stop = stop if stop is not None else asyncio.Event()
    task = asyncio.create_task(client.run(stop))
    try:
        yield task
    finally:
        stop.set()
        done, _ = await asyncio.wait({task}, timeout=bound)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=1)
    assert done, f"the client did not stop within {bound:g} s of being told to"
    task.result()


async def wait_for(predicate, timeout: float, step: float = 0.02) -> float:
    """Seconds until ``predicate()`` is true; raises TimeoutError after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError
        await asyncio.sleep(step)
    return time.monotonic() - start


def changed_report(now: float, **changes: object) -> NodeReport:
    """:func:`full_report` sampled half a second before ``now``, with fields replaced by path:
    ``load__pods__0__cpu_used_cores=-1`` sets ``report.load.pods[0].cpu_used_cores``."""
    r = full_report(sample_ns=int((now - 0.5) * 1e9))
    for path, value in changes.items():
        target = r
        *parts, last = path.split("__")
        for part in parts:
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        if last.isdigit():
            target[int(last)] = value
        else:
            setattr(target, last, value)
    return r


def stale_grpc_poller(record: logging.LogRecord) -> bool:
    """grpc.aio's poller thread waking the event loop of an earlier test that has closed it (asyncio logs
    "Exception in callback PollerCompletionQueue._handle_events" with RuntimeError "Event loop is closed"): noise
    about a loop that is not the one under test (seen once in a full run, during
    tests/scheduler/intake/test_fuzz_wire.py's set-up); tests/conftest.py filters it out of the asyncio logger."""
    exc = record.exc_info[1] if record.exc_info else None
    return (isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"
            and "PollerCompletionQueue._handle_events" in record.getMessage())
