#!/usr/bin/env python3
"""A simulated fleet of node agents against a real ``python -m scheduler serve``; prints one JSON line.

    python hack/bench/fleet.py [--nodes 10000] [--workers 2] [--seconds 20] [--interval 1.0]
                               [--sender client|raw] [--no-deltas]

The scheduler runs as its own process on loopback (plaintext, node
registration on).  ``--workers`` processes each hold a share of the nodes:
one gRPC stream per node (a few nodes per HTTP/2 connection), a realistic
report per node (2 NUMA zones, 32–64 CPUs, 20–40 pods with usage and QoS
class, PSI, co-location state; every tenth node with 8 GPUs), its node-wide
usage and pressure changing every interval (a steady node: the pods, capacity
and devices stay as they are), at ``--interval`` with each node's phase spread
over the interval.

``--sender client`` (the default): each node is the agent's own
:class:`agent.client.ReportClient` (the nodes of a connection share its
channel), published a new report every interval, sending it as the agent
does — delta reports once the scheduler's acks allow them, unless
``--no-deltas``.  ``--sender raw``: each node re-stamps and resends one
pre-encoded full report (the load this benchmark generated before the
client sent deltas; cheaper for the fleet).

After all nodes are connected and a warm-up, the window of ``--seconds`` is
measured:

* ``reports_per_second`` — reports the scheduler accepted (its own counter);
* ``p99_report_to_cache_seconds`` — from sending a report to its
  acknowledgement, which the scheduler sends after the report is in its cache
  (acknowledged reports only: every 10th, the first, the full ones of a
  delta-sending agent);
* ``scheduler_cpu_cores`` — the scheduler process's CPU time / wall time, and
  ``scheduler_cpu_us_per_report`` — its CPU time per accepted report;
* ``scheduler_rss_mib`` — its resident memory at the end;
* ``agents_connected`` — streams the scheduler holds (its gauge), and
  ``fleet_connected`` — simulated agents whose stream was acknowledged and is open;
* ``refused`` — reports refused (should be 0); ``delta_fraction`` — the share
  of reports sent as deltas.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

from agent.client import ClientOptions, ReportClient, open_stream  # noqa: E402
from hack.lib.processes import ServeFailed, cpu_seconds, scrape, start_serve, wait_port  # noqa: E402
from proto import codec  # noqa: E402
from proto.model import (  # noqa: E402
    Capacity,
    Colocation,
    CpuTopology,
    Devices,
    Gpu,
    Identity,
    Load,
    LogicalCpu,
    MigMode,
    NodeReport,
    NumaZone,
    PodUsage,
    Pressure,
    QosLevel,
)

GI = 2**30
SCRAPE_GRACE = 2.0  # seconds the fleet keeps reporting after the window, while the scheduler's figures are read


def make_report(name: str, rng: random.Random, interval_ms: int) -> NodeReport:
    cpus = rng.choice((32, 48, 64))
    half = cpus // 2
    gpus = [Gpu(i, f"GPU-{name}-{i}", "NVIDIA H100 80GB HBM3", 80 * GI, rng.randrange(0, 40) * GI,
                rng.uniform(0, 100), rng.uniform(0, 60), i // 4, True, "", MigMode.DISABLED)
            for i in range(8)] if rng.random() < 0.1 else []
    pods = [PodUsage(f"{name}-pod-{k}", f"ns-{k % 7}", f"pod-{k}", rng.choice(list(QosLevel)[1:]),
                     rng.uniform(0, 2), rng.randrange(1, 8) * GI // 4) for k in range(rng.randint(20, 40))]
    return NodeReport(
        identity=Identity(name, "fleet-sim", f"boot-{name}", 0, 0, interval_ms),
        capacity=Capacity(cpus * 1000, cpus * 4 * GI,
                          [NumaZone(0, list(range(half)), cpus * 2 * GI, [10, 21]),
                           NumaZone(1, list(range(half, cpus)), cpus * 2 * GI, [21, 10])],
                          CpuTopology(2, half, 2, [LogicalCpu(i, i // half, i // 2, i // half) for i in range(cpus)])),
        devices=Devices(gpus, []),
        load=Load(rng.uniform(1, cpus / 2), cpus * GI, Pressure(1, 1, 0, 0, 100, 10), Pressure(), Pressure(), pods),
        colocation=Colocation(cpus * 200, cpus * GI, cpus * 300, [], "default@fleet", False))


async def node_stream(message, channel, interval: float, phase: float, stop: asyncio.Event, stats: dict,
                      window: list) -> None:
    """One simulated node: open its stream at its phase, re-stamp and send its report every interval,
    read acknowledgements; like the real client, reconnect (with jittered backoff) if the stream ends."""
    await asyncio.sleep(phase)
    seq = 0
    while not stop.is_set():
        call = open_stream(channel)
        sent: dict[int, float] = {}

        async def read(call, sent: dict[int, float]) -> None:  # this stream's, bound now
            async for directive in call:
                ack = directive.ack
                at = sent.pop(ack.sequence, None)
                if ack.code:
                    stats["refused"] += 1
                    stats["last_refusal"] = ack.message
                elif at is not None and window[0]:
                    stats["latencies"].append(time.time() - at)

        reader = asyncio.create_task(read(call, sent))
        next_at = time.monotonic()
        try:
            while not stop.is_set() and not reader.done():
                seq += 1
                now = time.time()
                message.identity.sequence = seq
                message.identity.sample_time_ns = int(now * 1e9)
                message.load.cpu_used_cores = max(0.0, message.load.cpu_used_cores + random.uniform(-0.2, 0.2))
                sent[seq] = now
                await call.write(message)
                stats["sent"] += 1
                # a late report is not made up for with a burst: agents send once per interval
                next_at = max(next_at + interval, time.monotonic())
                await asyncio.sleep(next_at - time.monotonic())
        except grpc.aio.AioRpcError:
            pass
        finally:
            call.cancel()
            ended = (await asyncio.gather(reader, return_exceptions=True))[0]
        if stop.is_set():
            break
        stats["reconnects"] += 1
        if window[0]:
            stats["reconnects_in_window"] += 1
        if isinstance(ended, grpc.aio.AioRpcError):
            stats["last_error"] = f"{ended.code().name}: {ended.details()}"
        await asyncio.sleep(random.uniform(0, interval))


def steady(report: NodeReport, now_ns: int, rng: random.Random) -> NodeReport:
    """The node's next picture: sampled now, node-wide usage and pressure moved; pods, capacity, devices
    as they were (the same objects, as the agent keeps them)."""
    i, lo = report.identity, report.load
    p = lo.cpu_pressure
    return NodeReport(
        Identity(i.node_name, i.agent_version, i.boot_id, 0, now_ns, i.report_interval_ms),
        report.capacity, report.devices,
        Load(max(0.0, lo.cpu_used_cores + rng.uniform(-0.2, 0.2)), lo.memory_used_bytes + rng.randrange(-4096, 4096),
             Pressure(p.some_avg10, p.some_avg60, p.full_avg10, p.full_avg60, p.some_total_us + rng.randrange(1000),
                      p.full_total_us), lo.memory_pressure, lo.io_pressure, lo.pods),
        report.colocation, report.runtime)


def client_fleet(reports: list[NodeReport], channels: list, args: argparse.Namespace, target: str,
                 rng: random.Random, stop: asyncio.Event, stats: dict, window: list) -> tuple[list, list]:
    """Each node an agent's ReportClient on its connection's shared channel, published a new report every
    interval (one publisher for all: the agents' loops); the clients and their tasks, running until ``stop``."""
    options = ClientOptions(target, interval=args.interval, insecure=True, deltas=args.deltas)

    def on_ack(sequence: int, code: int, seconds: float) -> None:
        if window[0] and code == 0:
            stats["latencies"].append(seconds)

    clients = []
    for i, report in enumerate(reports):
        client = ReportClient(options, channel=channels[i // args.per_channel], seed=rng.randrange(2**32))
        client.on_ack = on_ack
        client.publish(report)
        clients.append(client)

    async def publisher() -> None:
        latest = list(reports)
        while not stop.is_set():
            now_ns = time.time_ns()
            for k, client in enumerate(clients):
                latest[k] = steady(latest[k], now_ns, rng)
                client.publish(latest[k])
            try:
                await asyncio.wait_for(stop.wait(), args.interval)
            except TimeoutError:
                pass

    async def agent(client: ReportClient, phase: float) -> None:
        await asyncio.sleep(phase)
        await client.run(stop)

    tasks = [asyncio.create_task(publisher())] + [
        asyncio.create_task(agent(c, rng.uniform(0, args.interval))) for c in clients]
    return clients, tasks


def worker(names: list[str], target: str, args: argparse.Namespace, seed: int, start_at: float,
           measure: tuple[float, float], queue: mp.Queue) -> None:
    async def main() -> None:
        rng = random.Random(seed)
        interval, per_channel = args.interval, args.per_channel
        stats = {"sent": 0, "refused": 0, "reconnects": 0, "reconnects_in_window": 0, "latencies": [], "last_error": "",
                 "last_refusal": "", "deltas": 0, "connected": None}
        window = [False]
        stop = asyncio.Event()
        channels = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range((len(names) + per_channel - 1) // per_channel)]
        reports = [make_report(n, rng, int(interval * 1000)) for n in names]
        await asyncio.sleep(max(0.0, start_at - time.time()))
        clients: list[ReportClient] = []
        if args.sender == "client":
            clients, tasks = client_fleet(reports, channels, args, target, rng, stop, stats, window)
        else:
            messages = [codec.report_to_pb(r) for r in reports]
            tasks = [asyncio.create_task(node_stream(m, channels[i // per_channel], interval, rng.uniform(0, interval),
                                                     stop, stats, window)) for i, m in enumerate(messages)]
        await asyncio.sleep(max(0.0, measure[0] - time.time()))
        window[0] = True
        counted = [dict(c.stats) for c in clients]
        cpu0 = time.process_time()
        await asyncio.sleep(max(0.0, measure[1] - time.time()))
        window[0] = False
        cpu = time.process_time() - cpu0
        if clients:
            stats["connected"] = sum(1 for c in clients if c.connected)
        for c, before in zip(clients, counted, strict=True):
            for key in ("sent", "deltas", "refused"):
                stats[key] += c.stats[key] - before[key]
            stats["reconnects_in_window"] += c.stats["connects"] - before["connects"]
            stats["reconnects"] += c.stats["connects"] - 1
            if c.last_refusal:
                stats["last_refusal"] = c.last_refusal
        # the fleet goes on until the scheduler's figures have been read at the end of the window
        await asyncio.sleep(max(0.0, measure[1] + SCRAPE_GRACE - time.time()))
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for ch in channels:
            await ch.close()
        stats["cpu"] = cpu
        queue.put(stats)

    asyncio.run(main())


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="fleet-"))
    port_file = tmp / "port"
    metrics_port = args.metrics_port
    with open(tmp / "scheduler.log", "w") as log:  # the child has its own descriptor: ours can close now
        server = start_serve("--insecure", "--listen", "127.0.0.1:0", "--register-nodes", "--metrics-port",
                             str(metrics_port), *args.serve_arg, port_file=port_file, stderr=log)
    try:
        try:
            target = f"127.0.0.1:{wait_port(port_file, server, 30)}"
        except ServeFailed as exc:
            raise SystemExit(f"scheduler did not start ({exc}): {(tmp / 'scheduler.log').read_text()}") from None
        names = [f"node-{i:05d}" for i in range(args.nodes)]
        start_at = time.time() + 2
        measure_from = start_at + args.interval + args.warmup
        measure = (measure_from, measure_from + args.seconds)
        queue: mp.Queue = mp.Queue()
        procs = [mp.Process(target=worker, args=(names[w::args.workers], target, args, w, start_at, measure, queue))
                 for w in range(args.workers)]
        for p in procs:
            p.start()
        sched = psutil.Process(server.pid)
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        time.sleep(max(0.0, measure[0] - time.time()))
        before, cpu_before, t0 = scrape(metrics_url), cpu_seconds(sched), time.monotonic()
        time.sleep(max(0.0, measure[1] - time.time()))
        after, cpu_after, t1 = scrape(metrics_url), cpu_seconds(sched), time.monotonic()
        rss = sched.memory_info().rss / 2**20
        results = [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=30)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log_tail = (tmp / "scheduler.log").read_text().splitlines()[-5:]
    wall = t1 - t0
    accepted = after.get("scoria_scheduler_reports_total", 0) - before.get("scoria_scheduler_reports_total", 0)
    latencies = np.array([x for r in results for x in r["latencies"]] or [float("nan")])
    sent = sum(r["sent"] for r in results)
    cpu = cpu_after - cpu_before
    connected = [r["connected"] for r in results]
    return {
        "nodes": args.nodes, "interval_s": args.interval, "workers": args.workers, "sender": args.sender,
        "deltas": args.deltas and args.sender == "client", "window_s": round(wall, 2),
        "reports_per_second": round(accepted / wall, 1),
        "p99_report_to_cache_seconds": round(float(np.percentile(latencies, 99)), 4),
        "p50_report_to_cache_seconds": round(float(np.percentile(latencies, 50)), 4),
        "scheduler_cpu_cores": round(cpu / wall, 3),
        "scheduler_cpu_us_per_report": round(cpu / accepted * 1e6, 1) if accepted else None,
        "scheduler_rss_mib": round(rss, 1),
        "agents_connected": after.get("scoria_scheduler_agents_connected"),
        "fleet_connected": sum(connected) if None not in connected else None,
        "refused": sum(r["refused"] for r in results),
        "last_refusal": next((r["last_refusal"] for r in results if r["last_refusal"]), None),
        "delta_fraction": round(sum(r["deltas"] for r in results) / sent, 3) if sent else None,
        "reconnects": sum(r["reconnects"] for r in results),
        "reconnects_in_window": sum(r["reconnects_in_window"] for r in results),
        "last_stream_error": next((r["last_error"] for r in results if r["last_error"]), None),
        "fleet_cpu_cores": round(sum(r["cpu"] for r in results) / wall, 3),
        "machine_cpus": os.cpu_count(),
        "scheduler_log_tail": log_tail if args.verbose else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2, help="fleet processes")
    parser.add_argument("--per-channel", type=int, default=100, help="node streams per HTTP/2 connection")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between a node's reports")
    parser.add_argument("--warmup", type=float, default=20.0,
                        help="seconds after all nodes started (a 5,000-node connect storm takes ~15 s to drain here)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window")
    parser.add_argument("--sender", choices=("client", "raw"), default="client",
                        help="client: each node the agent's ReportClient; raw: re-stamped pre-encoded full reports")
    parser.add_argument("--no-deltas", dest="deltas", action="store_false",
                        help="--sender client: full reports only (as before delta reports)")
    parser.add_argument("--metrics-port", type=int, default=19190)
    parser.add_argument("--verbose", action="store_true", help="include the scheduler's last log lines")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra argument for scheduler serve")
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
