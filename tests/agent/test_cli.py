"""``python -m agent`` as an operator runs it: real processes, real sockets, fixture host trees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from hack.lib.cgroup_fixtures import FakePod, make_proc, make_tree
from hack.lib.processes import ROOT, free_port, scrape, start_serve, wait_port
from tests.support.sysfs_fixtures import make_host

WEB, BATCH = "0000aaaa-0000-4000-8000-000000000001", "0000bbbb-0000-4000-8000-000000000002"


def agent(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def fixture_host(tmp_path: Path) -> Path:
    """A 2-socket, 2-NUMA-node host with hyperthreads and a kubelet (cgroup v2, systemd) running two pods."""
    host = tmp_path / "host"
    make_host(host, sockets=2, cores_per_socket=4, threads_per_core=2, numa_nodes=2)
    make_proc(host / "proc", busy_ticks=1000, idle_ticks=9000)
    make_tree(host / "sys" / "fs" / "cgroup", version=2, driver="systemd",
              pods=[FakePod(WEB, "Burstable"), FakePod(BATCH, "BestEffort")])
    return host


def test_report_once_prints_this_machines_report_as_json() -> None:
    out = agent("report", "--once", "-o", "json", "--sample", "0.1", "--node-name", "dev-box")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["apiVersion"] == "scoria.io/v1" and doc["kind"] == "NodeReport"
    assert doc["identity"]["nodeName"] == "dev-box"
    assert int(doc["capacity"]["cpuMillis"]) == 1000 * os.cpu_count()
    assert len(doc["capacity"]["cpuTopology"]["cpus"]) == os.cpu_count()
    assert float(doc["load"]["cpuUsedCores"]) <= os.cpu_count()


def test_report_once_reads_a_mounted_host(tmp_path: Path) -> None:
    host = fixture_host(tmp_path)
    out = agent("report", "--once", "--sample", "0.05", "--host-root", str(host), "--no-devices")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    capacity = doc["capacity"]
    assert int(capacity["cpuMillis"]) == 16000 and len(capacity["numaZones"]) == 2
    assert capacity["cpuTopology"]["sockets"] == 2 and capacity["cpuTopology"]["threadsPerCore"] == 2
    pods = {p["uid"]: p for p in doc["load"]["pods"]}
    # the kubelet's cgroups tell the Kubernetes QoS class, not the QoS level (an online pod without requests
    # is BestEffort too): without the API the level is unknown, not guessed
    assert pods[WEB]["qos"] == "QOS_UNSPECIFIED" and pods[BATCH]["qos"] == "QOS_UNSPECIFIED"
    assert doc["load"]["cpuPressure"]["someAvg10"] == 1.5


def test_report_carries_the_kubelets_topology_policy(tmp_path: Path) -> None:
    host = fixture_host(tmp_path)
    kubelet = host / "var" / "lib" / "kubelet"
    kubelet.mkdir(parents=True)
    (kubelet / "config.yaml").write_text("kind: KubeletConfiguration\ntopologyManagerPolicy: single-numa-node\n")
    (tmp_path / "other.yaml").write_text("kind: KubeletConfiguration\ntopologyManagerPolicy: best-effort\n")
    common = ("report", "--once", "--sample", "0.05", "--host-root", str(host), "--no-devices")
    policies = []
    for extra in ((), ("--kubelet-config", str(tmp_path / "other.yaml")), ("--topology-policy", "restricted")):
        out = agent(*common, *extra)
        assert out.returncode == 0, out.stderr
        policies.append(json.loads(out.stdout)["capacity"]["topologyPolicy"])
    assert policies == ["single-numa-node", "best-effort", "restricted"]
    (kubelet / "config.yaml").write_text("topologyManagerPolicy: [\n")
    out = agent(*common)
    assert out.returncode == 0 and json.loads(out.stdout)["capacity"]["topologyPolicy"] == ""
    assert "not YAML" in out.stderr and "reported as unknown" in out.stderr


def test_bad_arguments_exit_2_with_a_message() -> None:
    out = agent("report", "--once", "--node-labels", "pool=batch,zone")
    assert out.returncode == 2 and "--node-labels: 'zone' is not key=value" in out.stderr
    out = agent("run", "--scheduler", "127.0.0.1:1", "--metrics-port", "0")
    assert out.returncode == 2 and "--scheduler needs --ca (TLS) or --insecure" in out.stderr
    out = agent("report", "--once", "--topology-policy", "strict")
    assert out.returncode == 2 and "--topology-policy: invalid choice: 'strict'" in out.stderr


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


def test_run_enforces_streams_serves_metrics_and_stops_on_sigterm(tmp_path: Path) -> None:
    host = fixture_host(tmp_path)
    port_file, sched_metrics, agent_metrics = tmp_path / "port", free_port(), free_port()
    (tmp_path / "qos.yaml").write_text("name: handed-out\nspec: {cpu: {offlineThresholdPercent: 70}}\n")
    sched = start_serve("--insecure", "--listen", "127.0.0.1:0", "--register-nodes", "--metrics-port",
                        str(sched_metrics), "--qos-profile", str(tmp_path / "qos.yaml"), port_file=port_file,
                        stderr=subprocess.PIPE, text=True)
    run = None
    try:
        port = wait_port(port_file, sched, 30)
        run = subprocess.Popen([sys.executable, "-m", "agent", "run", "--host-root", str(host), "--node-name",
                                "node-a", "--no-devices", "--scheduler", f"127.0.0.1:{port}",
                                "--insecure", "--metrics-port", str(agent_metrics)],
                               cwd=ROOT, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while True:
            assert run.poll() is None, run.stderr.read()
            try:
                if scrape(f"http://127.0.0.1:{sched_metrics}/metrics").get("scoria_scheduler_reports_total") == 2.0:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "no reports reached the scheduler"
            time.sleep(0.1)
        assert _get(f"http://127.0.0.1:{agent_metrics}/healthz").strip() == "ok"
        # an agent without --profile takes the scheduler's --qos-profile (handed over after connecting)
        while 'scoria_agent_qos_profile_info{digest="' not in (metrics := _get(f"http://127.0.0.1:{agent_metrics}/metrics")) \
                or 'name="handed-out"' not in metrics:
            assert time.monotonic() < deadline + 10, metrics
            time.sleep(0.1)
        assert "scoria_agent_offline_cpu_quota" in metrics
        assert 'scoria_agent_qos_setting{setting="cpu.offlineThresholdPercent"} 70.0' in metrics, metrics
        # --pods-from cgroups on a kubelet's node cannot see QoS levels: the BestEffort pod may be online, so
        # it is neither idled nor throttled as offline work (the BestEffort tier gets no offline quota)
        offline = host / "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice"
        pod = offline / f"kubepods-besteffort-pod{BATCH.replace('-', '_')}.slice"
        assert (offline / "cpu.max").read_text().startswith("max") and (pod / "cpu.idle").read_text().strip() == "0"
        assert "scoria_agent_offline_cpu_quota_millicores" in metrics
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=15) == 0
    finally:
        for p in (run, sched):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
