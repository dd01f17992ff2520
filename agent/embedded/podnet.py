"""Pod networks on this machine: a network namespace per pod, joined to one bridge, with the address the
scheduler gave the pod.

Each pod that does not ask for ``spec.hostNetwork`` gets a network namespace of its own
(``ip netns``: ``/run/netns/scoria-<tag>-<uid>``) holding its loopback and one end of a veth pair
(``eth0``) with its address; the other end is a port of the bridge :data:`BRIDGE`, which holds the
host's address in the pod range (the gateway, also the pod's default route: a program that asks which
address it has by "connecting" a UDP socket somewhere — Ray does — finds its own).  Pods reach each other and
the host over the bridge and can all listen on the same port; nothing goes further (nothing is forwarded or
masqueraded: a pod that needs the outside world runs with ``hostNetwork: true``), so such a pod has no
name server either (:mod:`.podsetup` gives it a ``resolv.conf`` without one: a name outside its hosts file
fails at once instead of waiting for a server it cannot reach).

The bridge of the default pod range is ``scoria0``; another range's is ``scoria-<8 hex>`` (from the range),
so two embedded clusters with different ``--pod-cidr`` on one machine keep apart.  Namespace names are per
agent (``tag``, from its state folder), so several agents on one machine share a bridge and never take each
other's namespaces: :meth:`PodNetwork.sweep` removes only this agent's namespaces
that no held pod owns (what a killed agent left).  Everything goes through the ``ip`` command
(iproute2), a few calls per pod; a failure is a :class:`NetworkError` naming the pod and the command.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.embedded.context import LOGGER
from proto.vocab.podcontext import DEFAULT_POD_CIDR

log = logging.getLogger(LOGGER)

BRIDGE = "scoria0"  # the bridge of the default pod range (proto.vocab.podcontext.DEFAULT_POD_CIDR)
NETNS_DIR = Path("/run/netns")
PREFIX = "scoria-"
IP_TIMEOUT = 10.0

Runner = Callable[[Sequence[str], str], str]  # (argv, stdin) -> stdout; raises NetworkError


class NetworkError(Exception):
    """A pod network that could not be made or removed (the message names the command and what it said)."""


def run_ip(argv: Sequence[str], stdin: str = "") -> str:
    """``ip ARGV`` (with ``stdin`` for ``-batch -``); its output, or NetworkError with what it said."""
    try:
        done = subprocess.run(["ip", *argv], input=stdin, capture_output=True, text=True, timeout=IP_TIMEOUT,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"ip {' '.join(argv)}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise NetworkError(f"ip {' '.join(argv)}: {'; '.join(said[-3:]) or f'exit status {done.returncode}'}")
    return done.stdout


@dataclass(frozen=True)
class PodAddress:
    """Where a pod is on the pod network: its address and the range (gateway = the host's address there)."""

    ip: str
    cidr: str
    gateway: str

    @classmethod
    def parse(cls, network: object) -> PodAddress:
        """From a START's ``scoria.network``; ValueError naming what is wrong."""
        if not isinstance(network, dict):
            raise ValueError("scoria.network: expected an object with podIP, cidr and gateway")
        try:
            net = ipaddress.IPv4Network(str(network.get("cidr")), strict=True)
            ip = ipaddress.IPv4Address(str(network.get("podIP")))
            gateway = ipaddress.IPv4Address(str(network.get("gateway")))
        except ValueError as exc:
            raise ValueError(f"scoria.network: {exc}") from None
        if ip not in net or gateway not in net or ip in (net.network_address, net.broadcast_address):
            raise ValueError(f"scoria.network: {ip} (gateway {gateway}) is not an address of {net}")
        return cls(str(ip), str(net), str(gateway))

    @property
    def prefix(self) -> int:
        return ipaddress.IPv4Network(self.cidr).prefixlen


class PodNetwork:
    """Network namespaces for one agent's pods, on the machine's pod bridge."""

    def __init__(self, tag: str, *, run: Runner = run_ip, netns_dir: Path = NETNS_DIR, bridge: str | None = None):
        self.tag = hashlib.sha1(tag.encode()).hexdigest()[:6]
        self.run, self.netns_dir, self.fixed_bridge = run, netns_dir, bridge
        self.bridges: set[str] = set()  # the bridges this agent's pods were put on

    def bridge_of(self, cidr: str) -> str:
        if self.fixed_bridge is not None:
            return self.fixed_bridge
        return BRIDGE if cidr == DEFAULT_POD_CIDR else "scoria-" + hashlib.sha1(cidr.encode()).hexdigest()[:8]

    # -- names -------------------------------------------------------------------------------------
    def netns(self, uid: str) -> str:
        return f"{PREFIX}{self.tag}-{uid[:36]}"

    @staticmethod
    def veth(netns: str) -> str:
        """The host end of the pod's veth pair: at most 15 characters, as the kernel wants."""
        return "sc" + hashlib.sha1(netns.encode()).hexdigest()[:12]

    def netns_path(self, uid: str) -> Path:
        return self.netns_dir / self.netns(uid)

    # -- checks ------------------------------------------------------------------------------------
    def problem(self) -> str | None:
        """Why pods cannot have network namespaces here (None: they can): no ``ip`` command, not root, or the
        kernel refusing one."""
        if shutil.which("ip") is None:
            return "the ip command (iproute2) is not installed"
        if os.geteuid() != 0:
            return "network namespaces need root"
        probe = f"{PREFIX}{self.tag}-probe"
        try:
            self.run(["netns", "add", probe], "")
        except NetworkError as exc:
            return str(exc)
        try:
            self.run(["netns", "del", probe], "")
        except NetworkError as exc:
            log.warning("local runtime: cannot remove the probe network namespace %s: %s", probe, exc)
        return None

    # -- one pod -----------------------------------------------------------------------------------
    def setup(self, uid: str, address: PodAddress) -> str:
        """The pod's namespace with its address (made again if it exists: a pod starting anew); its name."""
        name = self.netns(uid)
        bridge = self.bridge_of(address.cidr)
        self._bridge(address, bridge)
        self.bridges.add(bridge)
        veth = self.veth(name)
        if (self.netns_dir / name).exists():
            self.teardown(uid)
        self.run(["-batch", "-"], f"netns add {name}\nlink add {veth} type veth peer name eth0 netns {name}\n"
                                  f"link set {veth} master {bridge} up\n")
        try:
            self.run(["-n", name, "-batch", "-"], f"addr add {address.ip}/{address.prefix} dev eth0\n"
                                                  f"link set eth0 up\nlink set lo up\n"
                                                  f"route add default via {address.gateway}\n")
        except NetworkError:
            self.teardown(uid)
            raise
        return name

    def exists(self, uid: str) -> bool:
        return (self.netns_dir / self.netns(uid)).exists()

    def teardown(self, uid: str) -> None:
        """Remove the pod's namespace (its veth pair goes with it); nothing there is fine."""
        name = self.netns(uid)
        if (self.netns_dir / name).exists():
            self.run(["netns", "del", name], "")
        veth = self.veth(name)
        if (Path("/sys/class/net") / veth).exists():  # the kernel removes it with the namespace, a moment later
            try:
                self.run(["link", "del", veth], "")
            except NetworkError:
                pass

    def sweep(self, keep: set[str]) -> list[str]:
        """Remove this agent's namespaces whose pod is not in ``keep`` (uids); their names."""
        mine = f"{PREFIX}{self.tag}-"
        gone = []
        try:
            names = sorted(p.name for p in self.netns_dir.iterdir() if p.name.startswith(mine))
        except OSError:
            return []
        for name in names:
            uid = name[len(mine):]
            if uid in keep or uid == "probe":
                continue
            try:
                self.run(["netns", "del", name], "")
                gone.append(name)
            except NetworkError as exc:
                log.warning("local runtime: cannot remove leftover network namespace %s: %s", name, exc)
        return gone

    # -- the bridge --------------------------------------------------------------------------------
    def _bridge(self, address: PodAddress, bridge: str) -> None:
        """The bridge, up, with the gateway address; made when missing.  A bridge with another range is
        refused (another scheduler's pods use it), as is a range some other route of this machine covers."""
        want = f"{address.gateway}/{address.prefix}"
        try:
            shown = json.loads(self.run(["-j", "addr", "show", "dev", bridge], "") or "[]")
        except NetworkError:
            shown = []
        except ValueError as exc:
            raise NetworkError(f"ip -j addr show dev {bridge}: unreadable output ({exc})") from None
        if not shown:
            self._check_free(address, bridge)
            self.run(["-batch", "-"], f"link add {bridge} type bridge\naddr add {want} dev {bridge}\n"
                                      f"link set {bridge} up\n")
            return
        have = [f"{a.get('local')}/{a.get('prefixlen')}" for a in shown[0].get("addr_info") or ()
                if a.get("family") == "inet"]
        if want not in have:
            if have:
                raise NetworkError(f"bridge {bridge} has {', '.join(have)}, not the pod range's gateway {want} "
                                   "(pods of another scheduler use it?)")
            self.run(["addr", "add", want, "dev", bridge], "")
        if "UP" not in (shown[0].get("flags") or ()):
            self.run(["link", "set", bridge, "up"], "")

    def _check_free(self, address: PodAddress, bridge: str) -> None:
        try:
            routes = json.loads(self.run(["-j", "route", "show"], "") or "[]")
        except (NetworkError, ValueError):
            return
        net = ipaddress.IPv4Network(address.cidr)
        for route in routes:
            dst = str(route.get("dst") or "")
            if dst in ("", "default") or route.get("dev") == bridge:
                continue
            try:
                other = ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False)
            except ValueError:
                continue
            if other.overlaps(net):
                raise NetworkError(f"the pod range {net} overlaps this machine's route to {dst} on "
                                   f"{route.get('dev')}: start the scheduler with another --pod-cidr")

    def close(self) -> None:
        """Remove the bridges this agent used that no pod is attached to any more (another agent's may be)."""
        for bridge in sorted(self.bridges):
            ports = Path("/sys/class/net") / bridge / "brif"
            try:
                if not ports.exists() or any(ports.iterdir()):
                    continue
                self.run(["link", "del", bridge], "")
            except (OSError, NetworkError) as exc:
                log.warning("local runtime: cannot remove bridge %s: %s", bridge, exc)
