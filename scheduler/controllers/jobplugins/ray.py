"""ray: a Ray cluster of a head task and a worker task (Volcano's distributed-framework/ray).

The head task's head container (``--head``/``--headContainer``, both ``head``) opens the GCS
(``--port``, 6379), dashboard (``--dashboardPort``, 8265) and client (``--clientPort``, 10001) ports and
runs ``ray start --head --block``; the worker containers (``--worker``/``--workerContainer``) run
``ray start --block --address=<head>:<port>``, the head being its first pod's ``<host>.<subdomain>``
(resolvable through the svc plugin, which a Job naming ray gets).  A Service ``<job>-head-svc`` selects
the head pod with those three ports.

Unlike Volcano's, a container that sets its own ``command`` (or ``args``) keeps them: the start
command is only filled in where the container has none (Volcano overwrites it, which the Ray plugin
guide calls out).  A Job without the head task is refused at apply (Volcano fails each pod's creation).
"""

from __future__ import annotations

from scheduler.controllers.jobplugins.base import Flag, JobObjects, JobPlugin, domain_name, open_port, task_key
from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Job
from scheduler.controllers.kinds import SERVICE

PORT_NAMES = ("gcs", "dashboard", "client-server")


def head_service_name(job: Job) -> str:
    return f"{job.name}-head-svc"


class RayPlugin(JobPlugin):
    name = "ray"
    flags = {
        "head": Flag(str, "head", "name of the head task"),
        "headContainer": Flag(str, "head", "name of the container that runs the head in a head pod"),
        "worker": Flag(str, "worker", "name of the worker task"),
        "workerContainer": Flag(str, "worker", "name of the container that runs a worker in a worker pod"),
        "port": Flag(int, 6379, "the GCS port"),
        "dashboardPort": Flag(int, 8265, "the dashboard port"),
        "clientPort": Flag(int, 10001, "the Ray client server port"),
    }

    @property
    def ports(self) -> tuple[int, int, int]:
        return self.args["port"], self.args["dashboardPort"], self.args["clientPort"]

    def validate(self, job: Job) -> tuple[str, str] | None:
        if job.spec.task(self.args["head"]) is None:
            return "spec.plugins.ray", f"the ray head task {self.args['head']!r} was not found in spec.tasks"
        return None

    def head_command(self) -> list[str]:
        port, dashboard, client = self.ports
        return ["sh", "-c", f"ray start --head --block --dashboard-host=0.0.0.0 --port={port} "
                            f"--dashboard-port={dashboard} --ray-client-server-port={client}"]

    def worker_command(self, job: Job) -> list[str]:
        head = job.spec.task(self.args["head"])
        assert head is not None  # validated at admission
        return ["sh", "-c", f"ray start --block --address={domain_name(head, job.name, 0)}:{self.args['port']}"]

    def on_pod_create(self, pod: dict, job: Job) -> None:
        if job.spec.task(self.args["head"]) is None:
            return
        role = task_key(pod)
        for container in pod.setdefault("spec", {}).get("containers") or []:
            name = container.get("name")
            if role == self.args["head"] and name == self.args["headContainer"]:
                for port, port_name in zip(self.ports, PORT_NAMES, strict=True):
                    open_port(container, port, port_name)
                command = self.head_command()
            elif role == self.args["worker"] and name == self.args["workerContainer"]:
                command = self.worker_command(job)
            else:
                continue
            if not container.get("command") and not container.get("args"):
                container["command"] = command

    def add_objects(self, job: Job, objects: JobObjects) -> None:
        objects.create({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": head_service_name(job), "namespace": job.namespace},
            "spec": {"selector": {keys.JOB_NAME: job.name, keys.JOB_NAMESPACE: job.namespace,
                                  keys.TASK_SPEC: self.args["head"]},
                     "ports": [{"name": n, "port": p, "targetPort": n, "protocol": "TCP"}
                               for p, n in zip(self.ports, PORT_NAMES, strict=True)]},
        })

    def delete_objects(self, job: Job, objects: JobObjects) -> None:
        objects.delete(SERVICE, head_service_name(job))
