#!/usr/bin/env python3
"""``./hack/up.sh``: Scoria's embedded mode on this machine, with a live view.

Starts the scheduler (``serve --embedded``) and the agent (``run --embedded``)
as two real processes, applies the demo in ``daemonset/examples/embedded/`` —
an online HTTP service under a steady request load with a latency probe, and
offline gang jobs in two queues running CPU-heavy work on batch resources —
and shows every two seconds: pods and their phases, the online service's p99
latency, offline throughput, and the offline CPU quota the agent moves as
online load changes.  The same, with plots over time, is in the scheduler's
live web view (``serve --web-port``, on loopback): its address, printed at
start, carries the token the view asks for; the demo pushes the probe's and
the burners' figures to it (``POST /series``).  Ctrl-C or ``--duration`` ends it with a summary; the
agent's shutdown stops every pod and removes every cgroup it made, and the
demo checks that nothing is left behind.

Needs root and writable cgroups (the pods run in real cgroups); elsewhere it
says so and runs the scheduler simulator on the bundled example instead
(``--simulate`` does that anywhere).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from hack.lib.processes import control, free_port, stop  # noqa: E402 — the repository's own helpers, as hack/bench uses them
from hack.lib.stats import nearest_rank  # noqa: E402

PY = sys.executable
DEMO = ROOT / "daemonset" / "examples" / "embedded"
CONFIG = ROOT / "daemonset" / "config" / "scheduler-colocation.conf"


def can_run_pods() -> str | None:
    """None when pods can run here, else why not."""
    if os.geteuid() != 0:
        return "the embedded demo runs pods in cgroups and needs root"
    for candidate in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup"):
        if os.access(candidate, os.W_OK):
            return None
    return "no writable cgroup hierarchy under /sys/fs/cgroup"


def wait_file(path: Path, proc: subprocess.Popen, what: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}; see its log")
        time.sleep(0.1)
    raise SystemExit(f"{what} did not start within {timeout:g}s")


def get(api: Path, path: str):
    """The control API's answer (a Unix socket only root can open)."""
    return control(api, "GET", path)


def last_json(path: Path) -> dict:
    """The last JSON line of a log file ({} when there is none yet)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def pod_row(item: dict) -> dict:
    """What the live view shows of a pod: where and how it runs, and why not when it does not (a crash loop's
    reason and restarts, an eviction's or a lost node's reason, why it waits)."""
    status = item["status"]
    runtime = status.get("runtime") or {}
    phase = status.get("phase") or "Pending"
    reason = status.get("reason") or ""
    if runtime.get("reason") and phase not in ("Succeeded", "Failed") and not reason:  # a crash loop, say
        reason = runtime["reason"] + (f": {runtime['message']}" if runtime.get("message") else "")
    restarts = runtime.get("restarts", 0)
    trouble = phase in ("Failed", "Unknown") or bool(restarts) or status.get("evicted") or \
        (phase == "Running" and bool(runtime.get("reason")))
    return {"key": item["key"], "node": status.get("nodeName") or "-", "phase": phase, "reason": reason,
            "restarts": restarts, "trouble": bool(trouble)}


def private_log(path: Path) -> TextIO:
    """``path`` opened afresh for writing, ``0600`` whatever the umask or an earlier run left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return open(fd, "w")


class Demo:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.state = Path(args.state or tempfile.mkdtemp(prefix="scoria-demo-"))
        self.parent = f"scoria-demo-{os.getpid()}"
        self.procs: list[subprocess.Popen] = []
        self.samples: list[dict] = []

    def start(self) -> None:
        (self.state / "logs").mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.state / "logs", 0o700)  # the components' logs are root's alone, as the pods' are
        with private_log(self.state / "logs" / "scheduler.log") as log:  # the child has its own descriptor
            # agents report on STATE/agent.sock and the CLI talks to STATE/control.sock: Unix sockets only root
            # can open (pods run as root), in a folder only root can enter
            self.scheduler = subprocess.Popen(
                [PY, "-m", "scheduler", "-v", "serve", "--embedded", "--state", str(self.state / "scheduler"),
                 "--agent-state", str(self.state / "agent"),
                 "--port-file", str(self.state / "port"), "--metrics-port", "0", "--web-port", "0",
                 "--config", str(CONFIG), "--schedule-interval", "0.5"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.scheduler)
        agents = wait_file(self.state / "port", self.scheduler, "the scheduler")  # unix:STATE/scheduler/agent.sock
        self.api = self.state / "scheduler" / "control.sock"
        # the live web view: on loopback, its data only for the token in this address (a 0600 file, root's)
        self.web_url = wait_file(self.state / "scheduler" / "web.url", self.scheduler, "the web view")
        with private_log(self.state / "logs" / "agent.log") as log:
            self.agent = subprocess.Popen(
                [PY, "-m", "agent", "-v", "run", "--embedded", "--scheduler", agents,
                 "--state", str(self.state / "agent"), "--cgroup-parent", self.parent, "--metrics-port", "0",
                 "--no-devices"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.agent)
        print(f"scoria: scheduler on {agents} (control API unix://{self.api}), agent running pods under cgroup "
              f"{self.parent}; state and logs in {self.state}")
        print(f"scoria: live web view at {self.web_url} (open it in a browser on this machine)")
        deadline = time.monotonic() + 30
        while not get(self.api, "/top/nodes") and time.monotonic() < deadline:
            time.sleep(0.2)
        env = dict(os.environ, SCORIA_SERVER=f"unix://{self.api}")
        manifests = self.manifests(free_port())
        print(f"scoria: the online service listens on 127.0.0.1:{self.web_port} (a free port, WEB_PORT in {manifests})")
        subprocess.run([PY, "-m", "scheduler", "apply", "-f", str(manifests)], cwd=ROOT, env=env, check=True)

    def manifests(self, port: int) -> Path:
        """The demo's manifests with WEB_PORT set to ``port`` (the example says 18080, which may be taken here)."""
        self.web_port = port
        out = self.state / "manifests"
        out.mkdir(parents=True, exist_ok=True)
        for path in sorted(DEMO.glob("*.yaml")):
            docs = list(yaml.safe_load_all(path.read_text()))
            for doc in docs:
                for container in ((doc or {}).get("spec") or {}).get("containers") or []:
                    for var in container.get("env") or []:
                        if var.get("name") == "WEB_PORT":
                            var["value"] = str(port)
            (out / path.name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
        return out

    # -- the live view ---------------------------------------------------------------------------------
    def sample(self) -> dict:
        pods = get(self.api, "/objects/pods")
        nodes = get(self.api, "/top/nodes")
        logs = {p["key"]: (p["status"].get("runtime") or {}).get("logDir") for p in pods}
        probe = last_json(Path(logs.get("shop/probe") or "/nonexistent") / "probe.log")
        burners = [last_json(Path(d) / "work.log") for k, d in logs.items() if k.startswith("batch/") and d]
        phases: dict[str, int] = {}
        for p in pods:
            phase = p["status"].get("phase") or "Pending"
            phases[phase] = phases.get(phase, 0) + 1
        node = nodes[0] if nodes else {}
        return {"t": time.time(), "phases": phases, "p50_ms": probe.get("p50_ms"), "p99_ms": probe.get("p99_ms"),
                "probe_errors": probe.get("errors"), "probe_sent": probe.get("sent"),
                "offline_per_s": sum(b.get("per_second", 0) for b in burners if "per_second" in b),
                "running_offline": sum(1 for b in burners if "per_second" in b),
                "cpu_used": node.get("cpuUsedCores"), "batch_cpu": node.get("batchCpuMillis"),
                "quota": node.get("offlineQuotaMillis"), "node": node.get("status"),
                "pods": [pod_row(p) for p in pods]}

    def publish(self, s: dict) -> None:
        """What only the demo measures, for the web view's plots (the scheduler samples the rest itself)."""
        charts: dict[str, dict[str, float]] = {"offline throughput (iterations/s)": {"batch": s["offline_per_s"]}}
        if s["p99_ms"] is not None:
            charts["online p99 latency (ms)"] = {"shop/probe p99": s["p99_ms"], "shop/probe p50": s["p50_ms"]}
        if s["probe_errors"] is not None:
            charts["probe errors (total)"] = {"shop/probe": s["probe_errors"]}
        try:
            control(self.api, "POST", "/series", json.dumps(charts).encode(), {"Content-Type": "application/json"})
        except OSError as exc:  # the plots miss a point; the terminal view goes on
            print(f"(web view: {exc})", file=sys.stderr)

    def show(self, s: dict) -> None:
        tty = sys.stdout.isatty()
        errors = "-" if s["probe_errors"] is None else f"{s['probe_errors']:,} of {s['probe_sent'] or 0:,}"
        web = getattr(self, "web_url", None)
        lines = [f"scoria embedded demo — {time.strftime('%H:%M:%S')}  (Ctrl-C to stop)"
                 + (f"  web view: {web}" if web else ""),
                 f"online p50/p99: {s['p50_ms']} / {s['p99_ms']} ms, probe errors: {errors}    offline: "
                 f"{s['running_offline']} pods, {s['offline_per_s']:,} iterations/s",
                 f"node {s['node'] or '-'}, CPU in use: {s['cpu_used']} cores    batch allocatable: {s['batch_cpu']}m"
                 f"    offline quota: {'unlimited' if s['quota'] is None else str(s['quota']) + 'm'}"]
        troubled = [row for row in s["pods"] if row["trouble"]]
        if tty:
            lines.append("")
            lines += [f"  {r['key']:<18} {r['node']:<12} {r['phase']:<10} {r['restarts']:>3}  {r['reason']}"
                      for r in s["pods"]]
            sys.stdout.write("\033[H\033[J" + "\n".join(lines) + "\n")
        else:
            trouble = "; ".join(f"{r['key']} {r['phase']}: {r['reason'] or 'restarted'} ({r['restarts']} restarts)"
                                for r in troubled)
            waiting = [r for r in s["pods"] if r["phase"] == "Pending"]
            why = f" | waiting: {len(waiting)}, {waiting[0]['key']}: {waiting[0]['reason'] or 'not tried yet'}" \
                if waiting else ""
            sys.stdout.write(" | ".join(lines[1:]) + f" | phases {s['phases']}" +
                             (f" | failing or evicted: {trouble}" if trouble else "") + why + "\n")
        sys.stdout.flush()

    def watch(self) -> None:
        end = time.monotonic() + self.args.duration if self.args.duration else None
        while end is None or time.monotonic() < end:
            for proc, name in ((self.scheduler, "scheduler"), (self.agent, "agent")):
                if proc.poll() == 0:  # it was asked to stop: Ctrl-C in a terminal reaches the whole process group,
                    return            # and a child may act on it before this process does
                if proc.poll() is not None:
                    raise SystemExit(f"the {name} exited ({proc.returncode}); see {self.state}/logs/{name}.log")
            try:
                s = self.sample()
            except OSError as exc:
                print(f"(control endpoint: {exc})")
                time.sleep(2)
                continue
            self.samples.append(s)
            self.publish(s)
            self.show(s)
            time.sleep(2)

    def summary(self) -> None:
        seen = [s for s in self.samples if s["p99_ms"] is not None]
        if not seen:
            print("no samples")
            return
        p99 = sorted(s["p99_ms"] for s in seen)
        offline = [s["offline_per_s"] for s in seen if s["running_offline"]]
        quotas = [s["quota"] for s in seen if s["quota"] is not None]
        print(f"\nsummary over {len(self.samples)} samples ({len(self.samples) * 2}s):")
        print(f"  online p99: median {nearest_rank(p99, 0.5)} ms, worst {p99[-1]} ms; probe errors: "
              f"{self.samples[-1]['probe_errors'] or 0} of {self.samples[-1]['probe_sent'] or 0} requests")
        if offline:
            print(f"  offline throughput: {sum(offline) / len(offline):,.0f} iterations/s on average")
        if quotas:
            print(f"  offline CPU quota moved between {min(quotas)}m and {max(quotas)}m")
        print(f"  pods at the end: {self.samples[-1]['phases']}")
        for row in self.samples[-1]["pods"]:
            if row["trouble"]:
                print(f"  {row['key']}: {row['phase']}, {row['restarts']} restarts: {row['reason'] or '-'}")

    # -- cleaning up -----------------------------------------------------------------------------------
    def stop(self) -> None:
        for proc in reversed(self.procs):  # the agent first: it stops the pods and removes their cgroups
            stop(proc, signal.SIGTERM, timeout=40)
        left = [p for p in (Path("/sys/fs/cgroup") / c / self.parent for c in ("cpu", "memory", "cpuset", ""))
                if p.is_dir()]
        if left:
            print(f"warning: cgroups left behind: {', '.join(map(str, left))}")
        else:
            print("cleaned up: no pod process or cgroup left behind")
        if not self.args.state and not self.args.keep:
            shutil.rmtree(self.state, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=0, metavar="SECONDS", help="stop after this long")
    parser.add_argument("--state", metavar="DIR", help="keep state and logs here (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--simulate", action="store_true", help="run the scheduler simulator instead")
    args, rest = parser.parse_known_args()
    why = None if args.simulate else can_run_pods()
    if args.simulate or why:
        if why:
            print(f"scoria: {why}; running the scheduler simulator on the bundled example instead", file=sys.stderr)
        return subprocess.call([PY, "-m", "scheduler", "simulate", "-f",
                                str(ROOT / "daemonset" / "examples" / "simulator"), *rest], cwd=ROOT)
    demo = Demo(args)
    try:
        demo.start()
        demo.watch()
    except KeyboardInterrupt:
        pass
    finally:
        demo.summary()
        demo.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
