"""The embedded cluster's pod network, as its scheduler keeps it: an address per pod and the names that resolve.

* :class:`PodAddresses` — addresses from the pod range (``serve --pod-cidr``, default
  :data:`~proto.vocab.podcontext.DEFAULT_POD_CIDR`): one per pod when it is bound, kept while it may run,
  given back when it has finished or gone.  The range's first address is the host's (the gateway, on the
  agents' bridge); a ``hostNetwork`` pod's address is the gateway.  Addresses are handed out in turn
  (the next after the last one given, wrapping), so one given back is not soon given again.
* :class:`ClusterNames` — what each namespace's pods resolve (their private ``/etc/hosts``), as
  Kubernetes' DNS would answer: a Service's name (``svc``, ``svc.ns``, ``svc.ns.svc``,
  ``svc.ns.svc.cluster.local``) means the addresses of the pods its selector picks (there is no virtual
  IP: a Service's ports are its pods' ports), and ``hostname.subdomain`` (and its longer forms) a pod
  whose ``spec.subdomain`` names a Service that picks it.  A pod is listed as soon as it has an address,
  ready or not (as with ``publishNotReadyAddresses``).  Each namespace's table carries a version that
  changes when the table does, so a running pod is sent new names only when they changed.

* :class:`PodNetworking` — the two together as embedded mode uses them: an address when a pod is bound,
  given back when it is gone, and the context of a START (:mod:`proto.vocab.podcontext`) with the
  ConfigMaps and Secrets the pod reads.

Thread-safe (one lock each): binds (the scheduling loop), reports (pod actions) and the controllers
change them.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proto.errors import InputError
from proto.vocab.podcontext import CONFIGMAPS, HOSTS, NETWORK, SECRETS, service_names


class PodAddresses:
    def __init__(self, cidr: str):
        try:
            net = ipaddress.IPv4Network(cidr, strict=True)
        except ValueError as exc:
            raise InputError(f"--pod-cidr: {exc}") from None
        if net.num_addresses < 8:
            raise InputError(f"--pod-cidr: {cidr} is too small (a /29 at least)")
        self.network = net
        self.gateway = str(net.network_address + 1)
        self._first, self._last = int(net.network_address) + 2, int(net.broadcast_address) - 1
        self._next = self._first
        self._lock = threading.Lock()
        self._by_uid: dict[str, str] = {}
        self._taken: set[int] = set()

    @property
    def cidr(self) -> str:
        return str(self.network)

    def context(self, ip: str) -> dict[str, str]:
        """What a START says of the pod's network (:mod:`proto.vocab.podcontext`)."""
        return {"podIP": ip, "cidr": self.cidr, "gateway": self.gateway}

    def restore(self, uid: str, ip: str) -> bool:
        """Keep an address given before a restart (False if it is not one of the range, or taken)."""
        try:
            value = int(ipaddress.IPv4Address(ip))
        except ValueError:
            return False
        with self._lock:
            if not self._first <= value <= self._last or value in self._taken:
                return False
            self._by_uid[uid] = ip
            self._taken.add(value)
            self._next = value + 1 if value < self._last else self._first
            return True

    def assign(self, uid: str) -> str:
        """The pod's address (the one it has, else the next free one); InputError when the range is full."""
        with self._lock:
            if uid in self._by_uid:
                return self._by_uid[uid]
            size = self._last - self._first + 1
            for step in range(size):
                value = self._first + (self._next - self._first + step) % size
                if value not in self._taken:
                    self._taken.add(value)
                    self._next = value + 1 if value < self._last else self._first
                    ip = str(ipaddress.IPv4Address(value))
                    self._by_uid[uid] = ip
                    return ip
        raise InputError(f"the pod range {self.cidr} has no free address left (--pod-cidr sets a larger one)")

    def release(self, uid: str) -> None:
        with self._lock:
            ip = self._by_uid.pop(uid, None)
            if ip is not None:
                self._taken.discard(int(ipaddress.IPv4Address(ip)))

    def of(self, uid: str) -> str | None:
        with self._lock:
            return self._by_uid.get(uid)


@dataclass(frozen=True)
class NamedPod:
    name: str
    ip: str
    labels: tuple[tuple[str, str], ...]
    hostname: str
    subdomain: str


class ClusterNames:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, NamedPod]] = {}        # namespace -> uid -> pod
        self._services: dict[str, dict[str, dict[str, str]]] = {}  # namespace -> name -> selector
        self._tables: dict[str, tuple[str, list]] = {}           # namespace -> (version, table)

    # -- changes ---------------------------------------------------------------------------------
    def set_pod(self, namespace: str, uid: str, pod: NamedPod | None) -> None:
        with self._lock:
            pods = self._pods.setdefault(namespace, {})
            if pods.get(uid) == pod:
                return
            if pod is None:
                pods.pop(uid, None)
            else:
                pods[uid] = pod
            self._tables.pop(namespace, None)

    def set_service(self, namespace: str, name: str, selector: dict[str, str] | None) -> None:
        """A Service (its selector; None: gone).  A Service without a selector names no pod."""
        with self._lock:
            services = self._services.setdefault(namespace, {})
            if services.get(name) == selector and (selector is not None or name not in services):
                return
            if selector is None:
                services.pop(name, None)
            else:
                services[name] = dict(selector)
            self._tables.pop(namespace, None)

    # -- reading ---------------------------------------------------------------------------------
    def table(self, namespace: str) -> tuple[str, list]:
        """``(version, [[address, [names]], ...])`` for the namespace; the version changes with the table."""
        with self._lock:
            cached = self._tables.get(namespace)
            if cached is not None:
                return cached
            table = self._build(namespace)
            version = hashlib.sha1(json.dumps(table, sort_keys=True).encode()).hexdigest()[:16]
            self._tables[namespace] = (version, table)
            return version, table

    def _build(self, namespace: str) -> list:
        pods = sorted(self._pods.get(namespace, {}).values(), key=lambda p: p.name)
        out: list = []
        for service, selector in sorted(self._services.get(namespace, {}).items()):
            if not selector:
                continue
            chosen = [p for p in pods if all((k, v) in p.labels for k, v in selector.items())]
            for pod in chosen:
                if pod.subdomain == service and pod.hostname:
                    out.append([pod.ip, service_names(f"{pod.hostname}.{service}", namespace)])
            for ip in sorted({p.ip for p in chosen}, key=lambda a: ipaddress.IPv4Address(a)):
                out.append([ip, service_names(service, namespace)])
        return out


class PodNetworking:
    """What embedded mode does for pods' networks: an address at bind, the names of the namespace, and the
    context a START carries (:mod:`proto.vocab.podcontext`), ConfigMaps and Secrets included."""

    def __init__(self, cidr: str, lookup: Callable[[str, str], dict | None]) -> None:
        self.addresses = PodAddresses(cidr)
        self.names = ClusterNames()
        self._lookup = lookup  # (store kind, namespace/name) -> the stored manifest, or None
        self._sent: dict[str, str] = {}  # pod uid -> the version of the names its node last got
        self._lock = threading.Lock()

    # -- a pod's address -----------------------------------------------------------------------------
    def bound(self, uid: str, namespace: str, manifest: dict) -> str:
        """The pod is bound: its address (the gateway for a ``hostNetwork`` pod), and its names published."""
        spec = manifest["spec"] if isinstance(manifest.get("spec"), dict) else {}
        if spec.get("hostNetwork") is True:
            ip = self.addresses.gateway
        else:
            ip = self.addresses.assign(uid)
        self._publish(uid, namespace, manifest, ip)
        return ip

    def restore(self, uid: str, namespace: str, manifest: dict, ip: str) -> None:
        """A pod bound before a restart keeps its address and names."""
        if ip != self.addresses.gateway and not self.addresses.restore(uid, ip):
            return
        self._publish(uid, namespace, manifest, ip)

    def released(self, uid: str, namespace: str) -> None:
        """The pod has finished or is gone: its address is free, its names withdrawn."""
        self.addresses.release(uid)
        self.names.set_pod(namespace, uid, None)
        with self._lock:
            self._sent.pop(uid, None)

    def _publish(self, uid: str, namespace: str, manifest: dict, ip: str) -> None:
        meta = manifest["metadata"] if isinstance(manifest.get("metadata"), dict) else {}
        spec = manifest["spec"] if isinstance(manifest.get("spec"), dict) else {}
        labels = meta["labels"] if isinstance(meta.get("labels"), dict) else {}
        name = str(meta.get("name") or "")
        self.names.set_pod(namespace, uid, NamedPod(name, ip, tuple(sorted((str(k), str(v)) for k, v in labels.items())),
                                                    str(spec.get("hostname") or name), str(spec.get("subdomain") or "")))

    def service(self, namespace: str, name: str, manifest: dict | None) -> None:
        spec = (manifest or {}).get("spec")
        selector = spec.get("selector") if isinstance(spec, dict) else None
        self.names.set_service(namespace, name, {str(k): str(v) for k, v in selector.items()}
                               if isinstance(selector, dict) else ({} if manifest is not None else None))

    # -- what a START carries ------------------------------------------------------------------------
    def context(self, uid: str, namespace: str, manifest: dict) -> dict:
        """The START context of a bound pod: its address, its namespace's names, the objects it reads."""
        spec = manifest["spec"] if isinstance(manifest.get("spec"), dict) else {}
        ip = self.addresses.of(uid) or self.addresses.gateway
        version, table = self.names.table(namespace)
        with self._lock:
            self._sent[uid] = version
        config_maps, secrets = referenced(spec)
        out: dict[str, Any] = {NETWORK: self.addresses.context(ip)}
        if table:
            out[HOSTS] = table
        for section, names, kind in ((CONFIGMAPS, config_maps, "ConfigMap"), (SECRETS, secrets, "Secret")):
            found = {n: self._lookup(kind, f"{namespace}/{n}") for n in sorted(names)}
            if objects := {n: {k: v for k, v in doc.items() if k in ("data", "binaryData")}
                           for n, doc in found.items() if doc is not None}:
                out[section] = objects
        return out

    def names_changed(self, uid: str, namespace: str) -> bool:
        """Whether the names of the pod's namespace changed since its node was last told them (not known to
        this scheduler — it restarted since — counts as changed unless there are none)."""
        version, table = self.names.table(namespace)
        with self._lock:
            last = self._sent.get(uid)
        return last != version if last is not None else bool(table)


def referenced(spec: dict) -> tuple[set[str], set[str]]:
    """The ConfigMaps and Secrets a pod spec names: volumes, env valueFrom, envFrom."""
    config_maps: set[str] = set()
    secrets: set[str] = set()
    for volume in spec.get("volumes") or ():
        if isinstance(volume, dict):
            if isinstance(volume.get("configMap"), dict):
                config_maps.add(str(volume["configMap"].get("name") or ""))
            if isinstance(volume.get("secret"), dict):
                secrets.add(str(volume["secret"].get("secretName") or ""))
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        if not isinstance(container, dict):
            continue
        for entry in container.get("env") or ():
            source = entry.get("valueFrom") if isinstance(entry, dict) else None
            if isinstance(source, dict):
                if isinstance(source.get("configMapKeyRef"), dict):
                    config_maps.add(str(source["configMapKeyRef"].get("name") or ""))
                if isinstance(source.get("secretKeyRef"), dict):
                    secrets.add(str(source["secretKeyRef"].get("name") or ""))
        for source in container.get("envFrom") or ():
            if isinstance(source, dict):
                if isinstance(source.get("configMapRef"), dict):
                    config_maps.add(str(source["configMapRef"].get("name") or ""))
                if isinstance(source.get("secretRef"), dict):
                    secrets.add(str(source["secretRef"].get("name") or ""))
    return config_maps - {""}, secrets - {""}
