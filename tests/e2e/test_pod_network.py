"""Pods' own network namespaces, volumes and hosts files, for real: the local runtime on this machine's cgroups
with a pod network on a bridge of the test's own, real processes talking TCP.

Each test uses its own parent cgroup, state folder, bridge and pod range, and leaves no process, cgroup,
network namespace, bridge or file behind (checked).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import FixedLayout
from agent.embedded import Backoff, LocalRuntime
from agent.embedded.podnet import PodNetwork
from agent.hostpaths import HostPaths
from hack.lib.real_cgroups import runtime_unavailable
from hack.lib.real_cgroups import sandbox as cgroup_sandbox
from proto.model import PodAction, PodActionKind


def _unavailable() -> str | None:
    problem = runtime_unavailable()
    if problem is None and PodNetwork("probe").problem() is not None:
        return f"no network namespaces here: {PodNetwork('probe').problem()}"
    return problem


pytestmark = pytest.mark.skipif(bool(_unavailable()), reason=_unavailable() or "")
PY = sys.executable


class Net:
    """A pod range and bridge of the test's own (10.250.<n>.0/24), and the START context builder."""

    def __init__(self) -> None:
        n = uuid.uuid4().int % 200 + 20
        self.cidr, self.gateway = f"10.250.{n}.0/24", f"10.250.{n}.1"
        self.bridge = f"sct{uuid.uuid4().hex[:8]}"
        self.base = f"10.250.{n}."

    def ip(self, k: int) -> str:
        return f"{self.base}{k}"

    def network(self, k: int) -> dict:
        return {"podIP": self.ip(k), "cidr": self.cidr, "gateway": self.gateway}


@pytest.fixture
def env(tmp_path: Path):
    backend = detect_backend(HostPaths())
    made: list[LocalRuntime] = []
    net = Net()
    with cgroup_sandbox(backend, "cpu") as (parent, _):
        def runtime() -> LocalRuntime:
            network = PodNetwork(str(tmp_path / "state"), bridge=net.bridge)
            rt = LocalRuntime(tmp_path / "state", backend, FixedLayout(backend, parent), workdir=str(tmp_path),
                              backoff=Backoff(initial=0.05), network=network)
            made.append(rt)
            return rt
        try:
            yield net, runtime
        finally:
            for rt in reversed(made):
                rt._closed = False
                rt.shutdown(0)
            bridge_left = Path(f"/sys/class/net/{net.bridge}").exists()
            tag = PodNetwork(str(tmp_path / "state")).tag
            netns_left = list(Path("/run/netns").glob(f"scoria-{tag}-*"))
            for left in netns_left:  # never leave them to the next test, whatever the verdict
                subprocess.run(["ip", "netns", "del", left.name], capture_output=True, check=False)
            subprocess.run(["ip", "link", "del", net.bridge], capture_output=True, check=False)
    assert not netns_left, "network namespaces left behind"
    assert not bridge_left, "bridge left behind"


def pod(uid: str, code: str, *, net: Net, k: int, hosts: list | None = None, job: str = "train",
        volumes: list | None = None, mounts: list | None = None, env: list | None = None, context: dict | None = None,
        **spec) -> str:
    container = {"name": "main", "command": [PY, "-c", code], "env": env or [], "volumeMounts": mounts or []}
    doc = {"metadata": {"uid": uid, "name": uid, "namespace": "default"},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "hostname": uid, "subdomain": job,
                    "containers": [container], "volumes": volumes or [], **spec},
           "scoria": {"network": net.network(k), "hosts": hosts or [], **(context or {})}}
    return json.dumps(doc)


def until(rt: LocalRuntime, cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        rt.tick()
        assert time.monotonic() < deadline, [(p.name, p.phase, p.reason, p.message) for p in rt.runtime()]
        time.sleep(0.05)


def phase(rt: LocalRuntime, uid: str) -> str:
    return next((p.phase for p in rt.runtime() if p.uid == uid), "")


def log_of(tmp_path: Path, uid: str) -> str:
    return (tmp_path / "state" / "logs" / f"default_{uid}_{uid}" / "main.log").read_text()


SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen()
print("hostname", socket.gethostname(), flush=True)
c, _ = s.accept(); print("got", c.recv(100).decode(), flush=True)
"""
CLIENT = """
import socket, time
for _ in range(100):
    try:
        c = socket.create_connection(("a.train", 7000), timeout=1); break
    except OSError:
        time.sleep(0.1)
c.sendall(b"hello from " + socket.gethostname().encode())
began = time.time()
try:
    socket.gethostbyname("nowhere.scoria.invalid")
except OSError:
    print("an unknown name fails in", round(time.time() - began, 1), "s", flush=True)
print("resolved", socket.gethostbyname("a.train"), socket.gethostbyname("b.train"), socket.gethostbyname("c"),
      sorted({a[4][0] for a in socket.getaddrinfo("train", 7000, socket.AF_INET, socket.SOCK_STREAM)}), flush=True)
"""


def test_two_pods_listen_on_one_port_and_reach_each_other_by_name(env, tmp_path: Path) -> None:
    net, runtime = env
    rt = runtime()
    hosts = [[net.ip(2), ["a.train", "a.train.default.svc.cluster.local"]],
             [net.ip(3), ["b.train", "b.train.default.svc.cluster.local"]],
             [net.ip(2), ["train"]], [net.ip(3), ["train"]]]
    rt.start(pod("a", SERVER, net=net, k=2, hosts=hosts))
    rt.start(pod("b", SERVER.replace('print("got"', 'print("got-b"'), net=net, k=3, hosts=hosts))  # port 7000 too
    rt.start(pod("c", CLIENT, net=net, k=4, hosts=hosts))
    until(rt, lambda: phase(rt, "a") == "Succeeded" and phase(rt, "c") == "Succeeded")
    assert "hostname a" in log_of(tmp_path, "a") and "got hello from c" in log_of(tmp_path, "a")
    # the names of the others, its own short name, and a Service's name meaning all its pods
    assert f"resolved {net.ip(2)} {net.ip(3)} {net.ip(4)} {sorted([net.ip(2), net.ip(3)])}" in log_of(tmp_path, "c")
    assert phase(rt, "b") == "Running"  # it bound 0.0.0.0:7000 as a did, in its own namespace
    assert "an unknown name fails in 0." in log_of(tmp_path, "c")  # no name server to wait for
    # the host reaches a pod at its address; its own /etc/hosts is untouched
    rt.start(pod("d", SERVER, net=net, k=5))
    until(rt, lambda: "hostname d" in (log_of(tmp_path, "d") if phase(rt, "d") else ""))
    import socket
    with socket.create_connection((net.ip(5), 7000), timeout=5) as c:
        c.sendall(b"the host")
    until(rt, lambda: phase(rt, "d") == "Succeeded")
    assert "got the host" in log_of(tmp_path, "d")
    assert "a.train" not in Path("/etc/hosts").read_text()
    for uid in "abcd":
        rt.apply(PodAction(PodActionKind.STOP, uid))
    until(rt, lambda: not rt.runtime())
    assert not list((tmp_path / "state" / "files").iterdir())


READ = """
import os, pathlib
print("env", os.environ.get("HOSTS_ENV"), os.environ.get("TOKEN"), os.environ.get("CFG_mode"))
for p in ("/etc/volcano/master.host", "/etc/volcano/worker.host", "/root/.ssh/id_rsa", "/srv/scoria-test/data/x"):
    f = pathlib.Path(p)
    print("file", p, oct(f.stat().st_mode & 0o777), repr(f.read_text()))
try:
    open("/etc/volcano/new", "w")
except OSError as e:
    print("read-only", e.errno)
print("hosts", "master-0.train" in open("/etc/hosts").read())
"""


def test_volumes_env_and_hosts_are_materialised_and_gone_afterwards(env, tmp_path: Path) -> None:
    net, runtime = env
    rt = runtime()
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    context = {"configMaps": {"train-svc": {"data": {"master.host": "master-0.train", "worker.host": "w0\nw1",
                                                     "VC_HOSTS": "master-0.train,w0,w1"}},
                              "cfg": {"data": {"mode": "fast"}}},
               "secrets": {"train-ssh": {"data": {"id_rsa": b64("PRIVATE"), "config": b64("Host *")}},
                           "tok": {"data": {"token": b64("s3cret")}}}}
    volumes = [{"name": "train-svc", "configMap": {"name": "train-svc"}},
               {"name": "train-ssh", "secret": {"secretName": "train-ssh", "defaultMode": 0o600,
                                                "items": [{"key": "id_rsa", "path": ".ssh/id_rsa"},
                                                          {"key": "config", "path": ".ssh/config"}]}},
               {"name": "scratch", "emptyDir": {}}]
    mounts = [{"name": "train-svc", "mountPath": "/etc/volcano"},
              {"name": "train-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"},
              {"name": "scratch", "mountPath": "/srv/scoria-test/data"}]
    env_vars = [{"name": "HOSTS_ENV", "valueFrom": {"configMapKeyRef": {"name": "train-svc", "key": "VC_HOSTS"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "token"}}}]
    code = "import pathlib; pathlib.Path('/srv/scoria-test/data/x').write_text('kept');" + READ
    doc = json.loads(pod("r", code, net=net, k=6, hosts=[[net.ip(7), ["master-0.train"]]], volumes=volumes,
                         mounts=mounts, env=env_vars, context=context))
    doc["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}]
    existed = Path("/srv").exists()
    rt.start(json.dumps(doc))
    until(rt, lambda: phase(rt, "r") in ("Succeeded", "Failed"))
    out = log_of(tmp_path, "r")
    assert phase(rt, "r") == "Succeeded", out
    assert "env master-0.train,w0,w1 s3cret fast" in out
    assert "file /etc/volcano/worker.host 0o644 'w0\\nw1'" in out
    assert "file /root/.ssh/id_rsa 0o600 'PRIVATE'" in out
    assert "file /srv/scoria-test/data/x" in out and "read-only 30" in out and "hosts True" in out
    # nothing of it on the host: not the configMap's folder, not the secret, not the emptyDir's path
    assert not Path("/etc/volcano").exists() and not Path("/root/.ssh/id_rsa").exists()
    assert Path("/srv").exists() == existed and not Path("/srv/scoria-test").exists()
    rt.apply(PodAction(PodActionKind.STOP, "r"))
    until(rt, lambda: not rt.runtime())
    assert not (tmp_path / "state" / "files" / "r").exists()


def test_a_missing_configmap_fails_the_pod_with_the_kubelets_reason(env) -> None:
    net, runtime = env
    rt = runtime()
    rt.start(pod("m", "print(1)", net=net, k=8, volumes=[{"name": "v", "configMap": {"name": "absent"}}],
                 mounts=[{"name": "v", "mountPath": "/etc/absent"}]))
    until(rt, lambda: phase(rt, "m") == "Failed")
    found = next(p for p in rt.runtime() if p.uid == "m")
    assert found.reason == "CreateContainerConfigError" and "absent" in found.message


def test_hosts_are_updated_in_place_and_an_agent_restart_adopts_the_namespace(env, tmp_path: Path) -> None:
    net, runtime = env
    rt = runtime()
    code = ("import socket, time\nwhile True:\n"
            "    try: print('peer', socket.gethostbyname('late.train'), flush=True); break\n"
            "    except OSError: time.sleep(0.1)\n"
            "time.sleep(60)")
    rt.start(pod("w", code, net=net, k=9))
    until(rt, lambda: phase(rt, "w") == "Running")
    netns = Path("/run/netns") / rt.host.network.netns("w")  # type: ignore[union-attr]
    assert netns.exists()
    rt._closed = True  # as if the agent were killed: the pod runs on
    second = runtime()
    assert netns.exists() and phase(second, "w") == "Running"
    second.start(pod("w", code, net=net, k=9, hosts=[[net.ip(10), ["late.train"]]]))  # a START again: new names
    until(second, lambda: "peer" in log_of(tmp_path, "w"))
    assert f"peer {net.ip(10)}" in log_of(tmp_path, "w")
    second.shutdown(1)  # SIGTERM to the agent: pods stopped, their namespaces gone, the bridge too
    assert not netns.exists()
    assert not (tmp_path / "state" / "files" / "w").exists()
    second._closed = False


def test_a_host_network_pod_keeps_the_hosts_network(env, tmp_path: Path) -> None:
    net, runtime = env
    rt = runtime()
    code = "import os; print('netns', os.readlink('/proc/self/ns/net'))"
    rt.start(pod("h", code, net=net, k=11, hostNetwork=True))
    until(rt, lambda: phase(rt, "h") == "Succeeded")
    assert f"netns {os.readlink('/proc/self/ns/net')}" in log_of(tmp_path, "h")
