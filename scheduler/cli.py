"""``python -m scheduler``: the scheduler's command line.

``simulate`` runs the real scheduler over manifests and prints the result;
bad input exits with status 2 and a message naming the file, the object and
the problem.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime
from typing import TYPE_CHECKING

from proto.errors import InputError
from scheduler.builtins import register_builtins
from scheduler.cycle import tune_gc
from scheduler.framework.snapshot import DEFAULT_SCHEDULER_NAMES
from scheduler.modes.base import Mode
from scheduler.modes.simulator.simulation import load_config_or_default, render_table, simulate

if TYPE_CHECKING:
    from scheduler.history import HistorySaver, HistoryStore, LoadHistory

EXIT_BAD_INPUT = 2
log = logging.getLogger(__name__)


def parse_time(text: str | None) -> datetime:
    """ISO 8601; local time unless it carries an offset; now if not given."""
    if not text:
        return datetime.now().astimezone()
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"--at: invalid time {text!r}: expected ISO 8601 like 2026-11-21T22:30:00") from None
    return stamp if stamp.tzinfo else stamp.astimezone()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scheduler", description="Scoria scheduler")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="schedule manifests with a fixed clock and print the result")
    sim.add_argument("-f", "--filename", action="append", required=True, metavar="FILE",
                     help="YAML/JSON file or folder of them (repeatable)")
    sim.add_argument("--config", metavar="FILE", help="scheduler configuration (Volcano format); default built in")
    sim.add_argument("--at", metavar="ISO8601", help="the fixed clock (local time unless an offset is given)")
    sim.add_argument("--cycles", type=int, metavar="N", help="run exactly N cycles instead of until settled")
    sim.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="schedule pending pods with this spec.schedulerName (repeatable; default: scoria). "
                          "Pods without one are always scheduled; pods naming another scheduler are left alone")
    sim.add_argument("-o", "--output", choices=("json", "table"), default="table")
    srv = sub.add_parser("serve", help="run the scheduler: the agents' gRPC endpoint, metrics and the scheduling loop")
    srv.add_argument("--listen", default=None, metavar="HOST:PORT|unix:PATH",
                     help="agent endpoint (default 127.0.0.1:50051, with --embedded unix:STATE/agent.sock; port 0 "
                          "picks a free one; a unix: socket is made 0600, and only its owner can report)")
    srv.add_argument("--tls-cert", metavar="FILE", help="server certificate (PEM)")
    srv.add_argument("--tls-key", metavar="FILE", help="server private key (PEM)")
    srv.add_argument("--tls-client-ca", metavar="FILE",
                     help="require agent certificates signed by this CA; a certificate's CN or DNS SAN names "
                          "the node it may report for")
    srv.add_argument("--insecure", action="store_true", help="plaintext gRPC (loopback addresses only)")
    srv.add_argument("--insecure-allow-remote", action="store_true",
                     help="allow --insecure, or TLS without --tls-client-ca, on a non-loopback address (anyone "
                          "who can connect can report as any node)")
    srv.add_argument("--register-nodes", action="store_true",
                     help="a report from an unknown node creates the node (standalone and embedded use)")
    srv.add_argument("--stale-intervals", type=int, default=3, metavar="N",
                     help="a node's reports are stale after N of its report intervals without one (default 3)")
    srv.add_argument("--qos-profile", metavar="FILE", help="QoS profile handed to agents (re-read when it changes)")
    srv.add_argument("--config", metavar="FILE", help="scheduler configuration (Volcano format), reloaded on change")
    srv.add_argument("--schedule-interval", type=float, default=1.0, metavar="SECONDS")
    srv.add_argument("--metrics-port", type=int, default=9090, metavar="PORT",
                     help="/metrics and /healthz over HTTP (0: off; default 9090)")
    srv.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDRESS",
                     help="address /metrics and /healthz listen on (default 127.0.0.1; 0.0.0.0 for Prometheus and "
                          "probes from elsewhere)")
    srv.add_argument("--port-file", metavar="FILE",
                     help="write the agent port (or the unix: address) here once listening")
    srv.add_argument("--state-dir", "--state", metavar="DIR",
                     help="keep what must survive a restart here (DIR/history.sqlite: online load learned by time "
                          "of week); without it, that is kept in memory only, or with --kubernetes in an "
                          "annotation on each Node (scoria.io/load-history)")
    srv.add_argument("--history-weeks", type=int, default=4, metavar="N",
                     help="weeks of online load history kept per hour of the week (default 4)")
    emb = srv.add_argument_group("embedded mode (one machine: the cluster in SQLite under --state, pods run by "
                                 "the agent's local runtime)")
    emb.add_argument("--embedded", action="store_true",
                     help="keep pods, groups, queues and bindings in --state DIR/store.sqlite, register nodes "
                          "that report, tell agents what to run, serve the control API for apply/get/...")
    emb.add_argument("--api-socket", metavar="PATH",
                     help="the control API's Unix socket (default STATE/control.sock), 0600: only this user "
                          "(root) may apply, read or delete")
    emb.add_argument("--api-group", metavar="GROUP",
                     help="also let this group's members use the control API (socket 0660 and state folder 0710, "
                          "owned by GROUP); they can run pods, which run as this user")
    emb.add_argument("--agent-state", metavar="DIR",
                     help="the agent's --state: pod logs are read from DIR/logs/<namespace>_<name>_<uid>/, never "
                          "from where a report says (default: --state DIR/agent)")
    emb.add_argument("--web-port", type=int, default=None, metavar="PORT",
                     help="serve the live web view (nodes, pods, queues, plots) on this loopback port (0 picks a free "
                          "one); its address, with the token it asks for, is written to STATE/web.url (0600). "
                          "Default: no web view")
    emb.add_argument("--web-address", default="127.0.0.1", metavar="ADDRESS",
                     help="loopback address of the web view (default 127.0.0.1; ::1 also works; no other)")
    emb.add_argument("--node-monitor-grace-period", type=float, default=40.0, metavar="SECONDS",
                     help="a node whose agent has not reported for this long is Unknown: tainted "
                          "node.kubernetes.io/unreachable, given no new pod, its pods Unknown (default 40, as "
                          "kube-controller-manager's)")
    emb.add_argument("--default-unreachable-toleration-seconds", type=int, default=300, metavar="SECONDS",
                     help="how long a pod stays on an Unknown node before it is evicted, unless its own tolerations "
                          "say otherwise (default 300, as kube-apiserver's)")
    emb.add_argument("--default-not-ready-toleration-seconds", type=int, default=300, metavar="SECONDS",
                     help="the same for a NotReady node (its agent reports but runs no pods) (default 300)")
    emb.add_argument("--pod-cidr", default="10.213.0.0/16", metavar="CIDR",
                     help="the pods' addresses: each pod gets one when bound (its agent gives it a network namespace "
                          "on the bridge scoria0, which holds the range's first address) (default %(default)s)")
    kube = srv.add_argument_group("Kubernetes mode (the cluster's objects from the API server)")
    kube.add_argument("--kubernetes", action="store_true",
                      help="watch the API server and bind through it (else: nodes register by reporting)")
    where = kube.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    where.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    kube.add_argument("--scheduler-name", action="append", metavar="NAME",
                      help="schedule pods with this spec.schedulerName (repeatable; default: scoria)")
    kube.add_argument("--leader-elect", action="store_true",
                      help="run as one of several replicas: only the holder of the Lease schedules")
    kube.add_argument("--lease-name", default="scoria-scheduler", metavar="NAME")
    kube.add_argument("--lease-namespace", default=None, metavar="NS",
                      help="namespace of the Lease (default: $POD_NAMESPACE, else kube-system)")
    kube.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    kube.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS")
    kube.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS")
    kube.add_argument("--kube-qps", type=float, default=50.0, metavar="N",
                      help="requests a second to the API server on average (default 50)")
    kube.add_argument("--kube-burst", type=int, default=100, metavar="N", help="requests at once (default 100)")
    kube.add_argument("--resync", type=float, default=600.0, metavar="SECONDS",
                      help="list every kind again this often, to repair anything a watch missed (default 600)")
    kube.add_argument("--no-job-controllers", action="store_true",
                      help="do not run the Volcano Job and PodGroup controllers (leave batch.volcano.sh Jobs and "
                           "plain workloads' PodGroups to Volcano's own controller-manager)")
    from scheduler.modes.embedded.client import add_commands
    add_commands(sub)
    from scheduler.vcctl.cli import add_commands as add_vcctl_commands
    add_vcctl_commands(sub)
    return parser


def open_history(args: argparse.Namespace,
                 mode_store: HistoryStore | None = None) -> tuple[LoadHistory, HistorySaver | None]:
    """The load history the reports teach, restored from ``--state-dir`` (or, without one, from the
    mode's own store: Kubernetes keeps it on the Nodes) and saved there from a thread.

    A history file that cannot be read is refused (HistoryStoreError, exit 2)
    and left as it is.  Returns the history and its saver, not yet started (None when kept in memory only).
    """
    import time
    from pathlib import Path

    from proto.localsock import private_dir, private_file
    from scheduler.history.learning import LoadHistory
    from scheduler.history.saver import HistorySaver
    from scheduler.history.sqlitestore import SqliteHistoryStore
    from scheduler.intake.server import ServeError

    if not 1 <= args.history_weeks <= 52:
        raise ServeError("--history-weeks: must be 1-52")
    history = LoadHistory(weeks=args.history_weeks)
    if not args.state_dir and mode_store is not None:
        try:
            records = mode_store.load()
        except Exception as exc:  # no API server to start from: say so and stop (the Deployment restarts us)
            raise ServeError(f"cannot read the load history from the API server: {exc}") from None
        kept = history.restore(records, time.time())
        log.info("load history: %d node-week(s) restored from %s", kept, mode_store.location)
        return history, HistorySaver(history, mode_store)
    if not args.state_dir:
        log.warning("no --state-dir: the online load history learned from reports is kept in memory only "
                    "and starts empty after a restart")
        return history, None
    state = private_dir(Path(args.state_dir), group=api_group(args))
    files = [state / f"history.sqlite{end}" for end in ("", "-wal", "-shm")]
    for path in files:  # 0600, an earlier version's too
        private_file(path)
    store = SqliteHistoryStore(state / "history.sqlite")
    for path in files:
        private_file(path)
    kept = history.restore(store.load(), time.time())
    log.info("load history: %d node-week(s) restored from %s", kept, store.location)
    return history, HistorySaver(history, store)


def api_group(args: argparse.Namespace) -> int | None:
    """The group ``--api-group`` grants the control API to (its id), None when none is."""
    from proto.localsock import group_id
    from scheduler.intake.server import ServeError

    if not getattr(args, "api_group", None):
        return None
    if not args.embedded:
        raise ServeError("--api-group is for --embedded (the control API)")
    return group_id(args.api_group)


def agent_listen(args: argparse.Namespace) -> str:
    """Where agents connect: --listen, else in embedded mode a Unix socket in the state folder (only the
    scheduler's user, root, can report), else 127.0.0.1:50051."""
    from pathlib import Path

    from scheduler.intake.server import ServeError

    if args.listen:
        listen = args.listen
    elif args.embedded and args.state_dir:
        from scheduler.modes.embedded.mode import EmbeddedMode
        listen = f"unix:{Path(args.state_dir).resolve() / EmbeddedMode.AGENT_SOCKET}"
    else:
        listen = "127.0.0.1:50051"
    if args.embedded and not listen.startswith("unix:") and not args.tls_client_ca:
        raise ServeError(f"--embedded on {listen} without --tls-client-ca would let any local user report as a "
                         "node and receive its pods' START directives (secrets included): leave --listen out "
                         "(agents then use unix:STATE/agent.sock) or require agent certificates")
    return listen


def select_mode(args: argparse.Namespace) -> Mode:
    """The one place ``serve``'s flags pick a run mode; nothing starts here."""
    from pathlib import Path

    from scheduler.intake.server import ServeError

    if args.embedded and not args.state_dir:
        raise ServeError("--embedded needs --state DIR (where the cluster is kept)")
    if args.embedded and args.kubernetes:
        raise ServeError("--embedded and --kubernetes exclude each other")
    group = api_group(args)
    if args.embedded:
        from scheduler.modes.embedded.lifecycle import LifecycleConfig
        from scheduler.modes.embedded.mode import EmbeddedMode
        if not args.node_monitor_grace_period > 0:
            raise ServeError("--node-monitor-grace-period: must be more than 0 seconds")
        for flag in ("default_unreachable_toleration_seconds", "default_not_ready_toleration_seconds"):
            if getattr(args, flag) < 0:
                raise ServeError(f"--{flag.replace('_', '-')}: must be 0 or more seconds")
        lifecycle = LifecycleConfig(args.node_monitor_grace_period, args.default_not_ready_toleration_seconds,
                                    args.default_unreachable_toleration_seconds)
        if args.web_port is not None:
            from scheduler.modes.embedded.web import check_address
            check_address(args.web_address)
        return EmbeddedMode(Path(args.state_dir), api_socket=Path(args.api_socket) if args.api_socket else None,
                            api_group=group, agent_state=Path(args.agent_state) if args.agent_state else None,
                            lifecycle=lifecycle, web_port=args.web_port, web_address=args.web_address,
                            pod_cidr=args.pod_cidr)
    if args.web_port is not None:
        raise ServeError("--web-port is for --embedded (the web view shows its store)")
    if args.kubernetes:
        from scheduler.modes.kubernetes import mode as kubernetes
        client = kubernetes.api_client(kubeconfig=args.kubeconfig, in_cluster=args.in_cluster)
        names = args.scheduler_name or sorted(DEFAULT_SCHEDULER_NAMES)
        return kubernetes.KubernetesMode(
            client, scheduler_names=tuple(names), qps=args.kube_qps, burst=args.kube_burst, resync=args.resync,
            leader_elect=args.leader_elect, lease_name=args.lease_name, lease_namespace=args.lease_namespace,
            lease_duration=args.lease_duration, renew_deadline=args.renew_deadline, retry_period=args.retry_period,
            controllers=not args.no_job_controllers)
    return Mode(register_nodes=args.register_nodes)


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio
    import threading
    from pathlib import Path

    from proto.httpd import start_http
    from proto.localsock import check_socket_free, unix_path
    from proto.ports import check_port
    from scheduler.cluster.cache import ClusterCache
    from scheduler.cycle import Scheduler
    from scheduler.intake.reports import ProfileSource, ReportIntake
    from scheduler.intake.server import AgentServer, ServeError, TlsFiles, check_listen, serve_forever
    from scheduler.metrics import SchedulerMetrics
    from scheduler.modes.embedded.mode import EmbeddedMode
    from scheduler.statelock import hold_state

    if bool(args.tls_cert) != bool(args.tls_key):
        raise ServeError("--tls-cert and --tls-key go together")
    if args.tls_client_ca and not args.tls_cert:
        raise ServeError("--tls-client-ca needs --tls-cert and --tls-key")
    if args.stale_intervals < 1:
        raise ServeError("--stale-intervals: must be at least 1")
    # what serve writes (store, history, sockets, port files) is its user's alone unless it says otherwise
    os.umask(0o077)
    listen = agent_listen(args)
    mode = select_mode(args)
    # one scheduler per state folder, held before anything in it is read or changed
    lock = hold_state(Path(args.state_dir), group=api_group(args)) if args.state_dir else None
    # every port and socket checked before anything starts: one taken is one line naming the flag that changes it
    if not listen.startswith("unix:"):
        check_listen(listen)
    elif (agent_socket := unix_path(listen)) is not None:
        check_socket_free(agent_socket, "--listen")
    if isinstance(mode, EmbeddedMode):
        check_socket_free(mode.api_socket, "--api-socket")
        if mode.web_port:
            check_port(mode.web_address, mode.web_port, flag="--web-port", also=" (0 picks a free one)")
    if args.metrics_port:
        check_port(args.metrics_address, args.metrics_port, flag="--metrics-port",
                   also=" (0 turns it off), or --metrics-address ADDRESS")
    # Thousands of reports a second churn short-lived objects on top of the cycles': collect young ones
    # less often still, or full collections of the whole cache pause report latency by 100+ ms.
    tune_gc(50_000, 20, 100)
    tls = TlsFiles(Path(args.tls_cert), Path(args.tls_key),
                   Path(args.tls_client_ca) if args.tls_client_ca else None) if args.tls_cert else None
    cache = ClusterCache()
    cache.stale_intervals = args.stale_intervals
    stop = threading.Event()
    cache.history, saver = open_history(args, mode.history_store())
    metrics = SchedulerMetrics()
    effects = mode.start(cache, stop, metrics)
    names = frozenset(args.scheduler_name or DEFAULT_SCHEDULER_NAMES)
    scheduler = Scheduler(cache, config_path=args.config, scheduler_names=names, metrics=metrics, effects=effects)
    profiles = ProfileSource(args.qos_profile) if args.qos_profile else None
    intake = ReportIntake(cache, scheduler.metrics, register_nodes=mode.register_nodes, profiles=profiles,
                          accepting=mode.leading, pod_actions=mode.pod_actions())
    mode.attach(scheduler)
    server = AgentServer(intake, listen=listen, tls=tls, insecure=args.insecure,
                         allow_insecure_remote=args.insecure_allow_remote)
    if args.metrics_port:
        start_http(scheduler.metrics.registry, args.metrics_port, host=args.metrics_address, ready=mode.ready)
    loop_thread = threading.Thread(target=scheduler.run, name="schedule", daemon=True,
                                   kwargs={"interval": args.schedule_interval, "stop": stop, "active": mode.leading,
                                           "early": mode.early_cycles})
    loop_thread.start()

    def started(port: int) -> None:
        where = listen if server.unix_path else str(port)
        print(f"scoria scheduler: agents on {listen if server.unix_path else f'port {port}'}", file=sys.stderr,
              flush=True)
        if args.port_file:
            Path(args.port_file).write_text(f"{where}\n")

    if saver is not None:
        saver.start()
    try:
        asyncio.run(serve_forever(server, intake, on_started=started))
    finally:
        stop.set()
        loop_thread.join(timeout=5)
        mode.close(scheduler)
        if saver is not None:
            saver.stop()
        if lock is not None:
            lock.release()
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.cycles is not None and args.cycles < 1:
        raise InputError("--cycles: must be at least 1")
    at = parse_time(args.at)
    config = load_config_or_default(args.config)
    sim = simulate(args.filename, config=config, at=at, cycles=args.cycles,
                   scheduler_names=args.scheduler_name or DEFAULT_SCHEDULER_NAMES)
    if args.output == "json":
        json.dump(sim.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render_table(sim))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    tune_gc()
    register_builtins()
    try:
        if args.command == "simulate":
            return cmd_simulate(args)
        if args.command == "serve":
            return cmd_serve(args)
        if args.command in ("apply", "get", "describe", "logs", "delete", "top"):
            from scheduler.modes.embedded.client import run
            return run(args)
        if args.command in ("job", "queue"):
            from scheduler.vcctl.cli import run as run_vcctl
            return run_vcctl(args)
    except InputError as exc:  # bad input is one line; anything else is a bug and stays a traceback
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into head(1) and the like
        sys.stderr.close()
        return 0
    return 1
