#!/usr/bin/env python3
"""Co-location on this machine's real cgroups: online latency, offline throughput, CPU use, reaction.

Everything runs under a private cgroup parent ``scoria-colo-<random>`` (removed
at the end, its processes killed, also on Ctrl-C, SIGTERM or an error)::

    <parent>/node/online/podweb     the online service: a stdlib ThreadingHTTPServer whose
                                    handler does --work-ms of pure-Python work per request
    <parent>/node/offline/podbatch  --hogs offline CPU hogs counting the work they get done
    <parent>/client                 the load generator (outside the pods: it plays the users,
                                    who are not on this node; the agent sees it as system CPU)
    <parent>/agent                  the real agent, ``python -m agent run --cgroup-parent
                                    <parent>/node`` (FixedLayout; podweb is LS, podbatch BE)

The load generator is open loop: Poisson arrivals at --rate (seeded; the same
arrival sequence in every phase), over a pool of keep-alive connections, each
latency counted from the request's *scheduled* time, so queueing anywhere
(client included) counts and nothing is omitted.  Three phases of equal length
follow each other in one run, with the traffic running throughout:

    (a) the online service alone;
    (b) the same plus the hogs, equal cgroup shares (1024 each), no quota, no agent;
    (c) the same with the agent's QoS (cpu.idle on the offline parent and pod; the CFS quota
        on the offline parent, open until online signals call for a clamp; the fast loop),
        using --profile (the shipped profile, with --threshold and --set changes).

In every phase --bursts-per-phase bursts of --burst-requests requests arrive at
the same offsets; in (c) each is timed from its scheduled start until the
offline quota has dropped by --reaction-drop of the node (polled every ms, as
hack/bench/qos_reaction.py does; an open quota counts as the whole node).  Latency
is reported for the steady stream outside the bursts' shadows (the goal's figure)
and for every request.  CPU utilisation comes from /proc/stat; per-cgroup CPU from
cpuacct.  Prints one JSON line, its ``summary`` holding the issue's figures
(utilisation in (c), online p99 (c)/(a), offline work (c)/(b), reaction p99);
needs root and cgroup v1 or v2 with the cpu controller::

    sudo .venv/bin/python hack/bench/colocation.py [--phase-seconds 20] [--rate 200] [--work-ms 1.5]
    sudo .venv/bin/python hack/bench/colocation.py --set cpu.onlineRisePercent=10 --set cpu.clampHold=500ms

``--cgroup-version 2`` on a machine whose cgroup root is not v2 with the cpu controller (a v1 or
hybrid host, as this project's development VM) cannot measure anything on v2: there is no v2 CPU
scheduling to measure.  It then runs the real agent against a cgroup v2 *fixture tree* in the same
layout, plays the kernel's counters through phases (a)–(c), and checks only what the agent writes
(``cpu.idle``, ``cpu.max`` open and clamped on an online rise, open again): see :mod:`colocation_v2`.

This file is the orchestration (cgroups, processes, the phases, the measuring), the report and the
command line.  The parts the demo and the tests can use too are in hack/lib: the online service
(online.py), the hogs' work (cpuwork.py), the load generator (loadgen.py), the percentiles
(stats.py).  The server, the hogs and the load generator run as this file re-executed with a role
name (``_server``, ``_hog``, ``_client``), so that every process the benchmark starts names it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from hack.lib import loadgen, stats  # noqa: E402 — the repository's own helpers (hack/lib), as the demo uses them

SELF = str(Path(__file__).resolve())


# -- child roles (this file re-executed, so that every process it starts names it) -------------------

def _role(name: str, rest: list[str]) -> None:
    """Run as child role ``name``; each imports only what it needs (the hogs start many at once)."""
    if name == "_server":
        from hack.lib.online import serve_fixed_work
        serve_fixed_work(float(rest[0]), int(rest[1]))
    elif name == "_hog":
        from hack.lib.cpuwork import hog
        hog(rest[0], int(rest[1]), int(rest[2]))
    elif name == "_client":
        loadgen.run_client(int(rest[0]), float(rest[1]), int(rest[2]), rest[3])


# -- the benchmark ------------------------------------------------------------------------------------

PHASES = ("a", "b", "c")
STAT_BUSY = (0, 1, 2, 5, 6)  # /proc/stat cpu: user nice system [idle iowait] irq softirq [steal]
HOG_UNIT = 1000              # spin() iterations per counted unit of offline work


def _die_with_parent() -> None:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphans if we are killed


class Bench:
    def __init__(self, args: argparse.Namespace):
        import tempfile
        import uuid

        from agent.cgroups.backend import detect_backend
        from agent.cgroups.layout import FixedLayout
        from agent.hostpaths import HostPaths
        self.args = args
        self.backend = detect_backend(HostPaths())
        self.parent = f"scoria-colo-{uuid.uuid4().hex[:10]}"
        self.layout = FixedLayout(self.backend, f"{self.parent}/node")
        self.groups = {"online": self.layout.pod_path("web", "Burstable"),
                       "offline": self.layout.pod_path("batch", "BestEffort"),
                       "client": f"{self.parent}/client", "agent": f"{self.parent}/agent"}
        self.procs: list[subprocess.Popen] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="scoria-colo-"))
        self.counters = self.tmp / "offline-counters"
        self.client: subprocess.Popen | None = None
        self.agent: subprocess.Popen | None = None
        self.metrics_port = 0
        self.reactions: list[float] = []
        self.missed = self.skipped = 0
        self.floor = 0.0
        self.hogs: list[subprocess.Popen] = []
        self.knobs_b: list[dict] = []
        self.thresholds: set[float] = set()
        self.quotas: list[tuple[float, int | None]] = []

    # -- processes ------------------------------------------------------------------------------
    def spawn(self, argv: list[str], group: str, **popen) -> subprocess.Popen:
        from agent.cgroups.tree import attach
        p = subprocess.Popen(argv, preexec_fn=_die_with_parent, start_new_session=True, cwd=ROOT, **popen)
        self.procs.append(p)
        attach(self.backend, group, p.pid)
        return p

    def role(self, *args, group: str, **popen) -> subprocess.Popen:
        return self.spawn([sys.executable, SELF, *map(str, args)], group, **popen)

    def command(self, line: str) -> None:
        try:
            self.client.stdin.write(line + "\n")
            self.client.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the load generator exited ({self.client.poll()}): {self.log_tail('client')}") from None

    def log_tail(self, name: str) -> str:
        try:
            return (self.tmp / f"{name}.log").read_text()[-2000:]
        except OSError:
            return ""

    def start(self) -> tuple[int, int, float]:
        from agent.cgroups.tree import make_group
        for group in self.groups.values():
            make_group(self.backend, group)
        a = self.args
        with open(self.tmp / "server.log", "w") as log:  # the child has its own descriptor: ours can close now
            server = self.role("_server", a.work_ms, a.connections, group=self.groups["online"], stdout=subprocess.PIPE,
                               stderr=log, text=True)
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError(f"the online server did not start ({server.poll()}): {self.log_tail('server')}")
        port, iterations, work_ms = int(ready[1]), int(ready[2]), float(ready[3])
        with open(self.tmp / "client.log", "w") as log:
            self.client = self.role("_client", port, a.rate, a.connections, self.tmp / "latencies",
                                    group=self.groups["client"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                    text=True)
        if a.client_cpu is not None:
            os.sched_setaffinity(self.client.pid, {a.client_cpu})
        if self.client.stdout.readline().strip() != "READY":
            raise RuntimeError(f"the load generator did not start ({self.client.poll()}): {self.log_tail('client')}")
        self.command(loadgen.reseed(time.monotonic() + 0.05, a.seed + 1000))  # traffic from now on
        return port, iterations, work_ms

    def start_hogs(self) -> None:
        """The hogs, stopped (SIGSTOP) until the first phase (b)."""
        self.counters.write_bytes(bytes(8 * self.args.hogs))
        for i in range(self.args.hogs):
            self.hogs.append(self.role("_hog", self.counters, i, HOG_UNIT, group=self.groups["offline"],
                                       stdout=subprocess.DEVNULL))
        self.signal_hogs(signal.SIGSTOP)

    def signal_hogs(self, sig: int) -> None:
        for p in self.hogs:
            p.send_signal(sig)

    def enter(self, name: str) -> None:
        """Bring the node into phase ``name``'s state, then let it settle (not measured)."""
        if name == "a":
            self.stop_agent()
            self.signal_hogs(signal.SIGSTOP)
        elif name == "b":
            self.stop_agent()
            self.signal_hogs(signal.SIGCONT)
            self.knobs_b.append(self.plain_knobs())
        else:
            self.start_agent()
            self.thresholds.add(_threshold(self.args.profile))
        time.sleep(self.args.settle)

    def stop_agent(self) -> None:
        """The agent gone and what it wrote undone: equal shares, no idle, no quota."""
        if self.agent is None:
            return
        self.agent.terminate()
        try:
            self.agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.agent.kill()
            self.agent.wait()
        self.agent = None
        parent = self.layout.offline_parent
        for group, knob, value in ((self.groups["offline"], "cpu.idle", 0), (parent, "cpu.idle", 0),
                                   (parent, "cpu.shares", 1024), (parent, "cpu.quota", None)):
            if self.knob(group, knob) is not None or knob == "cpu.quota":
                self.backend.write(group, knob, value)

    def start_agent(self) -> None:
        from hack.lib.processes import free_port
        self.metrics_port = free_port()
        with open(self.tmp / "agent.log", "w") as log:  # the child has its own descriptor: ours can close now
            self.agent = self.spawn(
                [sys.executable, "-m", "agent", "run", "--node-name", "colocation-bench", "--cgroup-parent",
                 f"{self.parent}/node", "--pods-from", "cgroups", "--no-devices", "--profile", self.args.profile,
                 "--metrics-port", str(self.metrics_port), "--fast-interval", str(self.args.fast_interval)],
                self.groups["agent"], stdout=subprocess.DEVNULL, stderr=log)
        self.floor = os.cpu_count() * 1000 * _cpu_settings(self.args.profile).offline_floor_percent / 100
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the agent has applied its QoS: cpu.idle and a quota
            if self.agent.poll() is not None:
                raise RuntimeError(f"the agent exited: {self.log_tail('agent')}")
            # its first slow tick done: the offline pod idle, and the quota set (open, -1, where it clamps only
            # on online signals; then the offline parent is made idle in the same tick)
            parent_idle = self.knob(self.layout.offline_parent, "cpu.idle") == 1
            if self.knob(self.groups["offline"], "cpu.idle") == 1 and (self.quota() is not None or parent_idle):
                return
            time.sleep(0.05)
        raise RuntimeError("the agent did not apply its QoS within 60 s")

    def knob(self, group: str, knob: str):
        try:
            return self.backend.read(group, knob)
        except Exception:  # noqa: BLE001 — a knob this kernel lacks reads as None
            return None

    def quota(self) -> int | None:
        return self.knob(self.layout.offline_parent, "cpu.quota")

    def quota_in_c(self) -> int | None:
        """The offline quota while the agent runs, an open one (no limit) as the whole node; None before."""
        q = self.quota()
        return q if q is not None or self.agent is None else os.cpu_count() * 1000

    def plain_knobs(self) -> dict:
        """What phase (b) runs with (checked, not assumed): equal shares, no idle, no quota."""
        g, parent = self.groups, self.layout.offline_parent
        return {"online_shares": self.knob(g["online"], "cpu.shares"), "offline_shares": self.knob(g["offline"], "cpu.shares"),
                "offline_idle": self.knob(g["offline"], "cpu.idle"), "offline_parent_shares": self.knob(parent, "cpu.shares"),
                "offline_parent_idle": self.knob(parent, "cpu.idle"), "offline_quota": self.quota()}

    # -- measuring ------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        import struct
        with open("/proc/stat") as f:
            stat = [int(x) for x in f.readline().split()[1:9]]
        usage = {name: _cpu_ns(self.backend, group) for name, group in self.groups.items()}
        usage["all"] = _cpu_ns(self.backend, self.parent)
        # each hog's count of units done (a list, so that a count going back shows in the report)
        work = list(struct.unpack(f"{self.args.hogs}Q", self.counters.read_bytes())) if self.counters.exists() \
            else [0] * self.args.hogs
        return {"t": time.monotonic(), "stat": stat, "usage": usage, "work": work,
                "throttle": _cpu_stat(self.backend, self.layout.offline_parent), "agent": self.agent_metrics()}

    def agent_metrics(self) -> dict:
        if not self.metrics_port or self.agent is None:
            return {}
        from hack.lib.processes import scrape
        try:
            return scrape(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2)
        except OSError:
            return {}

    def phase(self, name: str, round_: int) -> dict:
        """One round's part of phase ``name``: its traffic and bursts, measured."""
        a = self.args
        length, n_bursts = a.phase_seconds / a.rounds, a.bursts_per_phase // a.rounds
        start = time.monotonic() + 0.1
        end = start + length
        bursts = [start + (k + 0.5) * length / n_bursts for k in range(n_bursts)]
        # the same arrivals, relative to its start, in the three phases of a round; others between them
        self.command(loadgen.reseed(start, a.seed * 1000 + round_))
        self.command(loadgen.reseed(end, a.seed * 1000 + 500 + 3 * round_ + PHASES.index(name)))
        for t in bursts:
            self.command(loadgen.burst(t, a.burst_requests, a.burst_rate))
        _sleep_until(start)
        before = self.snapshot()
        self.quotas = []
        for t in bursts:
            self.sample_quota(t - 0.03)
            if name == "c":
                self.time_reaction(t, end)
        self.sample_quota(end)
        after = self.snapshot()
        capacity = os.cpu_count() * 1000
        opened = [(t, None if q is None else float(q >= capacity)) for t, q in self.quotas]
        return {"name": name, "round": round_, "start": start, "end": end, "bursts": bursts, "before": before,
                "after": after, "quota": stats.step_summary(self.quotas, start, end),
                "open": stats.step_summary(opened, start, end)}

    def sample_quota(self, until: float, every: float = 0.02) -> None:
        """The offline quota every 20 ms (the same cost in every phase; in (a) and (b) there is none)."""
        while time.monotonic() < until:
            self.quotas.append((time.monotonic(), self.quota_in_c()))
            time.sleep(max(0.0, min(every, until - time.monotonic())))

    def time_reaction(self, burst_at: float, until: float) -> None:
        """From the burst's scheduled start until the offline quota fell by --reaction-drop of the node."""
        _sleep_until(burst_at - 0.03)
        before = self.quota_in_c()
        while time.monotonic() < burst_at:
            before = self.quota_in_c()
            self.quotas.append((time.monotonic(), before))
            time.sleep(0.002)
        drop = os.cpu_count() * 1000 * self.args.reaction_drop / 100
        if before is None or before - drop < self.floor:  # already (nearly) at its floor: no cut to time
            self.skipped += 1
            self.sample_quota(min(burst_at + 1.0, until))
            return
        while time.monotonic() < min(burst_at + 1.0, until):
            q = self.quota_in_c()
            self.quotas.append((time.monotonic(), q))
            if before is not None and q is not None and q <= before - drop:
                self.reactions.append(time.monotonic() - burst_at)
                return
            time.sleep(0.001)
        self.missed += 1

    def finish(self):
        self.command(loadgen.STOP)
        if self.client.stdout.readline().strip() != "DONE":
            raise RuntimeError(f"the load generator failed ({self.client.wait()}): {self.log_tail('client')}")
        return loadgen.read_records(self.tmp / "latencies")  # sched, latency, send lateness, kind

    def cleanup(self) -> None:
        import shutil

        from agent.cgroups.tree import pids_below, remove_group
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave things half removed
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for pid in pids_below(self.backend, self.parent):  # anything they started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        remove_group(self.backend, self.parent)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(left)


def _cpu_ns(backend, group: str) -> int:
    try:
        return backend.cpu_usage_ns(group)
    except OSError:
        return 0


def _cpu_stat(backend, group: str) -> dict[str, int]:
    try:
        text = (backend.directory(group, "cpu") / "cpu.stat").read_text()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if len(line.split()) == 2)}


# -- the figures ------------------------------------------------------------------------------------

def _quota_over(parts: list[dict], cpus: int) -> dict | None:
    qs = [p["quota"] for p in parts if p["quota"]]
    if not qs:
        return None
    opened = [p["open"] for p in parts if p["open"]]
    return {"mean": round(sum(q["weighted"] for q in qs) / sum(q["seconds"] for q in qs)),
            "min": min(q["min"] for q in qs), "max": max(q["max"] for q in qs),
            "open_percent_of_time": round(100 * sum(o["weighted"] for o in opened) /
                                          sum(o["seconds"] for o in opened), 1) if opened else None}


def _delta(parts: list[dict], get) -> float:
    """A counter's growth summed over the parts of a phase."""
    return sum(get(p["after"]) - get(p["before"]) for p in parts)


def _usage(parts: list[dict], cpus: int) -> dict:
    dt = _delta(parts, lambda s: s["t"])
    d = [_delta(parts, lambda s, i=i: s["stat"][i]) for i in range(8)]
    total = sum(d) or 1
    busy = sum(d[i] for i in STAT_BUSY)
    cores = {k: _delta(parts, lambda s, k=k: s["usage"][k]) / 1e9 / dt for k in parts[0]["after"]["usage"]}
    out = {"cpu_util_percent": round(100 * busy / total, 1), "steal_percent": round(100 * d[7] / total, 1),
           "cores": {k: round(v, 3) for k, v in cores.items() if k != "all"}, "seconds": round(dt, 2)}
    # busy CPU outside the benchmark's cgroups: other work on the machine (noise), the benchmark's own main process
    out["cores"]["outside_bench"] = round(max(0.0, busy / total * cpus - cores["all"]), 3)
    periods = _delta(parts, lambda s: s["throttle"].get("nr_periods", 0))
    if periods > 0:
        out["offline_throttled_percent"] = round(
            100 * _delta(parts, lambda s: s["throttle"].get("nr_throttled", 0)) / periods, 1)
    return out


def _agent_figures(parts: list[dict], cpus: int) -> dict:
    dt = _delta(parts, lambda s: s["t"])

    def delta(prefix: str) -> float:
        return _delta(parts, lambda s: sum(v for k, v in s["agent"].items() if k.startswith(prefix)))

    cuts = delta("scoria_agent_reaction_seconds_count")
    return {"evictions_recorded": int(delta("scoria_agent_evictions_total")),
            "offline_quota_millicores": _quota_over(parts, cpus),
            "cpu_percent_of_core": round(100 * _delta(parts, lambda s: s["usage"]["agent"]) / 1e9 / dt, 2),
            "loops_cpu_percent_of_core": round(100 * delta("scoria_agent_loops_cpu_seconds_total") / dt, 2),
            "fast_cuts_on_rising_online": int(cuts),
            "own_reaction_mean_ms": round(1000 * delta("scoria_agent_reaction_seconds_sum") / cuts, 1) if cuts else None}


def _derive_profile(path: str, changes: dict[str, object], out: Path) -> str:
    """--threshold and --set: the profile with ``section.key`` set to each value, in its spec and in every
    window that sets the same key (so that no window undoes the experiment)."""
    import yaml
    doc = yaml.safe_load(Path(path).read_text()) or {}
    if doc.get("kind") == "ConfigMap":
        doc = yaml.safe_load(next(iter(doc["data"].values())))
    spec = doc.setdefault("spec", {})
    for name, value in changes.items():
        section, key = name.split(".", 1)
        spec.setdefault(section, {})[key] = value
        for window in spec.get("windows") or []:
            if key in (window.get(section) or {}):
                window[section][key] = value
    out.write_text(yaml.safe_dump(doc))
    from agent.profile import ProfileWatcher
    ProfileWatcher(out)  # refused here, with the key named, rather than by the agent in phase (c)
    return str(out)


def _changes(args: argparse.Namespace) -> dict[str, object]:
    import yaml
    changes: dict[str, object] = {}
    if args.threshold is not None:
        changes["cpu.offlineThresholdPercent"] = args.threshold
    for item in args.set:
        name, _, value = item.partition("=")
        changes[name.strip()] = yaml.safe_load(value)
    return changes


def _cpu_settings(profile: str):
    """The profile's CPU settings in force now (windows applied), as the agent reads them."""
    from datetime import datetime

    from agent.profile import ProfileWatcher
    return ProfileWatcher(profile).current.effective({}, datetime.now(UTC)).cpu


def _threshold(profile: str) -> float:
    return _cpu_settings(profile).offline_threshold_percent


def _latencies(parts: list[dict], records, shadow_s: float) -> tuple[dict, dict, list]:
    """(steady stream outside the bursts' shadows, every request, steady p99 of each round) of a phase."""
    import numpy as np
    sched, lat, late, kind = records
    inside, steady, per_round = np.zeros(sched.shape, bool), np.zeros(sched.shape, bool), []
    for p in parts:
        part = (sched >= p["start"]) & (sched < p["end"])
        shadow = np.zeros_like(part)
        for t in p["bursts"]:
            shadow |= (sched >= t) & (sched < t + shadow_s)
        inside |= part
        steady |= part & (kind == 0) & ~shadow
        per_round.append(stats.latency_summary(lat, part & (kind == 0) & ~shadow)["p99"])
    out = stats.latency_summary(lat, steady)
    out["send_late_p99_ms"] = round(float(np.percentile(late[inside], 99)) * 1000, 3) if inside.any() else None
    return out, stats.latency_summary(lat, inside), per_round


def report(bench: Bench, parts: list[dict], records, server: tuple, load: tuple) -> dict:
    import numpy as np
    a = bench.args
    cpus = os.cpu_count()
    by = {name: [p for p in parts if p["name"] == name] for name in PHASES}
    steady, every, rounds, usage = {}, {}, {}, {}
    for name, ps in by.items():
        steady[name], every[name], rounds[name] = _latencies(ps, records, a.burst_shadow)
        usage[name] = _usage(ps, cpus)
    # units each hog did in each round of each phase: a count that went back (seen once in ten runs here,
    # cause unknown) makes the offline figures meaningless, so they are withheld and the report says why
    units = {name: [[after - before for after, before in zip(p["after"]["work"], p["before"]["work"], strict=True)]
                    for p in ps] for name, ps in by.items()}
    work = {name: sum(map(sum, units[name])) * HOG_UNIT / _delta(ps, lambda s: s["t"]) for name, ps in by.items()}
    went_back = any(u < 0 for per_round in units.values() for r in per_round for u in r)
    offline_ratio = None if went_back else stats.ratio(work["c"], work["b"])
    p99_ratio = stats.ratio(steady["c"]["p99"], steady["a"]["p99"])
    react = np.array(bench.reactions) * 1000
    totals = {k: sum(every[p][k] for p in PHASES) for k in ("sent", "answered", "errors", "unanswered")}
    return {
        "phase_seconds": a.phase_seconds, "rounds": a.rounds, "rate_per_s": a.rate, "work_ms": a.work_ms,
        "work_ms_calibrated": server[2], "work_iterations": server[1], "hogs": a.hogs, "cpus": cpus, "seed": a.seed,
        "profile": os.path.relpath(a.profile_source, ROOT) if a.profile_source.startswith(str(ROOT)) else a.profile_source,
        "threshold_override": a.threshold, "profile_changes": _changes(a),
        "offline_threshold_percent": sorted(bench.thresholds), "cgroup_version": bench.backend.version,
        "load_average": {"before": load[0], "after": load[1]},
        "latency_ms": steady, "latency_all_requests_ms": every, "p99_by_round_ms": rounds, "requests": totals,
        "p99_ratio_c_over_a": p99_ratio, "p99_ratio_b_over_a": stats.ratio(steady["b"]["p99"], steady["a"]["p99"]),
        "offline_iterations_per_s": None if went_back else {"b": round(work["b"]), "c": round(work["c"])},
        "offline_units_by_round": units,
        "offline_counter_error": "a hog's count went back during a phase: offline figures withheld" if went_back
        else None,
        "offline_ratio_c_over_b": offline_ratio,
        "cpu": usage,
        "phase_b_knobs": [dict(k) for k in {tuple(sorted(k.items())) for k in bench.knobs_b}],  # one per distinct setting
        "reaction_ms": {"bursts": len(react) + bench.missed + bench.skipped, "timed": len(react), "missed": bench.missed,
                        "skipped_at_floor": bench.skipped,
                        "median": round(float(np.median(react)), 1) if react.size else None,
                        "max": round(float(react.max()), 1) if react.size else None,
                        "all": [round(float(x), 1) for x in react], "drop_percent_of_node": a.reaction_drop},
        "bursts": {"per_phase": a.bursts_per_phase, "requests": a.burst_requests, "rate_per_s": a.burst_rate,
                   "shadow_s": a.burst_shadow},
        "agent": _agent_figures(by["c"], cpus),
        "summary": {"cpu_util_c_percent": usage["c"]["cpu_util_percent"], "p99_ratio_c_over_a": p99_ratio,
                    "offline_ratio_c_over_b": offline_ratio,
                    "reaction_p99_ms": round(float(np.percentile(react, 99)), 1) if react.size else None,
                    "agent_cpu_percent_of_core": _agent_figures(by["c"], cpus)["cpu_percent_of_core"],
                    # busy CPU outside the benchmark (other work on the machine): the figures above are only as
                    # good as this is small
                    "outside_bench_cores": {p: usage[p]["cores"]["outside_bench"] for p in PHASES}},
        "goals": {"cpu_util_c_at_least_95pct": bool(usage["c"]["cpu_util_percent"] >= 95.0),
                  "online_p99_c_within_5pct_of_a": bool(p99_ratio is not None and p99_ratio <= 1.05),
                  "offline_c_at_least_90pct_of_b": bool(offline_ratio is not None and offline_ratio >= 0.9)},
        "cgroup_parent": bench.parent,
    }


def run(args: argparse.Namespace) -> dict:
    bench = Bench(args)
    args.profile_source = args.profile
    if _changes(args):
        try:
            args.profile = _derive_profile(args.profile, _changes(args), bench.tmp / "profile.yaml")
        except Exception:
            bench.cleanup()
            raise
    load_before = _loadavg()
    try:
        server = bench.start()
        bench.start_hogs()
        parts = []
        for round_ in range(args.rounds):
            for name in PHASES:
                bench.enter(name)
                parts.append(bench.phase(name, round_))
        records = bench.finish()
    finally:
        bench.cleanup()
    return report(bench, parts, records, server, (load_before, _loadavg()))


def _loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--phase-seconds", type=float, default=20.0, help="length of each phase (default 20)")
    p.add_argument("--rounds", type=int, default=4,
                   help="each phase in this many equal parts, interleaved a b c a b c … so that drifting load "
                        "on a shared machine falls on all three alike (default 4)")
    p.add_argument("--rate", type=float, default=200.0, help="online requests per second, Poisson (default 200)")
    p.add_argument("--work-ms", type=float, default=1.5, help="CPU work per request in ms (default 1.5)")
    p.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="offline hog processes (default: one per CPU)")
    p.add_argument("--seed", type=int, default=1, help="seed of the arrival times")
    p.add_argument("--profile", default=str(ROOT / "daemonset/config/qos-profile.yaml"),
                   help="the agent's QoS profile (default: the shipped one)")
    p.add_argument("--threshold", type=float, metavar="PERCENT",
                   help="experiment: the profile with cpu.offlineThresholdPercent (windows too) set to this")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="experiment: the profile with this setting (windows too), e.g. cpu.onlineRisePercent=10 "
                        "or cpu.clampOnSignals=false; repeatable")
    p.add_argument("--connections", type=int, default=64, help="keep-alive connections of the load generator")
    p.add_argument("--bursts-per-phase", type=int, default=4)
    p.add_argument("--burst-requests", type=int, default=30, help="requests in one burst (default 30)")
    p.add_argument("--burst-rate", type=float, default=2000.0, help="request rate within a burst (default 2000/s)")
    p.add_argument("--burst-shadow", type=float, default=0.25,
                   help="steady requests this many seconds after a burst's start are reported with the bursts only")
    p.add_argument("--reaction-drop", type=float, default=5.0,
                   help="the offline quota must fall by this percentage of the node to count as a reaction")
    p.add_argument("--settle", type=float, default=2.0, help="seconds between phases (not measured)")
    p.add_argument("--fast-interval", type=float, default=0.025, help="the agent's fast loop interval")
    p.add_argument("--client-cpu", type=int, help="pin the load generator to this CPU")
    p.add_argument("--cgroup-version", type=int, choices=(1, 2),
                   help="2 on a machine without a v2 CPU controller: the fixture-tree run (the agent's v2 writes "
                        "only, see hack/bench/colocation_v2.py); default: what the machine has")
    args = p.parse_args(argv)
    args.profile = str(Path(args.profile).resolve())
    if args.phase_seconds <= 0 or args.rate <= 0 or args.hogs < 1 or args.rounds < 1:
        p.error("--phase-seconds and --rate must be positive, --hogs and --rounds at least 1")
    if args.bursts_per_phase < args.rounds or args.bursts_per_phase % args.rounds:
        p.error("--bursts-per-phase must be a multiple of --rounds")
    return args


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        _role(sys.argv[1], sys.argv[2:])
        return
    args = parse_args(sys.argv[1:])
    if args.cgroup_version is not None and args.cgroup_version != _machine_version():
        if args.cgroup_version == 1:
            raise SystemExit("--cgroup-version 1: this machine's cgroup root is v2 (a v1 fixture tree would "
                             "tell nothing the tests do not)")
        import tempfile

        from hack.bench import colocation_v2
        with tempfile.TemporaryDirectory(prefix="scoria-colo-v2-profile-") as tmp:
            profile = _derive_profile(args.profile, _changes(args), Path(tmp) / "profile.yaml") \
                if _changes(args) else args.profile
            print(json.dumps(colocation_v2.run(Path(profile))))
        return
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup").exists():
        raise SystemExit("needs root and a cgroup hierarchy")
    signal.signal(signal.SIGTERM, _terminate)
    from proto.errors import InputError
    try:
        print(json.dumps(run(args)))
    except KeyboardInterrupt:
        raise SystemExit("interrupted: processes stopped, cgroups removed") from None
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None


def _machine_version() -> int:
    """2 where the cgroup root is the unified hierarchy with the cpu controller, else 1."""
    root = Path("/sys/fs/cgroup")
    try:
        return 2 if "cpu" in (root / "cgroup.controllers").read_text().split() else 1
    except OSError:
        return 1


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()
