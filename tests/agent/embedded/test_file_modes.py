"""The local runtime's files are its owner's alone: the state folder and those in it 0700, pod records and
pod logs 0600 — the records hold manifests (their environment: secrets), the logs what pods print.

Real files and a real process (``spawn`` runs its command through the wrapper shell, no cgroup to join).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from agent.embedded.process import spawn
from agent.embedded.records import PodRecord, StateDir
from proto.localsock import LocalAccessError


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask():
    old = os.umask(0)  # the worst a caller's umask can be: nothing may rely on it
    yield
    os.umask(old)


def test_the_state_folder_and_records_are_private_whatever_the_umask(tmp_path: Path, loose_umask) -> None:
    state = StateDir(tmp_path / "state")
    state.save(PodRecord("uid-1", "default", "web", {"spec": {"containers": [{"env": [{"value": "secret"}]}]}}))
    assert mode_of(state.root) == 0o700
    for folder in (state.pods, state.logs, state.run):
        assert mode_of(folder) == 0o700, folder
    assert mode_of(state.record_path("uid-1")) == 0o600


def test_an_earlier_versions_open_folders_are_tightened(tmp_path: Path, loose_umask) -> None:
    root = tmp_path / "state"
    for name in ("", "pods", "logs", "run"):
        (root / name).mkdir(mode=0o755, exist_ok=True)
        os.chmod(root / name, 0o755)
    StateDir(root)
    assert [mode_of(root / name) for name in ("", "pods", "logs", "run")] == [0o700] * 4


def test_a_shared_folder_is_refused_not_changed(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    with pytest.raises(LocalAccessError, match="a shared folder"):
        StateDir(shared)
    assert mode_of(shared) == 0o1777


def test_pod_logs_are_private_and_an_old_readable_log_is_tightened(tmp_path: Path, loose_umask) -> None:
    state = StateDir(tmp_path / "state")
    log = state.logs / "default_web_uid-1" / "main.log"
    started = spawn(["/bin/echo", "hello"], env={"PATH": os.defpath}, cwd="/", log_path=log,
                    exit_file=state.exit_file("uid-1", "main"), procs_files=[])
    started.popen.wait(10)
    assert mode_of(log.parent) == 0o700 and mode_of(log) == 0o600
    assert mode_of(state.exit_file("uid-1", "main").parent) == 0o700  # the pod's run folder, like every other
    deadline = time.monotonic() + 5
    while log.read_text() != "hello\n" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert log.read_text() == "hello\n"
    old = state.logs / "default_old_uid-2" / "main.log"  # written by an earlier version: 0644
    old.parent.mkdir(mode=0o755)
    old.write_text("before\n")
    os.chmod(old, 0o644)
    spawn(["/bin/echo", "again"], env={"PATH": os.defpath}, cwd="/", log_path=old,
          exit_file=state.exit_file("uid-2", "main"), procs_files=[]).popen.wait(10)
    assert mode_of(old) == 0o600 and old.read_text().startswith("before\n")
