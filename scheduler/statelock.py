"""One scheduler per state folder: ``serve --state DIR`` holds ``DIR/scheduler.lock`` for its whole life.

Two schedulers on one store would each trust their own copy of the cluster and overwrite the other's
decisions (a second ``serve --embedded`` on a folder in use changed a pod's request under the first).  The
lock is an ``flock`` on a file in the folder: the kernel drops it when its holder exits, however it exits,
so a killed scheduler never leaves the folder locked.  The holder writes its pid into the file; a second
scheduler reads it to say who holds the folder and exits before it changes anything there (the store,
the history, the sockets and the folder's own mode are left as they are).
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from proto.errors import InputError
from proto.localsock import private_dir

LOCK_FILE = "scheduler.lock"


class StateInUse(InputError):
    """Another scheduler holds the state folder (the message names it and its pid)."""


class StateLock:
    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = -1


def hold_state(folder: Path, *, group: int | None = None) -> StateLock:
    """Lock ``folder`` for this process, or StateInUse naming the scheduler that holds it.

    A folder that does not exist yet is made private first (nobody can hold it); one that exists is not
    changed before the lock is held — a folder another user owns, or a shared one, is refused as
    :func:`~proto.localsock.private_dir` refuses it, without a lock file left in it."""
    try:
        info = folder.stat()
    except FileNotFoundError:
        private_dir(folder, group=group)
        info = folder.stat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWOTH | stat.S_ISVTX):
        private_dir(folder, group=group)  # raises, saying why (nothing changed)
    path = folder / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StateInUse(f"--state {folder}: cannot open its lock file {path} ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise StateInUse(f"--state {folder} is in use by another scheduler ({holder}): stop it first, or give this "
                         "one a state folder of its own") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return StateLock(fd, path)


def _holder(fd: int) -> str:
    """``pid N: python -m scheduler serve …`` as far as the lock file and /proc tell."""
    try:
        pid = int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return "its pid is not recorded"
    try:
        command = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
    except OSError:
        command = ""
    command = command if len(command) <= 160 else command[:160] + "…"
    return f"pid {pid}" + (f": {command}" if command else "")
