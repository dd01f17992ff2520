"""svc: the pods of a Job find each other by name (Volcano's plugins/svc).

* a headless Service named after the Job selects its pods, so ``<hostname>.<job>`` resolves to each
  pod (``--publish-not-ready-addresses`` also lists pods that are not ready);
* each pod gets hostname = its pod name and subdomain = the Job name (unless its template sets them);
* a ConfigMap ``<job>-svc`` holds, per task, ``<task>.host`` (one host per line),
  ``VC_<TASK>_HOSTS`` (comma-separated) and ``VC_<TASK>_NUM``; it is mounted at ``/etc/volcano`` and
  its two variables are set in every container (unless ``--inject-hosts-env=false``);
* a NetworkPolicy admits traffic to the Job's pods only from its own pods (``--disable-network-policy``
  leaves it out).
Task names with ``-`` become ``_`` in the keys and variables (and are upper-cased in the variables).
"""

from __future__ import annotations

from scheduler.controllers.jobplugins.base import Flag, JobObjects, JobPlugin, add_env, containers, task_hosts
from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Job
from scheduler.controllers.kinds import CONFIGMAP, NETWORK_POLICY, SERVICE

MOUNT_PATH = "/etc/volcano"


def env_key(task_name: str) -> str:
    return task_name.replace("-", "_").upper()


def hosts_data(job: Job) -> dict[str, str]:
    """The ConfigMap's data (svc GenerateHosts)."""
    data: dict[str, str] = {}
    for task in job.spec.tasks:
        hosts = task_hosts(task, job.name)
        data[f"{task.name.replace('-', '_')}.host"] = "\n".join(hosts)
        data[f"VC_{env_key(task.name)}_HOSTS"] = ",".join(hosts)
        data[f"VC_{env_key(task.name)}_NUM"] = str(len(hosts))
    return data


def configmap_name(job: Job) -> str:
    return f"{job.name}-svc"


def job_selector(job: Job) -> dict[str, str]:
    return {keys.JOB_NAME: job.name, keys.JOB_NAMESPACE: job.namespace}


class SvcPlugin(JobPlugin):
    name = "svc"
    flags = {
        "publish-not-ready-addresses": Flag(bool, False, "set publishNotReadyAddresses of the Service to true"),
        "disable-network-policy": Flag(bool, False, "do not create the NetworkPolicy"),
        "inject-hosts-env": Flag(bool, True, "set the VC_<TASK>_HOSTS and VC_<TASK>_NUM variables in every container"),
    }

    def on_pod_create(self, pod: dict, job: Job) -> None:
        spec = pod.setdefault("spec", {})
        if not spec.get("hostname"):
            spec["hostname"] = pod["metadata"]["name"]
        if not spec.get("subdomain"):
            spec["subdomain"] = job.name
        cm = configmap_name(job)
        if self.args["inject-hosts-env"]:
            env = []
            for task in job.spec.tasks:
                for var in (f"VC_{env_key(task.name)}_HOSTS", f"VC_{env_key(task.name)}_NUM"):
                    env.append({"name": var, "valueFrom": {"configMapKeyRef": {"name": cm, "key": var}}})
            for container in containers(pod):
                add_env(container, *env)
        spec.setdefault("volumes", []).append({"name": cm, "configMap": {"name": cm}})
        for container in containers(pod):
            container.setdefault("volumeMounts", []).append({"mountPath": MOUNT_PATH, "name": cm})

    def add_objects(self, job: Job, objects: JobObjects) -> None:
        objects.create_or_update(self._configmap(job), same=lambda old, new: old.get("data") == new.get("data"))
        objects.create({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": job.name, "namespace": job.namespace},
            "spec": {"clusterIP": "None", "selector": job_selector(job),
                     "publishNotReadyAddresses": bool(self.args["publish-not-ready-addresses"])},
        })
        if not self.args["disable-network-policy"]:
            selector = {"matchLabels": job_selector(job)}
            objects.create({
                "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": job.name, "namespace": job.namespace},
                "spec": {"podSelector": selector, "ingress": [{"from": [{"podSelector": selector}]}],
                         "policyTypes": ["Ingress"]},
            })

    def delete_objects(self, job: Job, objects: JobObjects) -> None:
        objects.delete(CONFIGMAP, configmap_name(job))
        objects.delete(SERVICE, job.name)
        if not self.args["disable-network-policy"]:
            objects.delete(NETWORK_POLICY, job.name)

    def on_job_update(self, job: Job, objects: JobObjects) -> None:
        objects.create_or_update(self._configmap(job), same=lambda old, new: old.get("data") == new.get("data"))

    @staticmethod
    def _configmap(job: Job) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": configmap_name(job), "namespace": job.namespace}, "data": hosts_data(job)}
