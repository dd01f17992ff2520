"""ssh: password-less ssh between a Job's pods (Volcano's plugins/ssh).

A Secret ``<job>-ssh`` holds an RSA key pair (``id_rsa``, ``id_rsa.pub``), ``authorized_keys`` (the
public key) and an ssh ``config`` naming every pod (``Host <hostname>`` / ``HostName
<hostname>.<subdomain>`` / ``Port``); every container mounts it at ``--ssh-key-file-path``
(``/root/.ssh``; files mode 0600 there, 0644 elsewhere).  ``--ssh-private-key``/``--ssh-public-key``
give the keys instead of generating them; ``--ssh-port`` sets the port in the config (22).
``--no-root`` is the flag Volcano had before 1.1: the keys go to ``/etc/volcano/.ssh`` unless a path is
given.
"""

from __future__ import annotations

import base64

from scheduler.controllers.jobplugins.base import Flag, JobObjects, JobPlugin, containers, host_of
from scheduler.controllers.jobs.spec import Job
from scheduler.controllers.kinds import SECRET

PRIVATE_KEY, PUBLIC_KEY, AUTHORIZED_KEYS, CONFIG = "id_rsa", "id_rsa.pub", "authorized_keys", "config"
ROOT_PATH = "/root/.ssh"
NO_ROOT_PATH = "/etc/volcano/.ssh"
RELATIVE_PATH = ".ssh"


def secret_name(job: Job) -> str:
    return f"{job.name}-ssh"


def ssh_config(job: Job, port: int) -> str:
    """The ssh client config listing every pod of every task (generateSSHConfig)."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in job.spec.tasks:
        for i in range(task.replicas):
            hostname, subdomain = host_of(task, job.name, i)
            lines += [f"Host {hostname}", f"  HostName {hostname}.{subdomain}", f"  Port {port}"]
            if (task.template.get("spec") or {}).get("hostname"):
                break
    return "\n".join(lines) + "\n"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class SshPlugin(JobPlugin):
    name = "ssh"
    flags = {
        "ssh-key-file-path": Flag(str, "", "where the keys are mounted (/root/.ssh by default)"),
        "ssh-private-key": Flag(str, "", "the private key to use instead of a generated one"),
        "ssh-public-key": Flag(str, "", "the public key that goes with --ssh-private-key"),
        "ssh-port": Flag(int, 22, "the port written into the ssh config"),
        "no-root": Flag(bool, False, "keys for a user other than root (Volcano before 1.1): mounted at "
                                     "/etc/volcano/.ssh unless --ssh-key-file-path says otherwise"),
    }

    @property
    def key_path(self) -> str:
        return self.args["ssh-key-file-path"] or (NO_ROOT_PATH if self.args["no-root"] else ROOT_PATH)

    @property
    def port(self) -> int:
        port = self.args["ssh-port"]
        return port if 0 < port <= 65535 else 22  # Volcano falls back to 22 for a port out of range

    def validate(self, job: Job) -> tuple[str, str] | None:
        if bool(self.args["ssh-private-key"]) != bool(self.args["ssh-public-key"]):
            return "spec.plugins.ssh", "--ssh-private-key and --ssh-public-key go together"
        return None

    def on_pod_create(self, pod: dict, job: Job) -> None:
        name = secret_name(job)
        mode = 0o600 if self.key_path == ROOT_PATH else 0o644
        items = [{"key": k, "path": f"{RELATIVE_PATH}/{k}"} for k in (PRIVATE_KEY, PUBLIC_KEY, AUTHORIZED_KEYS, CONFIG)]
        pod.setdefault("spec", {}).setdefault("volumes", []).append(
            {"name": name, "secret": {"secretName": name, "items": items, "defaultMode": mode}})
        for container in containers(pod):
            container.setdefault("volumeMounts", []).append(
                {"mountPath": self.key_path, "subPath": RELATIVE_PATH, "name": name})

    def add_objects(self, job: Job, objects: JobObjects) -> None:
        config = _b64(ssh_config(job, self.port))
        existing = objects.get(SECRET, secret_name(job))
        if existing is not None and (existing.get("data") or {}).get(CONFIG) == config:
            return  # Volcano rewrites the Secret only when its ssh config changed: the keys stay
        if self.args["ssh-private-key"]:
            private, public = self.args["ssh-private-key"], self.args["ssh-public-key"]
        else:
            private, public = objects.key_pair()
        data = {PRIVATE_KEY: _b64(private), PUBLIC_KEY: _b64(public), AUTHORIZED_KEYS: _b64(public), CONFIG: config}
        objects.create_or_update(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name(job), "namespace": job.namespace},
             "data": data},
            same=lambda old, new: (old.get("data") or {}).get(CONFIG) == new["data"][CONFIG])

    def delete_objects(self, job: Job, objects: JobObjects) -> None:
        objects.delete(SECRET, secret_name(job))
