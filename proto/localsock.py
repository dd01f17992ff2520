"""Local endpoints only their owner can open: Unix sockets in private folders, as container engines keep theirs.

Embedded mode runs pods as root, so whoever can talk to its control API or
report as its node can run commands as root.  Its endpoints are therefore
Unix sockets, not TCP ports: the kernel checks the socket file's mode on every
``connect``, so a socket ``0600`` in a folder ``0700`` can be opened by its
owner (and root) alone.  A group may be granted access (``0660`` on the
socket, ``0710`` on the folder, both owned by that group), as ``docker.sock``
grants the ``docker`` group.

Shared by the scheduler (control API, the agents' endpoint, its state folder)
and the agent (its report target); imports neither side.
"""

from __future__ import annotations

import errno
import grp
import os
import socket
import stat
from pathlib import Path

from proto.errors import InputError

MAX_SOCKET_PATH = 107  # sockaddr_un.sun_path holds 108 bytes with the terminating NUL
UNIX = "unix:"


class LocalAccessError(InputError):
    """A folder or socket that cannot be made private, or a socket path that cannot work; the message says which."""


def unix_path(address: str) -> Path | None:
    """The socket path of a ``unix:`` address (``unix:///abs/path``, ``unix:/abs/path``, ``unix:rel/path``,
    made absolute); None for any other address."""
    if not address.startswith(UNIX):
        return None
    rest = address[len(UNIX):]
    if rest.startswith("//"):  # a URL: unix://HOST/path with an empty host
        rest = rest[2:]
        if not rest.startswith("/"):
            raise LocalAccessError(f"{address}: expected unix:///absolute/path or unix:path")
    if not rest:
        raise LocalAccessError(f"{address}: no socket path")
    return Path(os.path.abspath(rest))


def check_socket_path(path: Path, what: str) -> None:
    """A path the kernel can bind and connect to (sun_path's length), else LocalAccessError naming ``what``."""
    size = len(os.fsencode(str(path)))
    if size > MAX_SOCKET_PATH:
        raise LocalAccessError(f"{what}: socket path {path} is {size} bytes long, the kernel takes at most "
                               f"{MAX_SOCKET_PATH}: choose a shorter folder")


def group_id(name: str) -> int:
    """The id of group ``name`` (a number is taken as an id), else LocalAccessError."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        if name.isdigit():
            return int(name)
        raise LocalAccessError(f"--api-group: no group named {name!r} on this machine") from None


def private_dir(path: Path, *, group: int | None = None) -> Path:
    """Create ``path`` or tighten it: ``0700``, or ``0710`` owned by ``group`` (its members may reach the
    sockets inside, nothing more).  A folder another user owns, or a shared one (world-writable, like
    ``/tmp``), is refused rather than changed."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise LocalAccessError(f"{path}: cannot create the state folder ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise LocalAccessError(f"{path}: not a folder")
    if info.st_uid != os.geteuid():
        raise LocalAccessError(f"{path}: owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}): "
                               "give the state a folder of its own")
    if info.st_mode & (stat.S_IWOTH | stat.S_ISVTX):
        raise LocalAccessError(f"{path}: a shared folder (mode {stat.filemode(info.st_mode)}): give the state "
                               "a folder of its own")
    try:
        if group is not None and info.st_gid != group:
            os.chown(path, -1, group)
        os.chmod(path, 0o700 if group is None else 0o710)
    except OSError as exc:
        raise LocalAccessError(f"{path}: cannot restrict the state folder ({exc.strerror or exc})") from None
    return path


def private_file(path: Path) -> None:
    """Make an existing file ``0600`` (an earlier version may have left it readable); a missing one is fine."""
    try:
        os.chmod(path, 0o600)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise LocalAccessError(f"{path}: cannot make it private ({exc.strerror or exc})") from None


def claim_socket_path(path: Path, what: str) -> None:
    """Make room for a socket at ``path``: refuse when something still answers there (another server on the
    same state), remove a socket left by one that died; anything that is not a socket is refused."""
    check_socket_path(path, what)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise LocalAccessError(f"{what}: {path} exists and is not a socket")
    check_socket_free(path, what)
    path.unlink(missing_ok=True)  # nobody listens: left by a server that died


def check_socket_free(path: Path, what: str) -> None:
    """LocalAccessError when a server answers on the Unix socket ``path`` (``what``: the flag that names it)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return
    raise LocalAccessError(f"{what}: {path} is in use: another scheduler serves this state folder (choose another "
                           f"path with {what.split()[0] if what.startswith('--') else '--api-socket or --listen'})")


def restrict_socket(path: Path, *, group: int | None = None) -> None:
    """``0600`` for the owner alone, or ``0660`` owned by ``group``."""
    try:
        if group is not None:
            os.chown(path, -1, group)
        os.chmod(path, 0o600 if group is None else 0o660)
    except OSError as exc:
        raise LocalAccessError(f"{path}: cannot restrict the socket ({exc.strerror or exc})") from None


def connect_unix(path: Path, timeout: float) -> socket.socket:
    """A connected socket; OSError as the kernel says (PermissionError: see :func:`permission_hint`)."""
    check_socket_path(path, "the scheduler's socket")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def permission_hint(path: Path) -> str:
    """One line for a permission failure on ``path``: who may open it, and how to become one."""
    group = _granted_group(path, stat.S_IWGRP) or _granted_group(path.parent, stat.S_IXGRP)
    if group:
        return f"permission denied on {path}: run as root or join group {group}"
    return (f"permission denied on {path}: run as root (or the scheduler's user), or start the scheduler with "
            "--api-group GROUP and join that group")


def _granted_group(path: Path, bit: int) -> str | None:
    """The group ``path`` grants ``bit`` to (write on a socket, search on a folder), if not root's."""
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_gid == 0 or not info.st_mode & bit:
        return None
    try:
        return grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        return str(info.st_gid)


def is_permission_error(exc: BaseException) -> bool:
    return isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (errno.EACCES, errno.EPERM)
