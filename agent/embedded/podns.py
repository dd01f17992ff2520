"""How a container enters its pod's namespaces: its network namespace, a mount namespace of its own where
its volumes and its private ``/etc/hosts`` are bound, and (with its own network) its own host name.

:func:`entry_argv` returns the command line that goes before the container's wrapper (:mod:`.process`)::

    nsenter --net=/run/netns/NS -- unshare --mount --uts --propagation private -- \\
        /bin/sh -c SETUP scoria-ns EXIT_FILE STEP... -- /bin/sh -c WRAPPER ...

Each program execs the next, so the process the runtime started stays the container's wrapper, with the
same pid.  SETUP runs the steps the agent planned (pure: :func:`plan`) and then execs the wrapper; a step
that fails writes ``setup`` to the container's exit file (a StartError) and exits 126.

Mount targets are bound where they are.  A target the host does not have is made inside an overlay of its
nearest existing folder (the overlay's writable layer is the pod's, under its files folder), so nothing is
created on the host; what the host had mounted below that folder (say ``/etc/resolv.conf``) is kept in
place.  A target below another mount of the pod (``/etc/volcano/.ssh`` below ``/etc/volcano``) is made in
that mount's source instead.  ``/`` cannot be overlaid: a target directly below a missing top-level folder
is refused.  Writes a pod makes into an overlaid folder stay in the pod.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SHELL = "/bin/sh"
SETUP = r"""x=$1
shift
fail() {
  echo "scoria: cannot set up the pod's namespaces: $*" >&2
  echo setup > "$x.tmp" && mv -f "$x.tmp" "$x"
  exit 126
}
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    host) hostname "$2" || fail "hostname $2"; shift 2 ;;
    dir) mkdir -p "$2" || fail "mkdir $2"; shift 2 ;;
    file) [ -e "$2" ] || { mkdir -p "${2%/*}" && : > "$2"; } || fail "create $2"; shift 2 ;;
    ovl) mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4" "$2" || fail "overlay on $2"; shift 4 ;;
    keep) mount --rbind "$2" "$3" || fail "keep $2"; shift 3 ;;
    move) mount --move "$2" "$3" || fail "put back $3"; shift 3 ;;
    bind) mount --bind "$2" "$3" || fail "mount $2 on $3"; shift 3 ;;
    ro) { mount --bind "$2" "$3" && mount -o remount,bind,ro "$3"; } || fail "mount $2 read-only on $3"; shift 3 ;;
    cd) cd "$2" || fail "working directory $2"; shift 2 ;;
    *) fail "unknown step $1" ;;
  esac
done
shift
exec "$@"
"""
SETUP_FAILED = "setup"  # what SETUP writes to the exit file


class PlanError(Exception):
    """A mount the runtime cannot make (the message names its target)."""


@dataclass(frozen=True)
class Bind:
    source: Path
    target: str
    read_only: bool = False

    @property
    def is_file(self) -> bool:
        return not self.source.is_dir()


def plan(binds: Sequence[Bind], *, scratch: Path, hostname: str = "", mounts: Sequence[str] | None = None) -> list[str]:
    """The SETUP steps for ``binds`` (and a host name): overlays where a target is missing, then the binds,
    outer before inner.  ``scratch`` is the container's own folder for overlay layers and kept mounts
    (made here); ``mounts`` the host's mount points (default: read from /proc/self/mountinfo)."""
    steps: list[str] = ["host", hostname] if hostname else []
    ordered = sorted(binds, key=lambda b: (b.target.count("/"), b.target))
    targets = [b.target for b in ordered]
    overlays: list[str] = []
    makes: list[tuple[str, str]] = []
    for bind in ordered:
        outer = _outer(bind.target, targets)
        if outer is not None:  # made in the outer mount's source, before anything is mounted
            parent = next(b for b in ordered if b.target == outer)
            _make_in(parent.source / posixpath.relpath(bind.target, outer), bind.is_file)
            continue
        if os.path.lexists(bind.target):
            if os.path.isdir(bind.target) == bind.is_file:
                raise PlanError(f"{bind.target}: the host has a {'folder' if bind.is_file else 'file'} there, the "
                                f"volume is a {'file' if bind.is_file else 'folder'}")
            continue
        ancestor = _existing_ancestor(bind.target)
        if ancestor == "/":
            raise PlanError(f"{bind.target}: no such folder on this machine, and / cannot be overlaid to make it "
                            "(mount below an existing folder)")
        if not any(ancestor == o or ancestor.startswith(o + "/") for o in overlays):
            overlays.append(ancestor)
        makes.append(("file" if bind.is_file else "dir", bind.target))
    if overlays:
        steps += _overlay_steps(sorted(overlays, key=lambda p: p.count("/")), scratch,
                                list(mounts) if mounts is not None else host_mounts())
    for kind, target in makes:
        steps += [kind, target]
    for bind in ordered:
        steps += ["ro" if bind.read_only else "bind", str(bind.source), bind.target]
    return steps


def _outer(target: str, targets: list[str]) -> str | None:
    inside = [t for t in targets if t != target and target.startswith(t + "/")]
    return max(inside, key=len) if inside else None


def _make_in(path: Path, is_file: bool) -> None:
    if path.exists():
        return
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if is_file:
        path.touch(mode=0o644)
    else:
        path.mkdir(mode=0o755)


def _existing_ancestor(path: str) -> str:
    parent = posixpath.dirname(path)
    while parent != "/" and not os.path.isdir(parent):
        parent = posixpath.dirname(parent)
    return parent


def _overlay_steps(overlays: list[str], scratch: Path, mounts: list[str]) -> list[str]:
    if scratch.exists():
        shutil.rmtree(scratch)
    steps: list[str] = []
    for i, folder in enumerate(overlays):
        layer = scratch / f"overlay{i}"
        (layer / "upper").mkdir(mode=0o755, parents=True)
        (layer / "work").mkdir(mode=0o700)
        kept = [m for m in mounts if m.startswith(folder + "/")]
        kept = [m for m in kept if not any(m.startswith(o + "/") for o in kept)]  # the outer ones carry the rest
        staged: list[tuple[str, str, bool]] = []
        for k, mount in enumerate(kept):
            stage = layer / "kept" / str(k)
            is_file = not os.path.isdir(mount)
            _make_in(stage, is_file)
            steps += ["keep", mount, str(stage)]
            staged.append((str(stage), mount, is_file))
        steps += ["ovl", folder, str(layer / "upper"), str(layer / "work")]
        for staged_at, mount, is_file in staged:
            steps += ["file" if is_file else "dir", mount, "move", staged_at, mount]
    return steps


def host_mounts(mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points of this mount namespace (field 5 of mountinfo, octal escapes undone)."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            out.append(fields[4].encode().decode("unicode_escape"))
    return out


def entry_argv(*, exit_file: Path, steps: Sequence[str], netns: Path | None, own_uts: bool,
               tools: dict[str, str]) -> list[str]:
    """The command line before the wrapper's: enter ``netns`` (if any), a new mount namespace (and UTS, with
    ``own_uts``), run ``steps``, exec what follows (the caller appends ``--`` and the wrapper's argv).
    ``tools``: the absolute paths of nsenter and unshare (:func:`find_tools`)."""
    argv: list[str] = []
    if netns is not None:
        argv += [tools["nsenter"], f"--net={netns}", "--"]
    argv += [tools["unshare"], "--mount", *(["--uts"] if own_uts else []), "--propagation", "private", "--",
             SHELL, "-c", SETUP, "scoria-ns", str(exit_file), *steps, "--"]
    return argv


def find_tools() -> dict[str, str] | str:
    """Where nsenter, unshare, mount and hostname are (util-linux), or what is missing."""
    found = {name: shutil.which(name) for name in ("nsenter", "unshare", "mount", "hostname")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        return f"{', '.join(missing)} not found (util-linux)"
    return {name: str(path) for name, path in found.items()}


LOCALHOST = ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
             "fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")


def hosts_text(*, own: tuple[str, list[str]] | None, table: Sequence[tuple[str, Sequence[str]]],
               aliases: Sequence[tuple[str, Sequence[str]]] = (), base: str | None = None) -> str:
    """A pod's ``/etc/hosts``: the kubelet's (or, for a pod on the host's network, the host's own ``base``), the
    pod's own names, the names of its namespace's pods and Services (``table``), then ``spec.hostAliases``."""
    out = ["# Kubernetes-managed hosts file (Scoria embedded).\n"]
    out.append(LOCALHOST if base is None else (base if base.endswith("\n") or not base else base + "\n"))
    written: set[tuple[str, str]] = set()
    if own is not None:
        out.append(f"{own[0]}\t{' '.join(own[1])}\n")
        written.update((own[0], n) for n in own[1])
    if table:
        out.append("# Pods and Services of the namespace.\n")
        for ip, names in table:
            fresh = [n for n in names if (ip, n) not in written]
            if fresh:
                out.append(f"{ip}\t{' '.join(fresh)}\n")
                written.update((ip, n) for n in fresh)
    if aliases:
        out.append("# Entries added by HostAliases.\n")
        out.extend(f"{ip}\t{' '.join(names)}\n" for ip, names in aliases)
    return "".join(out)


def rewrite_in_place(path: Path, text: str) -> bool:
    """Write ``text`` into ``path`` keeping its inode (a bind mount of it shows the new text); False if the text
    was there already."""
    data = text.encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        if os.pread(fd, len(data) + 1, 0) == data:
            return False
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
    return True
