"""Kubernetes mode by hand, for tests/scheduler/modes/test_kubernetes*.py (their ``api`` and ``harness``
fixtures are in tests/scheduler/modes/conftest.py), and ``serve --kubernetes`` as a process against an API
server (those tests and tests/e2e/test_kmock.py)."""

from __future__ import annotations

import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path

import yaml

from hack.lib.fake_apiserver import FakeApiServer
from hack.lib.processes import start_serve
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import parse_config
from scheduler.modes.kubernetes import mode


class Harness:
    """A fake API server, the informers and effects of Kubernetes mode, and a scheduler to cycle by hand.

    Kubernetes mode starts once the kinds scheduling needs are listed; the harness waits for the Namespaces
    too (at most 10 s), so that a first cycle sees them, unless ``namespaces`` is False."""

    def __init__(self, api: FakeApiServer, config: str | None = None, *, namespaces: bool = True, **kwargs):
        self.api = api
        self.cache = ClusterCache()
        self.stop = threading.Event()
        self.kube = mode.start(self.cache, api.client(), self.stop, resync=3600, **kwargs)
        if namespaces:
            self.kube.source.informer("namespaces").synced.wait(10)
        self.scheduler = Scheduler(self.cache, effects=self.kube.effects,
                                   config=parse_config(config, "test") if config else None,
                                   clock=lambda: datetime.now(UTC))

    def cycle(self):
        result = self.scheduler.run_once()
        assert self.kube.effects.drain(10)
        return result

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        obj = self.api.get("pods", name, namespace)
        return obj["spec"].get("nodeName") if obj else None

    def close(self) -> None:
        self.stop.set()
        self.kube.close()


def write_kubeconfig(path: Path, url: str, name: str = "fake") -> Path:
    """A kubeconfig at ``path`` whose one context (``name``) reaches ``url`` with a token."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "u"}}]}))
    return path


def serve_kubernetes(folder: Path, url: str, *extra: str, name: str = "fake") -> subprocess.Popen:
    """``python -m scheduler serve`` as the Deployment runs it (leader-elected, its lease in kube-system) against
    the API server at ``url``, then ``extra`` arguments; its kubeconfig and port file in ``folder``, its
    standard error piped."""
    kubeconfig = write_kubeconfig(folder / "kubeconfig", url, name)
    return start_serve("--kubernetes", "--kubeconfig", str(kubeconfig), "--insecure", "--listen", "127.0.0.1:0",
                       "--metrics-port", "0", "--schedule-interval", "0.2", "--leader-elect",
                       "--lease-namespace", "kube-system", *extra, port_file=folder / "port",
                       stderr=subprocess.PIPE, text=True)
