"""This node's pods as the API server knows them: a list, then a watch (Kubernetes mode's pod source)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from agent.pods import PodInfo, pod_info

# logs under the name it had in agent/pods.py, so log lines read as before the move
log = logging.getLogger("agent.pods")


class KubernetesPodSource:
    """This node's pods from the API server: a list, then a watch that resumes from its resourceVersion.

    A watch that expires (410 Gone) or fails relists; the inventory served
    meanwhile is the last complete one.
    """

    def __init__(self, core_v1: Any, node_name: str, *, resync: float = 300.0):
        self.api = core_v1
        self.node_name = node_name
        self.resync = resync
        self._pods: dict[str, PodInfo] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.synced = threading.Event()

    def pods(self) -> list[PodInfo]:
        with self._lock:
            return list(self._pods.values())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _selector(self) -> str:
        return f"spec.nodeName={self.node_name}"

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        while not self._stop.is_set():
            try:
                version = self._relist()
                deadline = time.monotonic() + self.resync
                w = watch.Watch()
                for event in w.stream(self.api.list_pod_for_all_namespaces, field_selector=self._selector(),
                                      resource_version=version, timeout_seconds=60):
                    self._apply(event["type"], event["object"])
                    if self._stop.is_set() or time.monotonic() > deadline:
                        w.stop()
                        break
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("pod watch failed: %s %s; relisting", exc.status, exc.reason)
                    self._stop.wait(2)
            except Exception as exc:  # network trouble: keep the last inventory, retry
                log.warning("pod watch failed: %s; retrying", exc)
                self._stop.wait(2)

    def _relist(self) -> str:
        result = self.api.list_pod_for_all_namespaces(field_selector=self._selector())
        serialize = self.api.api_client.sanitize_for_serialization
        fresh = {}
        for item in result.items:
            doc = serialize(item)
            info = self._info(doc)
            if info is not None and not _finished(doc):
                fresh[info.uid] = info
        with self._lock:
            self._pods = fresh
        self.synced.set()
        return result.metadata.resource_version

    def _apply(self, kind: str, obj: Any) -> None:
        doc = self.api.api_client.sanitize_for_serialization(obj)
        info = self._info(doc)
        if info is None:
            return
        with self._lock:
            if kind == "DELETED" or _finished(doc):
                self._pods.pop(info.uid, None)
            else:
                self._pods[info.uid] = info

    @staticmethod
    def _info(doc: dict) -> PodInfo | None:
        try:
            return pod_info(doc)
        except ValueError as exc:
            log.warning("ignoring pod: %s", exc)
            return None


def _finished(doc: dict) -> bool:
    """A pod that ran to completion holds no resources (the API server still lists it)."""
    return (doc.get("status") or {}).get("phase") in ("Succeeded", "Failed")
