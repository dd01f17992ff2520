"""A pod's surroundings on this machine: its network namespace, its volumes' files and its hosts file —
made before its containers start, handed to each container as it starts, removed when the pod stops.

* :func:`prepare` (once per start of the pod, again after the agent's shutdown removed them): the
  volumes written (:mod:`.volumes`), the hosts file, and — unless the pod runs on the host's network —
  its network namespace with its address (:mod:`.podnet`).  The namespace's name is saved in the record,
  so a restarted agent adopts it with the pod.
* :func:`entry` — what goes before a container's wrapper on its command line (:mod:`.podns`), or
  nothing for a pod on the host's network with no mounts and no names to resolve (run as before).
* :func:`refresh_hosts` — a START for a pod that runs already: its hosts file rewritten in place when the
  names of its namespace changed.
* :func:`release` — the namespace removed and the files deleted (secrets included).

Without a pod network (``agent run --pod-network host``) every pod runs on the host's network, and the
names it resolves all mean this machine (127.0.0.1).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from agent.embedded.context import LOGGER, RuntimeContext
from agent.embedded.held import HeldPod
from agent.embedded.podnet import NetworkError
from agent.embedded.podns import Bind, PlanError, entry_argv, hosts_text, plan, rewrite_in_place
from agent.embedded.spec import ContainerSpec, PodSpec, SpecError, load_manifest, parse_pod
from agent.embedded.volumes import VolumeError, materialise, mount_source
from proto.vocab.podcontext import CLUSTER_DOMAIN

log = logging.getLogger(LOGGER)

HOSTS_FILE = Path("/etc/hosts")
RESOLV_FILE = Path("/etc/resolv.conf")
NO_NAME_SERVER = ("# Scoria embedded: this pod has a network of its own, with no route to a name server; its names\n"
                  "# are in /etc/hosts.  (A pod with hostNetwork: true keeps this machine's resolv.conf.)\n")
NETWORK_ERROR = "NetworkSetupError"
LOOPBACK = "127.0.0.1"


class SetupError(Exception):
    """The pod's surroundings could not be made: ``reason`` and a message naming what."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def files_dir(host: RuntimeContext, uid: str) -> Path:
    return host.state.root / "files" / uid


def isolated(host: RuntimeContext, spec: PodSpec) -> bool:
    """Whether the pod gets a network namespace of its own."""
    return host.network is not None and not spec.network.host_network and spec.network.address is not None


def needs_namespaces(host: RuntimeContext, spec: PodSpec) -> bool:
    return isolated(host, spec) or any(c.mounts for c in spec.containers) or bool(spec.network.hosts) \
        or bool(spec.network.aliases)


def prepare(host: RuntimeContext, pod: HeldPod, spec: PodSpec) -> None:
    """Volumes, hosts file and network namespace, once per start of the pod (nothing again while prepared)."""
    record = pod.record
    if record.prepared and (not isolated(host, spec) or (host.network is not None and host.network.exists(spec.uid))):
        return
    root = files_dir(host, spec.uid)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        materialise(root / "volumes", spec.volumes)
        if needs_namespaces(host, spec):
            rewrite_in_place(root / "hosts", _hosts(host, spec))
        if isolated(host, spec):
            rewrite_in_place(root / "resolv.conf", NO_NAME_SERVER)
    except VolumeError as exc:
        raise SetupError(exc.reason, exc.message) from None
    except OSError as exc:
        raise SetupError("StartError", f"cannot write the pod's files under {root}: {exc}") from None
    if isolated(host, spec):
        assert host.network is not None and spec.network.address is not None
        try:
            record.netns = host.network.setup(spec.uid, spec.network.address)
        except NetworkError as exc:
            raise SetupError(NETWORK_ERROR, str(exc)) from None
    record.prepared, pod.dirty = True, True


def entry(host: RuntimeContext, pod: HeldPod, spec: PodSpec, container: ContainerSpec, exit_file: Path,
          workdir: str) -> list[str]:
    """The command line before the container's wrapper ([] : none needed); SetupError when a mount cannot be
    planned or the tools are missing."""
    if not needs_namespaces(host, spec):
        return []
    if isinstance(host.tools, str):
        raise SetupError("StartError", f"cannot give the pod its namespaces: {host.tools}")
    root = files_dir(host, spec.uid)
    dirs = {name: root / "volumes" / name for name in spec.volumes if spec.volumes[name].source != "hostPath"}
    dirs.update({name: Path(v.path) for name, v in spec.volumes.items() if v.source == "hostPath"})
    binds = [Bind(mount_source(dirs, m), m.mount_path, m.read_only) for m in container.mounts]
    own = isolated(host, spec)
    for path, source in ((HOSTS_FILE, root / "hosts"), (RESOLV_FILE, root / "resolv.conf")):
        if path.as_posix() not in {b.target for b in binds} and (own or path == HOSTS_FILE):
            binds.append(Bind(source, path.as_posix()))
    try:
        steps = plan(binds, scratch=root / "ns" / container.name, hostname=spec.network.hostname if own else "")
    except (PlanError, OSError) as exc:
        raise SetupError("StartError", f"container {container.name}: {exc}") from None
    steps += ["cd", workdir]
    netns = host.network.netns_path(spec.uid) if own and host.network is not None else None
    return entry_argv(exit_file=exit_file, steps=steps, netns=netns, own_uts=own, tools=host.tools)


def refresh_hosts(host: RuntimeContext, pod: HeldPod, pod_json: str) -> None:
    """A START for a pod held: its hosts file rewritten if the names it resolves changed (nothing else)."""
    if pod.spec is None or pod.record.stopping is not None or pod.terminal:
        return
    try:
        doc = load_manifest(pod_json)
        spec = parse_pod(doc, uid=pod.record.uid, node_name=host.node_name, base_env=host.base_env)
    except SpecError as exc:
        log.warning("local runtime: pod %s: ignoring an update: %s", pod.record.key, exc.message)
        return
    if spec.network.hosts == pod.spec.network.hosts:
        return
    pod.spec = _with_hosts(pod.spec, spec)
    if pod.record.manifest is not None:
        pod.record.manifest = doc
    pod.dirty = True
    path = files_dir(host, spec.uid) / "hosts"
    if pod.record.prepared and needs_namespaces(host, pod.spec) and path.parent.exists():
        try:
            if rewrite_in_place(path, _hosts(host, pod.spec)):
                log.info("local runtime: pod %s: hosts file updated", pod.record.key)
        except OSError as exc:
            log.warning("local runtime: pod %s: cannot update its hosts file: %s", pod.record.key, exc)


def _with_hosts(old: PodSpec, new: PodSpec) -> PodSpec:
    from dataclasses import replace
    return replace(old, network=replace(old.network, hosts=new.network.hosts), manifest=new.manifest)


def release(host: RuntimeContext, pod: HeldPod) -> bool:
    """Remove the pod's namespace and files (nothing of it runs any more); False if the namespace stays."""
    record = pod.record
    if record.netns and host.network is not None:
        try:
            host.network.teardown(record.uid)
        except NetworkError as exc:
            log.warning("local runtime: pod %s: %s", record.key, exc)
            return False
    root = files_dir(host, record.uid)
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    if record.netns or record.prepared:
        record.netns, record.prepared, pod.dirty = "", False, True
    return True


def _hosts(host: RuntimeContext, spec: PodSpec) -> str:
    net = spec.network
    table = [(ip, list(names)) for ip, names in net.hosts]
    aliases = [(ip, list(names)) for ip, names in net.aliases]
    names = [f"{net.hostname}.{net.subdomain}.{spec.namespace}.svc.{CLUSTER_DOMAIN}", f"{net.hostname}.{net.subdomain}",
             net.hostname] if net.subdomain else [net.hostname]
    if isolated(host, spec):
        assert net.address is not None
        return hosts_text(own=(net.address.ip, names), table=table, aliases=aliases)
    base = _host_hosts()
    if host.network is None:  # every pod shares this machine's network: every name means this machine
        table = [(LOOPBACK, n) for _, n in table]
        return hosts_text(own=(LOOPBACK, names), table=table, aliases=aliases, base=base)
    return hosts_text(own=None, table=table, aliases=aliases, base=base)


def _host_hosts() -> str:
    try:
        return HOSTS_FILE.read_text()
    except OSError:
        return ""
