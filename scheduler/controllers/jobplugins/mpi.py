"""mpi: an MPI master and its workers (Volcano's distributed-framework/mpi).

Every container (init containers too) opens the ssh port (``--port``, 22) as ``mpijob-port``; the
master task's containers get ``MPI_HOST``, the worker pods' names (``<host>.<subdomain>``, comma
separated).  The hostfile itself is the svc plugin's ``/etc/volcano/<worker>.host``; the ssh keys are
the ssh plugin's (both are added to a Job that names mpi).  A Job without the master task
(``--master``, default ``master``) is refused at apply, as Volcano's webhook refuses it.
"""

from __future__ import annotations

from scheduler.controllers.jobplugins.base import Flag, JobPlugin, add_env, containers, open_port, task_hosts, task_key
from scheduler.controllers.jobs.spec import Job

MPI_HOST = "MPI_HOST"


class MpiPlugin(JobPlugin):
    name = "mpi"
    flags = {
        "master": Flag(str, "master", "name of the master task"),
        "worker": Flag(str, "worker", "name of the worker task"),
        "port": Flag(int, 22, "the port (sshd's) every container opens"),
    }

    def validate(self, job: Job) -> tuple[str, str] | None:
        if job.spec.task(self.args["master"]) is None:
            return "spec.plugins.mpi", f"The specified mpi master task was not found: spec.tasks has no {self.args['master']!r}"
        return None

    def on_pod_create(self, pod: dict, job: Job) -> None:
        env = None
        if task_key(pod) == self.args["master"]:
            worker = job.spec.task(self.args["worker"])
            if worker is None:
                return
            env = {"name": MPI_HOST, "value": ",".join(task_hosts(worker, job.name))}
        for container in containers(pod):
            open_port(container, self.args["port"], "mpijob-port")
            if env is not None:
                add_env(container, dict(env))
