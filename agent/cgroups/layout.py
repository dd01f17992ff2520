"""Where the kubelet puts pods' cgroups: detected, not assumed.

The kubelet's cgroup driver decides the names:

==========  ==================================  ==========================================
class       cgroupfs driver                     systemd driver
==========  ==================================  ==========================================
root        ``kubepods``                        ``kubepods.slice``
Guaranteed  ``kubepods/pod<uid>``               ``kubepods.slice/kubepods-pod<u_i_d>.slice``
Burstable   ``kubepods/burstable/pod<uid>``     ``…/kubepods-burstable.slice/kubepods-burstable-pod<u_i_d>.slice``
BestEffort  ``kubepods/besteffort/pod<uid>``    ``…/kubepods-besteffort.slice/kubepods-besteffort-pod<u_i_d>.slice``
==========  ==================================  ==========================================

Containers are child directories: the container id (cgroupfs), or
``cri-containerd-<id>.scope``, ``crio-<id>.scope``, ``docker-<id>.scope``
(systemd).  The kubelet places a pod by its Kubernetes QoS class, not by its
QoS level: offline (BE) pods — BestEffort, asking only for batch resources —
share the BestEffort cgroup, which is the *offline parent* where the offline
CPU quota goes, but an online pod without requests is BestEffort too and lives
there beside them.  Where it does, the quota is not put on that parent (see
:func:`agent.policies.cpu.quota_plan`).  A layout of our own
(:class:`FixedLayout`) places pods by their level, so its offline parent holds
offline pods only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.backend import Backend
from proto.errors import InputError

QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
_SCOPE = re.compile(r"^(?:cri-containerd-|crio-|docker-)?([0-9a-f]{12,64})(?:\.scope)?$")
_POD_DIR = re.compile(r"^(?:kubepods(?:-besteffort|-burstable)?-)?pod([0-9a-fA-F_-]{8,})(?:\.slice)?$")


@dataclass(frozen=True)
class PodCgroup:
    uid: str
    qos_class: str
    path: str  # relative to the hierarchy root
    offline: bool | None = None  # what its place says of its QoS level (None: nothing, as in the kubelet's layout)


class Layout:
    """Cgroup paths for pods on this node (a kubelet layout, or an embedded runtime's)."""

    backend: Backend  # where the cgroups are read (each layout's constructor sets it)
    root: str = ""  # the cgroup holding every pod
    offline_parent: str = ""  # the cgroup holding every offline pod (its CPU quota is the offline quota)
    # The cgroup whose PSI is online work's own stall (cgroup v2): a layout of our own has one holding every
    # online pod; in the kubelet's it is the Burstable tier (Guaranteed pods sit directly under the root).
    online_parent: str = ""
    online_tree: bool = False  # the online parent holds every online pod and nothing else (its usage is theirs)
    # Whether the QoS parents are ours to set.  The kubelet rewrites kubepods/besteffort's cpu.shares
    # (2) on every pod sync, and the kernel refuses a shares write to an idle group (EINVAL), so on a
    # kubelet's node the offline parent keeps its low weight and is not made SCHED_IDLE.
    owns_parents: bool = False

    def pod_path(self, uid: str, qos_class: str, *, offline: bool | None = None) -> str:
        """Where the pod's cgroup is: by its Kubernetes QoS class in the kubelet's layout, by whether it is
        offline (its QoS level; None: as its class says, BestEffort offline) in a layout of our own."""
        raise NotImplementedError

    def discover(self) -> list[PodCgroup]:
        raise NotImplementedError

    def containers(self, pod_path: str) -> list[str]:
        """Container cgroup paths below a pod's (container ids, runtime prefixes stripped, as names)."""
        return sorted(f"{pod_path}/{name}" for name in _subdirs(self.backend.directory(pod_path, "cpu"))
                      if _SCOPE.match(name))


class KubeletLayout(Layout):
    def __init__(self, backend: Backend, driver: str):
        if driver not in ("cgroupfs", "systemd"):
            raise InputError(f"cgroup driver must be cgroupfs or systemd, got {driver!r}")
        self.backend = backend
        self.driver = driver
        if driver == "cgroupfs":
            self.root = "kubepods"
            self.classes = {"Guaranteed": "kubepods", "Burstable": "kubepods/burstable",
                            "BestEffort": "kubepods/besteffort"}
        else:
            self.root = "kubepods.slice"
            self.classes = {"Guaranteed": "kubepods.slice",
                            "Burstable": "kubepods.slice/kubepods-burstable.slice",
                            "BestEffort": "kubepods.slice/kubepods-besteffort.slice"}
        self.offline_parent = self.classes["BestEffort"]
        self.online_parent = self.classes["Burstable"]

    def pod_path(self, uid: str, qos_class: str, *, offline: bool | None = None) -> str:
        parent = self.classes[qos_class]  # the kubelet's choice, whatever the pod's level
        if self.driver == "cgroupfs":
            return f"{parent}/pod{uid}"
        prefix = {"Guaranteed": "kubepods", "Burstable": "kubepods-burstable", "BestEffort": "kubepods-besteffort"}
        return f"{parent}/{prefix[qos_class]}-pod{uid.replace('-', '_')}.slice"

    def discover(self) -> list[PodCgroup]:
        """Pod cgroups that exist now, with the QoS class their place tells."""
        found = []
        for qos_class, parent in self.classes.items():
            for name in _subdirs(self.backend.directory(parent, "cpu")):
                m = _POD_DIR.match(name)
                if m:
                    found.append(PodCgroup(m.group(1).replace("_", "-"), qos_class, f"{parent}/{name}"))
        return found


def detect_layout(backend: Backend) -> KubeletLayout:
    """The kubelet's driver, from which root exists (systemd's ``kubepods.slice`` or cgroupfs' ``kubepods``)."""
    for driver, root in (("systemd", "kubepods.slice"), ("cgroupfs", "kubepods")):
        if backend.exists(root, "cpu"):
            return KubeletLayout(backend, driver)
    raise FileNotFoundError(f"no kubepods cgroup under {backend.directory('', 'cpu')}: is the kubelet running here?")


class FixedLayout(Layout):
    """A layout rooted in one cgroup we own: ``<root>/online/<pod>`` and ``<root>/offline/<pod>``.

    Used by the embedded runtime and by benchmarks on a host without a kubelet.
    """

    def __init__(self, backend: Backend, root: str):
        self.backend = backend
        self.root = root.strip("/")
        self.offline_parent = f"{self.root}/offline"
        self.online_parent = f"{self.root}/online"
        self.online_tree = True
        self.owns_parents = True

    def pod_path(self, uid: str, qos_class: str, *, offline: bool | None = None) -> str:
        if offline is None:
            offline = qos_class == "BestEffort"
        return f"{self.offline_parent if offline else self.online_parent}/pod{uid}"

    def discover(self) -> list[PodCgroup]:
        """Pod cgroups that exist now; their place is their level (whoever made them chose it by level)."""
        found = []
        for parent, qos_class, offline in ((self.online_parent, "Burstable", False),
                                           (self.offline_parent, "BestEffort", True)):
            for name in _subdirs(self.backend.directory(parent, "cpu")):
                if name.startswith("pod"):
                    found.append(PodCgroup(name[3:], qos_class, f"{parent}/{name}", offline))
        return found


def _subdirs(path: Path) -> list[str]:
    """Names of the directories in ``path`` (none if it is gone); one getdents, no stat per entry."""
    try:
        with os.scandir(path) as it:
            return [e.name for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def container_id(name: str) -> str | None:
    m = _SCOPE.match(name)
    return m.group(1) if m else None


class NoLayout(Layout):
    """No pod cgroups on this host (no kubelet): nothing to discover, nothing to enforce."""

    def __init__(self, backend: Backend):
        self.backend = backend

    def pod_path(self, uid: str, qos_class: str, *, offline: bool | None = None) -> str:
        return f"__no_pods__/{uid}"

    def discover(self) -> list[PodCgroup]:
        return []
