"""tensorflow: ``TF_CONFIG`` for each container (Volcano's distributed-framework/tensorflow).

``{"cluster": {"ps": [...], "worker": [...], "chief": [...], "evaluator": [...]}, "task": {"type": ...,
"index": i}}`` with every pod as ``<host>.<subdomain>:<port>`` (``--port``, 2222); the role task names are
``--ps``, ``--worker``, ``--chief``, ``--evaluator``.  A job of one task with one replica is stand-alone
and gets nothing.
"""

from __future__ import annotations

import json

from scheduler.controllers.jobplugins.base import Flag, JobPlugin, add_env, containers, domain_name, pod_index, task_key
from scheduler.controllers.jobs.spec import Job

ROLES = ("ps", "worker", "chief", "evaluator")  # the cluster map's order
TYPE_ORDER = ("chief", "worker", "ps", "evaluator")  # the order Volcano matches a pod's task type in


class TensorflowPlugin(JobPlugin):
    name = "tensorflow"
    flags = {
        "ps": Flag(str, "ps", "name of the parameter-server task"),
        "worker": Flag(str, "worker", "name of the worker task"),
        "chief": Flag(str, "chief", "name of the chief task"),
        "evaluator": Flag(str, "evaluator", "name of the evaluator task"),
        "port": Flag(int, 2222, "the port every task listens on"),
    }

    def tf_config(self, pod: dict, job: Job) -> dict:
        cluster: dict[str, list[str]] = {}
        for task in job.spec.tasks:
            # the first role (in Volcano's switch order) whose task name matches
            role = next((r for r in ROLES if self.args[r] == task.name), None)
            if role is not None:
                cluster[role] = [f"{domain_name(task, job.name, i)}:{self.args['port']}" for i in range(task.replicas)]
        key = task_key(pod)
        kind = next((r for r in TYPE_ORDER if self.args[r] == key), key)
        return {"cluster": {role: cluster[role] for role in ROLES if cluster.get(role)},
                "task": {"type": kind, "index": int(pod_index(pod))}}

    def on_pod_create(self, pod: dict, job: Job) -> None:
        if len(job.spec.tasks) == 1 and job.spec.tasks[0].replicas == 1:
            return
        value = json.dumps(self.tf_config(pod, job), separators=(",", ":"))
        for container in containers(pod, init=False):
            add_env(container, {"name": "TF_CONFIG", "value": value})
