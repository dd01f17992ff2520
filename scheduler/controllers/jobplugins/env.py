"""env: each container learns its pod's index in its task (Volcano's plugins/env)."""

from __future__ import annotations

from scheduler.controllers.jobplugins.base import JobPlugin, add_env, containers, pod_index
from scheduler.controllers.jobs.spec import Job

TASK_VK_INDEX = "VK_TASK_INDEX"
TASK_INDEX = "VC_TASK_INDEX"


class EnvPlugin(JobPlugin):
    name = "env"

    def on_pod_create(self, pod: dict, job: Job) -> None:
        index = pod_index(pod)
        for container in containers(pod):
            add_env(container, {"name": TASK_VK_INDEX, "value": index}, {"name": TASK_INDEX, "value": index})
