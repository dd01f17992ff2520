"""vcctl's commands against a cluster: :class:`KubeBackend`, the Kubernetes side of
:class:`scheduler.controllers.vcctl.Backend`.

Plain requests with the user's kubeconfig (a command makes a handful: no rate limiter, no informers).  What
the server answers becomes the backend's errors: 404 NotFound, 409 AlreadyExists (or a conflict, said as
it is), 400 and 422 an InputError with the server's message (a manifest it refuses), anything else and
no answer a VcctlError naming the server.

Queue state: Volcano keeps it in ``status.state`` and its vcctl asks Volcano's queue controller for a
change with a Command.  Scoria reads ``status.state`` and has no queue controller, so ``open`` and
``close`` write the state through the Queue's status subresource (a Queue being created with a state
gets it the same way: a create never sets the status of a kind that has that subresource).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from proto.errors import InputError
from scheduler.controllers.kinds import COMMAND, JOB, QUEUE, name_of, namespace_of, part
from scheduler.controllers.vcctl import AlreadyExists, NotFound, VcctlError
from scheduler.modes.kubernetes.apistatus import status_body

TIMEOUT = (10.0, 30.0)


def _gv(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


JOBS = (*_gv(JOB.api_version), "jobs")
COMMANDS = (*_gv(COMMAND.api_version), "commands")
QUEUES = (*_gv(QUEUE.api_version), "queues")


class KubeBackend:
    """:class:`scheduler.controllers.vcctl.Backend` over the API server of ``api_client``."""

    def __init__(self, api_client: Any):
        from kubernetes import client

        self.host = str(getattr(api_client.configuration, "host", "") or "the API server")
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # -- Jobs ---------------------------------------------------------------------------------------------
    def list_jobs(self, namespace: str | None) -> list[dict]:
        if namespace is None:
            answer = self._call("list jobs", self.custom.list_cluster_custom_object, *JOBS)
        else:
            answer = self._call(f"list jobs in {namespace}", self.custom.list_namespaced_custom_object,
                                *JOBS[:2], namespace, JOBS[2])
        return sorted(answer.get("items") or [], key=lambda j: (namespace_of(j), name_of(j)))

    def get_job(self, namespace: str, name: str) -> dict:
        return self._call(f"job {namespace}/{name}", self.custom.get_namespaced_custom_object, *JOBS[:2],
                          namespace, JOBS[2], name)

    def create_job(self, doc: dict) -> dict:
        ns = namespace_of(doc)
        return self._call(f"job {ns}/{name_of(doc)}", self.custom.create_namespaced_custom_object, *JOBS[:2], ns,
                          JOBS[2], doc)

    def delete_job(self, namespace: str, name: str) -> None:
        self._call(f"job {namespace}/{name}", self.custom.delete_namespaced_custom_object, *JOBS[:2], namespace,
                   JOBS[2], name, body={"propagationPolicy": "Background"})

    def create_command(self, doc: dict) -> dict:
        ns = namespace_of(doc)
        return self._call(f"command {ns}/{name_of(doc)}", self.custom.create_namespaced_custom_object,
                          *COMMANDS[:2], ns, COMMANDS[2], doc)

    def job_events(self, namespace: str, name: str) -> list[dict]:
        answer = self._call(f"events of job {namespace}/{name}", self.core.list_namespaced_event, namespace,
                            field_selector=f"involvedObject.name={name},involvedObject.kind=Job")
        events = [e for e in answer.get("items") or []
                  if part(e, "involvedObject").get("apiVersion") in (None, "", JOB.api_version)]
        out = [{"type": e.get("type") or "", "reason": e.get("reason") or "", "message": e.get("message") or "",
                "time": e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or ""}
               for e in events]
        return sorted(out, key=lambda e: str(e["time"]))

    # -- Queues -------------------------------------------------------------------------------------------
    def list_queues(self) -> list[dict]:
        answer = self._call("list queues", self.custom.list_cluster_custom_object, *QUEUES)
        return sorted(answer.get("items") or [], key=name_of)

    def get_queue(self, name: str) -> dict:
        return self._call(f"queue {name}", self.custom.get_cluster_custom_object, *QUEUES, name)

    def create_queue(self, doc: dict) -> dict:
        made = self._call(f"queue {name_of(doc)}", self.custom.create_cluster_custom_object, *QUEUES, doc)
        state = part(doc, "status").get("state")
        if state and part(made, "status").get("state", "Open") != state:  # no state reads as Open
            self.set_queue_state(name_of(doc), str(state))
            made = self.get_queue(name_of(doc))
        return made

    def set_queue_state(self, name: str, state: str) -> None:
        # a Queue's status must hold ``allocated`` (Volcano's CRD); an empty map merged in keeps what it holds
        self._call(f"queue {name}", self.custom.patch_cluster_custom_object_status, *QUEUES, name,
                   {"status": {"state": state, "allocated": {}}})

    def set_queue_weight(self, name: str, weight: int) -> None:
        self._call(f"queue {name}", self.custom.patch_cluster_custom_object, *QUEUES, name,
                   {"spec": {"weight": weight}})

    def delete_queue(self, name: str) -> None:
        self._call(f"queue {name}", self.custom.delete_cluster_custom_object, *QUEUES, name)

    # -- inside -------------------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            resp = fn(*args, _preload_content=False, _request_timeout=TIMEOUT, **kwargs)
        except ApiException as exc:
            status = status_body(exc)
            message = str(status.get("message") or exc.reason or "")
            if exc.status == 404:
                if "the server could not find the requested resource" in message:
                    raise VcctlError(f"{what}: {self.host} does not serve Volcano's kinds (are the batch.volcano.sh "
                                     "and scheduling.volcano.sh CRDs installed?)") from None
                raise NotFound(f"{what} not found") from None
            if exc.status == 409:
                if status.get("reason") == "AlreadyExists":
                    raise AlreadyExists(f"{what} already exists") from None
                raise VcctlError(f"{what}: {message}") from None
            if exc.status in (400, 422):
                raise InputError(f"{what}: refused: {message}") from None
            if exc.status in (401, 403):
                raise VcctlError(f"{what}: {self.host} refused the request ({exc.status}): {message}") from None
            raise VcctlError(f"{what}: {self.host} answered {exc.status} {message}") from None
        except (OSError, HTTPError) as exc:  # no answer: refused, reset, timed out, a URL that is no URL
            raise VcctlError(f"{what}: cannot reach {self.host}: {exc}") from None
        data = resp.data
        return json.loads(data) if data else {}
