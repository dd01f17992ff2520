"""A real Ray cluster from the ``ray`` Job plugin in embedded mode (issue 17): the head and two workers started by
the plugin's own commands join, a Ray client driver in the same Job runs a remote function on every node, and
the dashboard port answers.

Ray is not one of the project's dependencies (it is large and not needed to test the plugin, whose commands and
ports the unit tests check): this test runs where ``SCORIA_RAY_BIN`` names the ``bin`` folder of a Python
environment that has ``ray[default]`` installed, and is skipped elsewhere, CI included::

    python3.11 -m venv /opt/rayenv && /opt/rayenv/bin/pip install 'ray[default]'
    SCORIA_RAY_BIN=/opt/rayenv/bin ./hack/test.sh tests/e2e/test_ray_job.py
"""

from __future__ import annotations

import ast
import ipaddress
import os
from pathlib import Path

import pytest

from tests.e2e.test_volcano_jobs import JobStack, _unavailable, job, until

RAY_BIN = os.environ.get("SCORIA_RAY_BIN", "")
pytestmark = pytest.mark.skipif(
    bool(_unavailable()) or not (RAY_BIN and (Path(RAY_BIN) / "ray").exists()),
    reason=_unavailable() or "SCORIA_RAY_BIN does not name a folder with Ray's ray command (see the docstring)")

DRIVER = """
import json, sys, time, urllib.request
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init("ray://ray-head-0.ray:10001")            # the client-server port the plugin opened on the head
deadline = time.time() + 240
while len([n for n in ray.nodes() if n["Alive"]]) < 3:
    assert time.time() < deadline, ray.nodes()
    time.sleep(1)
nodes = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
print("nodes", len(nodes), nodes, flush=True)

@ray.remote(num_cpus=1)
def square(x):
    import socket, time
    time.sleep(0.5)
    return x * x, ray.util.get_node_ip_address(), socket.gethostname()

alive = [n for n in ray.nodes() if n["Alive"]]
results = ray.get([square.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False))
                   .remote(i) for i, n in enumerate(alive)])
print("results", sorted(results), flush=True)
with urllib.request.urlopen("http://ray-head-0.ray:8265/api/version", timeout=10) as answer:
    print("dashboard", answer.status, json.loads(answer.read())["ray_version"], flush=True)
ray.shutdown()
"""


def ray_task(name: str, replicas: int, tag: str, command: list[str] | None = None, **more) -> dict:
    container: dict = {
        "name": name, "image": "rayproject/ray:latest-py311-cpu",  # the image is not used in embedded mode
        "env": [{"name": "PATH", "value": f"{RAY_BIN}:/usr/local/bin:/usr/bin:/bin"},
                {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"}, {"name": "SCORIA_TEST_TAG", "value": tag}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        # each pod its own /tmp/ray: Ray's session folders and sockets are per machine, and here three Ray nodes
        # share one machine
        "volumeMounts": [{"name": "ray-tmp", "mountPath": "/tmp/ray"}],
    }
    if command:
        container["command"] = command
    return {"name": name, "replicas": replicas, **more,
            "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                                  "containers": [container], "volumes": [{"name": "ray-tmp", "emptyDir": {}}]}}}


def test_a_ray_cluster_from_the_ray_plugin_runs_a_remote_function_on_every_node(tmp_path: Path) -> None:
    s = JobStack(tmp_path).up()
    try:
        # the head and the workers keep the plugin's commands (ray start --head ..., ray start --address=...)
        s.apply(job("ray", [ray_task("head", 1, s.tag), ray_task("worker", 2, s.tag),
                            ray_task("driver", 1, s.tag, [f"{RAY_BIN}/python", "-c", DRIVER, s.tag],
                                     policies=[{"event": "TaskCompleted", "action": "CompleteJob"}])],
                    minAvailable=4, plugins={"ray": []}))
        until(lambda: s.phase("ray") in ("Completed", "Failed", "Aborted"), 420, "the ray job to finish", s)
        out = s.log_of("ray-driver-0")
        print(out)
        assert s.phase("ray") == "Completed", out + s.log_of("ray-head-0")
        assert "nodes 3" in out and "dashboard 200" in out, out
        results = ast.literal_eval(out.split("results ", 1)[1].splitlines()[0])  # the driver's printed list
        assert sorted(r[0] for r in results) == [0, 1, 4]
        assert {r[2] for r in results} == {"ray-head-0", "ray-worker-0", "ray-worker-1"}, results
        # each Ray node on its own pod's address in this stack's pod range (the pods are gone once the job
        # completes, so the range, not each pod's status, is what is compared)
        ips = {r[1] for r in results}
        assert len(ips) == 3 and all(ipaddress.ip_address(ip) in ipaddress.ip_network(s.cidr) for ip in ips), ips
    finally:
        s.close()
