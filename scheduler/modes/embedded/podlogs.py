"""``logs``: a pod's container log, read from the agent's log folder on this machine, as ``kubectl logs`` shows it.

The agent's runtime writes each run of a container to ``<container>.log`` in the pod's own folder
(``<namespace>_<name>_<uid>``) and, when the container starts again, keeps the run before as
``<container>.previous.log`` (:mod:`agent.embedded.records`): ``--previous`` reads that one.  ``-f`` follows
the current run until it ends (the container restarts, the pod finishes or goes) or Ctrl-C, as kubectl does.

Only a file inside the pod's own folder, links resolved, is read; a folder a report could have named is never
trusted (the control API names it from the agent's state, :meth:`Embedded.pod_log_dir`).  A pod that never
started, or a previous run that does not exist, is said in one line, never a file error.
"""

from __future__ import annotations

import argparse
import codecs
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proto.errors import InputError

CONTAINER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a DNS-1123 label, as Kubernetes names containers
PREVIOUS = ".previous.log"  # agent.embedded.records.PREVIOUS_LOG (the agent's side; the CLI reads it here)
FOLLOW_POLL_S = 0.2  # how often -f reads what was added
FOLLOW_CHECK_S = 1.0  # how often -f asks the scheduler whether the run it follows goes on
FINISHED = ("Succeeded", "Failed")


class LogsError(InputError):
    """Something ``logs`` cannot show, said in one line; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def logs(args: argparse.Namespace, fetch: Callable[[], dict]) -> int:
    """Print the log ``args`` ask for (``name``, ``namespace``, ``container``, ``tail``, and ``previous`` and
    ``follow`` where given); ``fetch()`` is the pod as the control API has it."""
    previous, following = bool(getattr(args, "previous", False)), bool(getattr(args, "follow", False))
    item = fetch()
    key = f"{args.namespace}/{args.name}"
    name = container_of(item, args.container, key)
    state = _state(item, name)
    log_dir = (item["status"].get("runtime") or {}).get("logDir")
    if not log_dir:
        raise LogsError(f"container {name!r} in pod {key} is waiting to start: {_why_not_started(item)}")
    meta = item["manifest"].get("metadata") or {}
    folder = pod_folder(Path(log_dir), f"{meta.get('namespace')}_{meta.get('name')}_{meta.get('uid')}")
    if previous:
        path = log_file(folder, f"{name}{PREVIOUS}")
        if path is None:
            raise LogsError(f"previous terminated container {name!r} in pod {key} not found (it has not restarted)")
        _write(_tail(_read(path), args.tail))
        return 0
    path = log_file(folder, f"{name}.log")
    if path is None:  # how its last try ended says why (StartError: no such file) better than its back-off
        why = state.get("lastState") or state
        if _has_run(state):
            raise LogsError(f"container {name!r} in pod {key} has run, but there is no log of it in {folder}: is "
                            "serve's --agent-state the agent's --state?")
        reason = why.get("reason") or "ContainerCreating"
        detail = f": {why['message']}" if why.get("message") else ""
        raise LogsError(f"container {name!r} in pod {key} has not written a log: it never started ({reason}{detail})")
    if not following:
        _write(_tail(_read(path), args.tail))
        return 0
    return follow(path, args.tail, lambda: _still_running(fetch, name, state))


def container_of(item: dict, asked: str | None, key: str) -> str:
    containers = [c.get("name") for c in (item["manifest"].get("spec") or {}).get("containers") or []]
    name = asked or (containers[0] if len(containers) == 1 else None)
    if name is None:
        raise LogsError(f"pod {key} has several containers: choose one with -c ({', '.join(map(str, containers))})", 2)
    if not isinstance(name, str) or len(name) > 63 or not CONTAINER_NAME.fullmatch(name) or name not in containers:
        raise LogsError(f"pod {key} has no container {str(name)[:80]!r} "
                        f"(it has {', '.join(map(str, containers)) or 'none'})", 2)
    return name


def _state(item: dict, name: str) -> dict:
    containers = (item["status"].get("runtime") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == name), {})


def _has_run(state: dict) -> bool:
    """Whether the container's command ever ran: it runs, or a run of it ended other than by StartError."""
    if state.get("state") == "running":
        return True
    ends = ([state] if state.get("state") == "terminated" else []) + ([state["lastState"]] if state.get("lastState")
                                                                     else [])
    return any(end.get("reason") != "StartError" for end in ends)


def _why_not_started(item: dict) -> str:
    status = item["status"]
    if not status.get("nodeName"):
        reason = status.get("reason")
        return f"not scheduled yet ({reason})" if reason else "not scheduled yet"
    return f"ContainerCreating (bound to {status['nodeName']}, not started there yet)"


def pod_folder(log_dir: Path, folder: str) -> Path:
    """The pod's own log folder, resolved; LogsError unless ``log_dir`` is it (``<ns>_<name>_<uid>``)."""
    if log_dir.name != folder or not log_dir.is_absolute():
        raise LogsError(f"the pod's log folder {str(log_dir)[:200]!r} is not its own ({folder}): not reading it")
    try:
        return log_dir.resolve(strict=True)
    except FileNotFoundError:
        return log_dir  # nothing written yet: each file is then missing too
    except PermissionError:
        raise LogsError(f"permission denied on {log_dir}: the pods' logs are root's; run as root") from None
    except (OSError, RuntimeError) as exc:
        raise LogsError(f"cannot read {log_dir}: {getattr(exc, 'strerror', None) or exc}") from None


def log_file(folder: Path, name: str) -> Path | None:
    """``folder/name``, links resolved, when it exists inside ``folder``; None when it does not exist."""
    try:
        path = (folder / name).resolve(strict=True)
    except FileNotFoundError:
        return None
    except PermissionError:
        raise LogsError(f"permission denied on {folder}: the pods' logs are root's; run as root") from None
    except (OSError, RuntimeError) as exc:
        raise LogsError(f"cannot read {folder / name}: {getattr(exc, 'strerror', None) or exc}") from None
    if path.parent != folder:
        raise LogsError(f"{folder / name} leads outside the pod's log folder: not reading it")
    return path


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except PermissionError:
        raise LogsError(f"permission denied on {path}: the pods' logs are root's; run as root") from None
    except OSError as exc:
        raise LogsError(f"cannot read {path}: {exc.strerror}") from None


def _tail(text: str, lines: int | None) -> str:
    if lines is None or lines < 0:
        return text
    return "".join(text.splitlines(keepends=True)[-lines:]) if lines else ""


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _still_running(fetch: Callable[[], dict], name: str, first: dict) -> bool:
    """Whether the run ``-f`` started on goes on: the pod is there, not finished, its container not restarted."""
    try:
        item = fetch()
    except Exception:  # gone (404), or the scheduler stopped: the stream ends, as kubectl's does
        return False
    if (item["status"].get("phase") or "Pending") in FINISHED:
        return False
    now = _state(item, name)
    return now.get("restarts", 0) == first.get("restarts", 0) and now.get("state") != "terminated"


def follow(path: Path, tail: int | None, running: Callable[[], bool], *,
           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Any] = time.sleep) -> int:
    """Print ``path`` (its last ``tail`` lines first), then what is added, until ``running()`` says the run ended
    (what it wrote until then is printed too)."""
    try:
        f = path.open("rb")
    except OSError as exc:
        raise LogsError(f"cannot read {path}: {exc.strerror}") from None
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character may be split between reads
    with f:
        _write(_tail(text.decode(f.read()), tail))
        checked = clock()
        while True:
            chunk = f.read()
            if chunk:
                _write(text.decode(chunk))
                continue
            if clock() - checked >= FOLLOW_CHECK_S:
                checked = clock()
                if not running():
                    _write(text.decode(f.read(), final=True))
                    return 0
            sleep(FOLLOW_POLL_S)
