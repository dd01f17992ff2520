"""Container processes: started through a tiny wrapper shell, watched, signalled.

The agent is multi-threaded, so nothing runs between fork and exec
(no ``preexec_fn``).  Instead each container runs as::

    /bin/sh -c WRAPPER scoria-wrap EXIT_FILE N PROCS_1 … PROCS_N COMMAND ARGS…

The wrapper writes its own PID into each controller's ``cgroup.procs`` (so the
command starts inside its cgroup and everything it forks stays there), runs
the command, and writes the command's exit status to ``EXIT_FILE`` (atomically)
before exiting with it — an exit that happens while the agent is down is still
known when it comes back.  It traps SIGTERM/SIGINT/SIGHUP (the command gets the
default dispositions back on exec) so that a stop's SIGTERM to the process
group reaches the command and the wrapper still records how it ended.  Each
container is its own session and process group (``start_new_session``), so
signals to the agent's terminal do not reach it and the group can be signalled
as one.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

WRAPPER = r"""s=$1 n=$2
shift 2
while [ "$n" -gt 0 ]; do
  if ! echo $$ > "$1"; then
    echo "scoria: cannot join cgroup ($1)" >&2
    echo join > "$s.tmp" && mv -f "$s.tmp" "$s"
    exit 125
  fi
  n=$((n - 1))
  shift
done
trap : TERM INT HUP
"$@"
c=$?
echo $c > "$s.tmp" && mv -f "$s.tmp" "$s"
exit $c
"""
JOIN_FAILED = "join"
SHELL = "/bin/sh"


class StartFailed(Exception):
    """The command could not be started (not found, not executable, no such working directory)."""


def resolve(argv0: str, env: Mapping[str, str], cwd: str) -> str:
    """The executable ``argv0`` names, searched in the container's PATH as a container runtime does."""
    if "/" in argv0:
        path = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise StartFailed(f"{argv0}: no such executable file")
        return argv0
    found = shutil.which(argv0, path=env.get("PATH") or os.defpath)
    if found is None:
        raise StartFailed(f"{argv0}: executable file not found in $PATH")
    return found


def _check_exec(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
    """What exec(2) cannot take, as a StartFailed naming it: an environment variable name that is empty or holds
    ``=`` or a NUL byte, a NUL byte in a value, the command, its arguments or the working directory."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name:
            raise StartFailed(f"environment variable name {name[:60]!r} is invalid (empty, or holding '=' or a NUL "
                              "byte): the container cannot be started")
        if "\0" in value:
            raise StartFailed(f"environment variable {name[:60]}: its value holds a NUL byte: the container cannot "
                              "be started")
    for i, arg in enumerate(argv):
        if "\0" in arg:
            raise StartFailed(f"{'command' if i == 0 else f'argument {i}'} holds a NUL byte: the container cannot be "
                              "started")
    if "\0" in cwd:
        raise StartFailed("working directory holds a NUL byte: the container cannot be started")


@dataclass
class Started:
    popen: subprocess.Popen
    pid: int
    create_time: float


def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: str, log_path: Path, exit_file: Path,
          procs_files: Sequence[str], prefix: Sequence[str] = (), mounted: Sequence[str] = ()) -> Started:
    """Start ``argv`` through the wrapper (after ``prefix``: entering the pod's namespaces, :mod:`.podns`);
    StartFailed if it cannot be.  A command or working directory below one of the pod's own mount points
    (``mounted``: a script in a ConfigMap volume, say) is left to the exec inside its mounts."""
    _check_exec(argv, env, cwd)

    def mine(path: str) -> bool:
        return os.path.isabs(path) and any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounted)
    if not os.path.isdir(cwd) and not mine(cwd):
        raise StartFailed(f"working directory {cwd}: no such directory")
    try:
        exe = resolve(argv[0], env, cwd)
    except StartFailed:
        if not mine(argv[0]):
            raise
        exe = argv[0]
    if not os.path.isdir(cwd):  # a folder of the pod's own mounts: the prefix enters it once they are there
        cwd = "/"
    exit_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # like every folder of the state: 0700
    exit_file.unlink(missing_ok=True)
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # the owner's alone, whatever the umask (a pod's output may hold its secrets); an older 0644 log is tightened
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    with open(fd, "ab") as out:
        try:
            popen = subprocess.Popen(
                [*prefix, SHELL, "-c", WRAPPER, "scoria-wrap", str(exit_file), str(len(procs_files)), *procs_files,
                 exe, *argv[1:]],
                env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True)
        except (OSError, ValueError) as exc:  # ValueError: what exec refuses that the checks above missed
            raise StartFailed(f"cannot start {argv[0]}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        created = psutil.Process(popen.pid).create_time()
    except psutil.Error:  # cannot happen for a child not yet reaped; keep going without it
        created = 0.0
    return Started(popen, popen.pid, created)


class Handle:
    """A container's wrapper process: our own child (``popen``) or one adopted from an earlier agent."""

    def __init__(self, pid: int, create_time: float, popen: subprocess.Popen | None = None):
        self.pid, self.create_time, self.popen = pid, create_time, popen
        self._proc: psutil.Process | None = None
        self.returncode: int | None = None   # shell-style (128 + signal), once known from our own child

    @classmethod
    def adopt(cls, pid: int, create_time: float) -> Handle | None:
        """A handle on ``pid`` if it is still the process that started at ``create_time``; else None."""
        if pid <= 0:
            return None
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - create_time) > 1.0 or proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        handle = cls(pid, create_time)
        handle._proc = proc
        return handle

    def alive(self) -> bool:
        """Still running (a zombie is not)."""
        if self.popen is not None:
            code = self.popen.poll()
            if code is None:
                return True
            self.returncode = code if code >= 0 else 128 - code
            return False
        try:
            proc = self._proc or psutil.Process(self.pid)
            return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def killpg(self, sig: int) -> bool:
        """``sig`` to the container's process group while its leader lives (a dead leader's group id may
        belong to someone else once the group is empty); True if sent."""
        if not self.alive():
            return False
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True


def find_wrapper(pid: int, create_time: float, *, cgroup: str, version: int, exit_file: Path, members: set[int],
                 proc: str = "/proc") -> Handle | None:
    """A container's wrapper, if it still runs: the recorded ``pid`` (same start time, in its cgroup — or
    not there yet, just started, but then with this ``exit_file`` on its command line), else a wrapper
    for ``exit_file`` among the cgroup's ``members``.  With no pid recorded (saved just before its start)
    every process is looked at: started or not, a container must not run twice."""
    handle = Handle.adopt(pid, create_time)
    if handle is not None and (in_cgroup(pid, cgroup, version, proc) or is_wrapper(pid, exit_file)):
        return handle
    candidates = set(members)
    if not pid:
        candidates |= {p.pid for p in psutil.process_iter()}
    for candidate in sorted(candidates):
        if is_wrapper(candidate, exit_file):
            try:
                return Handle.adopt(candidate, psutil.Process(candidate).create_time())
            except psutil.Error:
                continue
    return None


def is_wrapper(pid: int, exit_file: Path) -> bool:
    """Whether ``pid`` is a wrapper started for ``exit_file`` (a session leader running our script, or still
    entering the pod's namespaces on its way to it)."""
    want = [SHELL, "-c", WRAPPER, "scoria-wrap", str(exit_file)]
    try:
        cmdline = psutil.Process(pid).cmdline()
        if os.getsid(pid) != pid:
            return False
    except (psutil.Error, OSError):
        return False
    return any(cmdline[i:i + 5] == want for i in range(len(cmdline) - 4) if cmdline[i + 3] == "scoria-wrap")


def in_cgroup(pid: int, cgroup: str, version: int, proc: str = "/proc") -> bool:
    """Whether ``pid`` is in ``cgroup`` (relative path) in the cpu hierarchy (v1) or the unified one (v2)."""
    try:
        text = Path(proc, str(pid), "cgroup").read_text()
    except OSError:
        return False
    want = "/" + cgroup.strip("/")
    for line in text.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if version == 2 and hid == "0" and controllers == "":
            return path == want
        if version == 1 and "cpu" in controllers.split(","):
            return path == want
    return False


def signal_container(handle: Handle | None, members: set[int], sig: int) -> None:
    """``sig`` to a container: its process group, and every process in its cgroup outside that group."""
    group = handle.pid if handle is not None and handle.killpg(sig) else 0
    for pid in members:
        try:
            if group and os.getpgid(pid) == group:
                continue
            os.kill(pid, sig)
        except OSError as exc:
            if exc.errno not in (errno.ESRCH, errno.EPERM):
                raise


def exit_status(code: int) -> int:
    """A Popen returncode as a shell reports it (a signal ``n`` is ``128 + n``)."""
    return code if code >= 0 else 128 - code


SIGTERM, SIGKILL = signal.SIGTERM, signal.SIGKILL
