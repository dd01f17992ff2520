"""pytorch: torch.distributed's rendezvous variables for a master task and a worker task (Volcano's
distributed-framework/pytorch).

Every container of every pod gets ``MASTER_ADDR`` (the master's first pod, ``<host>.<subdomain>``),
``MASTER_PORT`` (``--port``, 23456) and ``WORLD_SIZE`` (master and worker replicas together); pods of
the master and worker tasks also get ``RANK`` (0 for the master, index + 1 for a worker) and the port
opened.  ``--wait-master-enabled`` adds an init container to each worker that waits until the master's
port answers.  Without a master task (``--master``, default ``master``) the plugin does nothing.
"""

from __future__ import annotations

from scheduler.controllers.jobplugins.base import (
    Flag,
    JobPlugin,
    add_env,
    containers,
    domain_name,
    open_port,
    pod_index,
    task_key,
)
from scheduler.controllers.jobs.spec import Job

WAIT_CONTAINER = "wait-for-master"


def wait_script(addr: str, port: int, timeout: int) -> str:
    """Shell that polls ``addr:port`` every 2 s until it answers, failing after ``timeout`` seconds."""
    return (f'echo "Waiting for master node {addr}:{port} to be ready..."\n'
            f"TIMEOUT={timeout}\nELAPSED=0\n"
            f"until {{ nc -z {addr} {port} || echo > /dev/tcp/{addr}/{port}; }} 2>/dev/null; do\n"
            '  if [ $ELAPSED -ge $TIMEOUT ]; then\n'
            '    echo "Timeout waiting for master after ${TIMEOUT} seconds"\n    exit 1\n  fi\n'
            '  echo "Master not ready yet, retrying in 2 seconds... (elapsed: ${ELAPSED}s)"\n'
            "  sleep 2\n  ELAPSED=$((ELAPSED + 2))\ndone\n"
            'echo "Master node is ready!"')


class PytorchPlugin(JobPlugin):
    name = "pytorch"
    flags = {
        "master": Flag(str, "master", "name of the master task"),
        "worker": Flag(str, "worker", "name of the worker task"),
        "port": Flag(int, 23456, "the master's port"),
        "wait-master-enabled": Flag(bool, False, "workers wait in an init container until the master's port answers"),
        "wait-master-timeout": Flag(int, 300, "seconds a worker waits for the master"),
        "wait-master-image": Flag(str, "busybox:1.36.1", "image of the waiting init container"),
    }

    def on_pod_create(self, pod: dict, job: Job) -> None:
        master, worker, port = self.args["master"], self.args["worker"], self.args["port"]
        master_task = job.spec.task(master)
        if master_task is None:
            return
        role = task_key(pod)
        addr = domain_name(master_task, job.name, 0)
        rank = None
        if role == worker:
            rank = int(pod_index(pod)) + 1
            self._wait_for_master(pod, addr)
        elif role == master:
            rank = 0
        world = sum(t.replicas for t in job.spec.tasks if t.name in (master, worker))
        for container in containers(pod, init=False):
            open_port(container, port, "pytorchjob-port")
            add_env(container, {"name": "MASTER_ADDR", "value": addr}, {"name": "MASTER_PORT", "value": str(port)},
                    {"name": "WORLD_SIZE", "value": str(world)})
            if rank is not None:
                add_env(container, {"name": "RANK", "value": str(rank)})

    def _wait_for_master(self, pod: dict, addr: str) -> None:
        if not self.args["wait-master-enabled"]:
            return
        inits = pod.setdefault("spec", {}).setdefault("initContainers", [])
        if any(c.get("name") == WAIT_CONTAINER for c in inits):
            return
        inits.append({"name": WAIT_CONTAINER, "image": self.args["wait-master-image"],
                      "command": ["sh", "-c", wait_script(addr, self.args["port"], self.args["wait-master-timeout"])]})
