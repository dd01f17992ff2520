"""``python -m agent``: print this node's report, or run the agent.

``report --once -o json`` samples the host briefly and prints the protocol's
NodeReport in its JSON form; ``run`` runs the fast and slow loops, serves
``/metrics`` and ``/healthz``, and streams reports to the scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.kubernetes.kubelet import TOPOLOGY_POLICIES, topology_policy_source
from proto import codec
from proto.errors import InputError

if TYPE_CHECKING:
    from agent.cgroups.backend import Backend
    from agent.cgroups.layout import Layout
    from agent.client import ReportClient
    from agent.hostpaths import HostPaths
    from agent.loop import Agent
    from agent.mode import Mode, ModeContext
    from proto.model import Devices, Directive, NodeReport

log = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
READY_TIMEOUT = 30.0  # how long the agent waits for its mode's pod inventory before it starts anyway


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent", description="Scoria node agent")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--node-name", default=os.environ.get("NODE_NAME") or socket.gethostname().lower())
        p.add_argument("--host-root", default="/", help="where the host's /sys and /proc are (DaemonSet: /host)")
        p.add_argument("--cgroup-root", help="the host's cgroup root (default: <host-root>/sys/fs/cgroup)")
        p.add_argument("--profile", metavar="FILE", help="QoS profile YAML (a mounted ConfigMap), reloaded on change")
        p.add_argument("--pods-from", choices=("cgroups", "kubernetes", "none"), default=None,
                       help="pod inventory: the kubelet's pod cgroups (default), the API server, or none "
                            "(--embedded: the local runtime's)")
        p.add_argument("--kubeconfig", help="with --pods-from kubernetes (default: in-cluster)")
        p.add_argument("--no-devices", action="store_true", help="do not ask NVML or npu-smi")
        p.add_argument("--node-labels", default="", metavar="K=V,...",
                       help="labels selecting the profile's node overrides (added to the Node's own with "
                            "--pods-from kubernetes)")
        p.add_argument("--kubelet-config", metavar="PATH",
                       help="the kubelet's KubeletConfiguration file, read for topologyManagerPolicy "
                            "(default: <host-root>/var/lib/kubelet/config.yaml)")
        p.add_argument("--topology-policy", choices=TOPOLOGY_POLICIES,
                       help="the kubelet's topology manager policy, overriding the kubelet configuration file")

    rep = sub.add_parser("report", help="print this node's report")
    rep.add_argument("--once", action="store_true", required=True)
    rep.add_argument("-o", "--output", choices=("json",), default="json")
    rep.add_argument("--sample", type=float, default=0.5, metavar="SECONDS",
                     help="how long to measure usage before reporting (default 0.5)")
    common(rep)

    run = sub.add_parser("run", help="run the agent")
    common(run)
    run.add_argument("--scheduler", metavar="HOST:PORT|unix:PATH",
                     help="the scheduler's agent endpoint (omit: no streaming); embedded mode: "
                          "unix:STATE/agent.sock, the scheduler's socket only root can open")
    run.add_argument("--ca", help="CA of the scheduler's certificate (TLS)")
    run.add_argument("--cert", help="this node's client certificate (mTLS)")
    run.add_argument("--key", help="this node's client key (mTLS)")
    run.add_argument("--server-name", help="name expected in the scheduler's certificate")
    run.add_argument("--insecure", action="store_true", help="plaintext to the scheduler")
    run.add_argument("--interval", type=float, default=1.0, help="slow loop and report interval (default 1 s)")
    run.add_argument("--fast-interval", type=float, default=0.025, help="suppression loop interval (default 25 ms)")
    run.add_argument("--metrics-port", type=int, default=9100, help="/metrics and /healthz (0: off)")
    run.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDRESS",
                     help="address /metrics and /healthz listen on (default 127.0.0.1; the DaemonSet passes 0.0.0.0)")
    run.add_argument("--dry-run", action="store_true", help="observe and report; write no cgroup, evict nothing")
    run.add_argument("--cgroup-parent", metavar="PATH",
                     help="manage pods under this cgroup (PATH/online, PATH/offline) instead of the kubelet's "
                          "(--embedded: default scoria)")
    run.add_argument("--embedded", action="store_true",
                     help="embedded mode: run the pods the scheduler binds here as local processes in cgroups "
                          "under --cgroup-parent (implies the local runtime as the pod inventory)")
    run.add_argument("--state", metavar="DIR", help="--embedded: the local runtime's pod records and logs")
    run.add_argument("--shutdown-grace", type=float, default=10.0, metavar="SECONDS",
                     help="--embedded: on SIGINT/SIGTERM each pod gets at most this long to stop (default 10)")
    run.add_argument("--pod-network", choices=("isolated", "host"), default="isolated",
                     help="--embedded: isolated (default): each pod not asking for hostNetwork gets a network "
                          "namespace of its own with the address the scheduler gave it, on the bridge scoria0 "
                          "(needs root and iproute2); host: every pod on this machine's network, its names "
                          "meaning 127.0.0.1")
    return parser


@dataclass(frozen=True)
class ModeChoice:
    """The run mode the command line asks for, before anything of it is made."""

    name: str                                  # embedded, kubernetes, cgroups, none
    cgroup_parent: str | None                  # the cgroup its pods live under; None: the kubelet's, detected
    build: Callable[[ModeContext], Mode]


def pick_mode(args: argparse.Namespace, *, enforce: bool) -> ModeChoice:
    """The one place the mode is chosen from the flags; InputError for flags that do not go together."""
    from agent.embedded.mode import EmbeddedMode
    from agent.kubernetes.mode import KubernetesMode, connect
    from agent.mode import HostMode
    from agent.pods import CgroupPodSource, StaticPodSource

    cgroup_parent = getattr(args, "cgroup_parent", None)  # ``run`` only
    if getattr(args, "embedded", False):
        _check_embedded(args, enforce)
        return ModeChoice("embedded", cgroup_parent or "scoria",
                          lambda context: EmbeddedMode(context, state_dir=args.state,
                                                       shutdown_grace=args.shutdown_grace,
                                                       pod_network=args.pod_network))
    if args.pods_from == "kubernetes":
        return ModeChoice("kubernetes", cgroup_parent,
                          lambda context: KubernetesMode(context, core_v1=connect(args.kubeconfig)))
    if args.pods_from in (None, "cgroups"):
        return ModeChoice("cgroups", cgroup_parent,
                          lambda context: HostMode(context, pods=CgroupPodSource(context.layout)))
    return ModeChoice("none", cgroup_parent, lambda context: HostMode(context, pods=StaticPodSource()))


def make_agent(args: argparse.Namespace, *, enforce: bool, publish: Callable[[NodeReport], None] | None = None,
               stop: threading.Event | None = None) -> tuple[Agent, Mode]:
    """The agent the flags describe, with its mode built and started (ready, or given up on after 30 s, or as
    soon as ``stop`` is set)."""
    from agent.cgroups.backend import detect_backend
    from agent.collectors.load import read_cpu_ticks
    from agent.hostpaths import HostPaths
    from agent.labels import NodeLabels, parse_labels
    from agent.loop import Agent, AgentConfig
    from agent.metrics import AgentMetrics
    from agent.mode import ModeContext
    from agent.profile import ProfileWatcher

    choice = pick_mode(args, enforce=enforce)
    paths = HostPaths.under(args.host_root)
    if args.cgroup_root:
        paths = HostPaths(paths.sys, paths.proc, Path(args.cgroup_root))
    backend = detect_backend(paths)
    read_cpu_ticks(paths)  # a --host-root without a readable /proc/stat: one line now, not a loop failing each tick
    layout = _layout(backend, choice.cgroup_parent, enforce=enforce)
    metrics = AgentMetrics()
    profiles = ProfileWatcher(args.profile, on_result=lambda r: metrics.profile_reloads.labels(r).inc())
    labels = NodeLabels(parse_labels(args.node_labels))
    mode = choice.build(ModeContext(args.node_name, paths, backend, layout, metrics, labels, enforce))
    mode.start()
    deadline = time.monotonic() + READY_TIMEOUT
    while not mode.ready(min(0.2, max(0.0, deadline - time.monotonic()))):
        if (stop is not None and stop.is_set()) or time.monotonic() >= deadline:
            break
    devices = None if args.no_devices else _devices(paths)
    pace = {"fast_interval": args.fast_interval, "slow_interval": args.interval} if args.command == "run" else {}
    config = AgentConfig(args.node_name, enforce=enforce, **pace)
    policy = topology_policy_source(args.host_root, args.kubelet_config, args.topology_policy)
    agent = Agent(config, paths=paths, backend=backend, layout=layout, pods=mode.pods, profiles=profiles,
                  evictor=mode.evictor, metrics=metrics, devices=devices, publish=publish,
                  node_labels=mode.node_labels, taint=mode.taint, topology_policy=policy,
                  node_resources=mode.node_resources, runtime=mode.runtime, executor=mode.executor)
    return agent, mode


def _layout(backend: Backend, cgroup_parent: str | None, *, enforce: bool) -> Layout:
    from agent.cgroups.layout import FixedLayout, NoLayout, detect_layout
    if cgroup_parent:
        return FixedLayout(backend, cgroup_parent)
    try:
        return detect_layout(backend)
    except FileNotFoundError as exc:
        if enforce:  # acting on pods needs the kubelet's tree, or --cgroup-parent naming ours
            raise InputError(f"{exc} (or give --cgroup-parent)") from None
        return NoLayout(backend)  # observing a host without a kubelet: node figures only


def _check_embedded(args: argparse.Namespace, enforce: bool) -> None:
    if args.pods_from is not None:
        raise InputError("--embedded takes its pods from the local runtime: drop --pods-from")
    if not args.state:
        raise InputError("--embedded needs --state DIR (the local runtime's pod records and logs)")
    if not enforce:
        raise InputError("--embedded runs pods in cgroups: it cannot be a --dry-run")
    if args.shutdown_grace < 0:
        raise InputError(f"--shutdown-grace must be >= 0, got {args.shutdown_grace:g}")


def _devices(paths: HostPaths) -> Callable[[], Devices]:
    from agent.collectors.gpu import GpuCollector, pod_of_pid_from_cgroup
    from agent.collectors.npu import NpuCollector
    from proto.model import Devices
    pod_of_pid = pod_of_pid_from_cgroup(paths)
    gpus, npus = GpuCollector(paths, pod_of_pid=pod_of_pid), NpuCollector(pod_of_pid=pod_of_pid)
    return lambda: Devices(gpus.collect(), npus.collect())


def cmd_report(args: argparse.Namespace) -> int:
    agent, mode = make_agent(args, enforce=False)
    try:
        agent.observe()  # usage is a rate: a first reading, then the report after the sample window
        time.sleep(max(0.05, args.sample))
        report = agent.slow_tick()
    finally:
        mode.shutdown()
    json.dump(codec.report_to_json(report), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def cmd_run(args: argparse.Namespace, requested: threading.Event | None = None) -> int:
    """Run until SIGINT/SIGTERM (``requested``: set by them, however early), then stop the mode's pods."""
    from agent.client import ClientOptions, ReportClient
    from proto.httpd import start_http
    from proto.ports import check_port

    requested = requested or threading.Event()
    hold_signals(requested)  # (python -m agent holds them from its first moment)

    client: ReportClient | None = None
    handlers: list[Callable[[Directive], None]] = []  # directives' receivers (filled once the mode exists)

    def on_directive(directive: Directive) -> None:
        for handle in handlers:
            handle(directive)

    if args.scheduler:
        options = ClientOptions(args.scheduler, interval=args.interval, ca=_path(args.ca), cert=_path(args.cert),
                                key=_path(args.key), server_name=args.server_name, insecure=args.insecure)
        if not args.insecure and options.ca is None and not args.scheduler.startswith("unix:"):
            raise InputError("--scheduler needs --ca (TLS) or --insecure, or a unix: socket")
        client = ReportClient(options, on_directive=on_directive)
    if args.metrics_port:  # before the mode starts (and adopts pods): a taken port must not cost them a restart
        check_port(args.metrics_address, args.metrics_port, flag="--metrics-port",
                   also=" (0 turns it off), or --metrics-address ADDRESS")
    agent, mode = make_agent(args, enforce=not args.dry_run, publish=client.publish if client else None,
                             stop=requested)
    handlers.append(mode.on_directive)  # embedded: START/STOP/EVICT pod actions

    def take_profile(directive: Directive) -> None:  # the scheduler's --qos-profile, applied by the slow tick
        if directive.qos_profile is not None:
            agent.profiles.offer(directive.qos_profile.name, directive.qos_profile.yaml)

    handlers.append(take_profile)
    health = {"last": time.monotonic()}
    stop = threading.Event()
    control = None

    def after_slow() -> None:
        health["last"] = time.monotonic()

    try:  # a Ctrl-C or SIGTERM, however early, ends in the mode's shutdown (its pods stopped, cgroups removed)
        if requested.is_set():
            log.warning("asked to stop while starting: stopping what was started and adopted")
            return 0
        if args.metrics_port:
            start_http(agent.metrics.registry, args.metrics_port, host=args.metrics_address,
                       healthy=lambda: time.monotonic() - health["last"] < 10 * args.interval + 5)
        control = threading.Thread(target=agent.run, args=(stop, after_slow), name="agent-loops", daemon=True)
        control.start()
        asyncio.run(_serve(client, stop, requested))
    except KeyboardInterrupt:  # SIGINT where no handler of ours was in place (not the main thread)
        pass
    finally:
        hold_signals(requested)  # the event loop gave the signals back to their defaults: none may kill us now
        stop.set()
        if control is not None:
            control.join(timeout=10)
        mode.shutdown()
    return 0


def hold_signals(requested: threading.Event) -> None:
    """SIGINT and SIGTERM set ``requested`` (a request to stop, acted on where it is safe) instead of
    ending the process wherever it is: start-up finishes adopting and starting, then stops as any shutdown."""
    import signal

    def request(*_: object) -> None:
        requested.set()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, request)
        except ValueError:  # not the main thread (tests)
            pass


async def _serve(client: ReportClient | None, stop: threading.Event, requested: threading.Event) -> None:
    """The asyncio side: stream to the scheduler until SIGINT/SIGTERM (the loops run on their own thread)."""
    import signal
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, done.set)
        except (NotImplementedError, RuntimeError):
            pass
    if requested.is_set():  # asked before the loop took the signals over
        done.set()
    task = asyncio.create_task(client.run(done)) if client is not None else None
    await done.wait()
    stop.set()
    if task is not None:
        await asyncio.gather(task, return_exceptions=True)


def _take_signals_over(requested: threading.Event, *, run: bool) -> None:
    import signal
    if run:
        hold_signals(requested)
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def main(argv: list[str] | None = None, *, early: list[int] | None = None) -> int:
    """``early``: signals received before this ran (``python -m agent`` keeps them from its first moment)."""
    args = build_parser().parse_args(argv)
    requested = threading.Event()
    if early is not None:  # run: a stop request from now on, the early ones included; report: as usual again
        _take_signals_over(requested, run=args.command == "run")
        if early and args.command != "run":
            return 128 + early[0]
        if early:
            requested.set()
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return cmd_report(args) if args.command == "report" else cmd_run(args, requested)
    except InputError as exc:  # bad input is one line; anything else (a FileNotFoundError too) is a bug: a traceback
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
