"""What the local runtime keeps on disk, so that an agent restart loses nothing.

Under the state directory:

* ``pods/<uid>.json`` — one record per pod: the manifest, the phase, and per
  container its pid and the pid's start time (to tell a process from a later
  one that reuses its pid), restarts and back-off.  Written atomically (a
  temporary file, fsync, rename): a reader sees the old record or the new one.
* ``run/<uid>/<container>.exit`` — written by the container's wrapper shell
  when its command exits: the exit code (or ``join`` if it could not enter its
  cgroup), so an exit that happens while the agent is down is not lost.
* ``logs/<namespace>_<name>_<uid>/<container>.log`` — stdout and stderr of
  the container's current (or last) run; when it starts again the file
  becomes ``<container>.previous.log`` (replacing the one before), so each
  run's output stays apart, as the kubelet keeps the previous instance's log
  for ``kubectl logs --previous``.  Kept after the pod is gone.
* ``files/<uid>/`` — the pod's volumes, hosts file and overlay layers
  (:mod:`.podsetup`), while it runs; removed when it stops.

The folder and the folders in it are ``0700``, records and logs ``0600``:
pods run as root and their manifests and output may hold secrets.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from agent.embedded.phase import ACTIVE, PENDING, TERMINATED, WAITING
from proto.errors import InputError
from proto.localsock import private_dir
from proto.model import ContainerRuntime, ContainerTermination, PodRuntime

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

FORMAT = 1
PREVIOUS_LOG = ".previous.log"  # <container>.previous.log: the run before the current one (a DNS label has no '.')
STOP, EVICT, SHUTDOWN = "stop", "evict", "shutdown"  # why a pod is being stopped (Stopping.kind)


class StateError(InputError):
    """A record that cannot be read back."""


@dataclass
class ContainerRecord:
    name: str
    cgroup: str = ""              # its cgroup, relative to the hierarchy root
    state: str = WAITING          # waiting, running, terminated
    pid: int = 0                  # the wrapper shell (leader of the container's process group)
    pid_start: float = 0.0        # its start time (psutil create_time)
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    restarts: int = 0
    attempted: bool = False       # started at least once
    started_at: float = 0.0       # wall clock, seconds
    finished_at: float = 0.0
    next_start_at: float = 0.0    # waiting: when its back-off ends
    backoff_step: int = 0
    oom_kills: int = 0            # its cgroups' OOM kill count when it started
    last_exit: dict | None = None   # how its latest run ended: exit_code, reason, message, started_at, finished_at
    prior_exit: dict | None = None  # how the run before that ended


@dataclass
class Stopping:
    kind: str                     # stop (deleted), evict, shutdown
    reason: str = ""
    deadline: float = 0.0         # wall clock: SIGKILL after this
    killed: bool = False


@dataclass
class PodRecord:
    uid: str
    namespace: str = ""
    name: str = ""
    manifest: dict | None = None  # None: it never parsed (the record only says why it failed)
    phase: str = PENDING
    reason: str = ""
    message: str = ""
    started_at: float = 0.0
    cgroup: str = ""              # the pod cgroup while it exists ("" : none)
    containers: list[ContainerRecord] = field(default_factory=list)
    stopping: Stopping | None = None
    netns: str = ""               # its network namespace while it exists ("" : none, or the host's network)
    prepared: bool = False        # its volumes, hosts file and network are in place (podsetup.prepare)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.name else self.uid

    @property
    def restarts(self) -> int:
        return sum(c.restarts for c in self.containers)

    def container(self, name: str) -> ContainerRecord:
        return next(c for c in self.containers if c.name == name)

    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, doc: dict) -> PodRecord:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise StateError(f"not a pod record of format {FORMAT}")
        try:
            containers = [ContainerRecord(**_known(ContainerRecord, c)) for c in doc.get("containers") or []]
            stopping = doc.get("stopping")
            record = cls(**{**_known(cls, doc), "containers": containers,
                            "stopping": Stopping(**_known(Stopping, stopping)) if stopping else None})
        except (TypeError, AttributeError) as exc:
            raise StateError(f"malformed pod record: {exc}") from None
        if not isinstance(record.uid, str) or not record.uid:
            raise StateError("pod record without a uid")
        return record


def _known(cls: type[DataclassInstance], doc: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in doc.items() if k in names}


class StateDir:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.pods = self.root / "pods"
        self.logs = self.root / "logs"
        self.run = self.root / "run"
        # the records hold the pods' manifests (their secrets) and the logs their output: the owner's alone
        # each refused if another user owns it or it is shared (/tmp), else made or tightened to 0700 (an
        # earlier version made them 0755)
        for d in (self.root, self.pods, self.logs, self.run):
            private_dir(d)

    def record_path(self, uid: str) -> Path:
        return self.pods / f"{uid}.json"

    def save(self, record: PodRecord) -> None:
        path = self.record_path(record.uid)
        tmp = path.with_name(f".{path.name}.tmp")
        data = json.dumps(record.to_dict(), separators=(",", ":"), sort_keys=True).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def load_all(self) -> list[PodRecord]:
        """Every record that reads back; one that does not is logged and set aside as ``<uid>.json.bad``."""
        out = []
        for path in sorted(self.pods.glob("*.json")):
            try:
                record = PodRecord.from_dict(json.loads(path.read_text()))
                if record.uid != path.stem:
                    raise StateError(f"it names pod {record.uid!r}")
            except (OSError, ValueError) as exc:
                log.error("local runtime: cannot read pod record %s (%s); set aside as %s.bad", path, exc, path.name)
                os.replace(path, path.with_name(path.name + ".bad"))
                continue
            out.append(record)
        return out

    def remove(self, uid: str) -> None:
        """Drop a pod's record and its exit files (its logs stay)."""
        self.record_path(uid).unlink(missing_ok=True)
        shutil.rmtree(self.run / uid, ignore_errors=True)

    def exit_file(self, uid: str, container: str) -> Path:
        return self.run / uid / f"{container}.exit"

    def log_dir(self, record: PodRecord) -> Path:
        return self.logs / f"{record.namespace}_{record.name}_{record.uid}"

    def log_path(self, record: PodRecord, container: str) -> Path:
        """The log of the container's current (or last) run."""
        return self.log_dir(record) / f"{container}.log"

    def rotate_log(self, record: PodRecord, container: str) -> None:
        """A container starts again: its last run's log becomes ``<container>.previous.log`` (the one before is
        dropped), and the new run writes a file of its own.  Nothing to do when the last run left no log."""
        current = self.log_path(record, container)
        try:
            os.replace(current, current.with_name(f"{container}{PREVIOUS_LOG}"))
        except FileNotFoundError:
            pass

    def read_exit(self, uid: str, container: str) -> str | None:
        """What the wrapper wrote when the command exited (an exit code, or ``join``), None if nothing."""
        try:
            text = self.exit_file(uid, container).read_text().strip()
        except OSError:
            return None
        return text or None


def to_runtime(record: PodRecord, log_dir: Path) -> PodRuntime:
    """The record as the node report carries it."""
    return PodRuntime(
        record.uid, record.namespace, record.name, record.phase, record.reason, record.message, record.restarts,
        int(record.started_at * 1e9), str(log_dir),
        [_container(c) for c in record.containers])


def _container(c: ContainerRecord) -> ContainerRuntime:
    """A container as the report carries it; its last termination is the run before the one it shows."""
    last = c.prior_exit if c.state == TERMINATED else c.last_exit
    return ContainerRuntime(c.name, c.state, c.exit_code, c.restarts, c.pid if c.state == ACTIVE else 0, c.reason,
                            c.message, _ns(c.started_at), _ns(c.finished_at) if c.state == TERMINATED else 0,
                            None if not last else ContainerTermination(
                                int(last.get("exit_code", 0)), str(last.get("reason", "")),
                                str(last.get("message", "")), _ns(last.get("started_at", 0.0)),
                                _ns(last.get("finished_at", 0.0))))


def _ns(seconds: float) -> int:
    return int(seconds * 1e9) if seconds else 0
