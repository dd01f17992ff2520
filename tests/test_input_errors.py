"""One input-error base class, caught at both command-line edges: bad input is one line and exit 2,
any other exception (a bug) stays a traceback."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import agent.cli
import scheduler.cli
from proto.errors import InputError

# every error class that reports bad input, by module
INPUT_ERRORS = {
    "agent.embedded.records": "StateError",
    "agent.embedded.spec": "SpecError",
    "agent.profile": "ProfileError",
    "scheduler.api.manifests": "ManifestError",
    "scheduler.controllers.jobplugins.base": "ArgumentError",
    "scheduler.framework.args": "ArgError",
    "scheduler.framework.config": "ConfigError",
    "scheduler.intake.server": "ServeError",
    "scheduler.modes.embedded.store": "StoreError",
    "proto.vocab.quantity": "QuantityError",
    "proto.localsock": "LocalAccessError",
    "proto.ports": "PortInUse",
    "scheduler.statelock": "StateInUse",
}


@pytest.mark.parametrize(("module", "name"), sorted(INPUT_ERRORS.items()))
def test_input_errors_share_one_base(module: str, name: str) -> None:
    assert issubclass(getattr(importlib.import_module(module), name), InputError)


def test_no_other_error_class_derives_from_valueerror_directly() -> None:
    """A new error class for bad input derives from InputError; one deriving from ValueError would
    escape the CLIs' catch and show a user a traceback."""
    offenders = []
    for root in ("agent", "scheduler", "proto"):
        pkg = importlib.import_module(root)
        for info in pkgutil.walk_packages(pkg.__path__, root + "."):
            if info.name.endswith("__main__") or "_pb2" in info.name:
                continue
            mod = importlib.import_module(info.name)
            for obj in vars(mod).values():
                if inspect.isclass(obj) and obj.__module__ == mod.__name__ and ValueError in obj.__bases__ \
                        and obj is not InputError:
                    offenders.append(f"{mod.__name__}.{obj.__name__}")
    # the phase tables (PodGroup, local pod) refuse a move as a programming error, not input
    assert sorted(offenders) == ["agent.embedded.phase.InvalidTransition", "scheduler.framework.status.InvalidTransition"]


def test_scheduler_cli_bad_input_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(scheduler.cli, "cmd_simulate", lambda args: (_ for _ in ()).throw(InputError("x.yaml:3: bad")))
    assert scheduler.cli.main(["simulate", "-f", "x.yaml"]) == 2
    assert "x.yaml:3: bad" in capsys.readouterr().err


def test_scheduler_cli_bug_stays_a_traceback(monkeypatch) -> None:
    monkeypatch.setattr(scheduler.cli, "cmd_simulate", lambda args: int("not a number"))
    with pytest.raises(ValueError, match="invalid literal"):
        scheduler.cli.main(["simulate", "-f", "x.yaml"])


def test_agent_cli_bad_input_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(agent.cli, "cmd_report", lambda args: (_ for _ in ()).throw(InputError("--node-labels: bad")))
    assert agent.cli.main(["report", "--once"]) == 2
    assert "--node-labels: bad" in capsys.readouterr().err


def test_agent_cli_bug_stays_a_traceback(monkeypatch) -> None:
    monkeypatch.setattr(agent.cli, "cmd_report", lambda args: {}["missing"])
    with pytest.raises(KeyError):
        agent.cli.main(["report", "--once"])


def test_agent_cli_a_file_not_found_from_a_bug_stays_a_traceback(monkeypatch) -> None:
    """Only InputError is bad input: a FileNotFoundError escaping from the agent's code (a cgroup that left
    mid-read, a bug) is not reported as if the user had named a wrong path."""
    monkeypatch.setattr(agent.cli, "cmd_report", lambda args: Path("/nonexistent/scoria-a12").read_text())
    with pytest.raises(FileNotFoundError):
        agent.cli.main(["report", "--once"])


def test_agent_host_paths_without_what_the_agent_reads_are_input_errors(tmp_path, capsys) -> None:
    """A --host-root or --cgroup-root that lacks cgroups or /proc/stat, and no kubelet tree where pods are acted on,
    is bad input: one line and exit 2, from the real CLI."""
    from agent.cgroups.backend import detect_backend
    from agent.collectors.load import read_cpu_ticks
    from agent.hostpaths import HostPaths
    from hack.lib.cgroup_fixtures import make_tree

    assert agent.cli.main(["report", "--once", "--host-root", str(tmp_path), "--no-devices"]) == 2
    assert "no cgroup hierarchy found under" in capsys.readouterr().err
    with pytest.raises(InputError, match="proc/stat is missing"):
        read_cpu_ticks(HostPaths.under(tmp_path))
    backend = detect_backend(make_tree(tmp_path / "cg"))
    run = ["run", "--dry-run", "--host-root", str(tmp_path), "--cgroup-root", str(tmp_path / "cg"), "--no-devices"]
    assert agent.cli.main(run) == 2  # before any loop runs
    assert "proc/stat is missing" in capsys.readouterr().err
    (tmp_path / "cg" / "cpu" / "kubepods").rename(tmp_path / "cg" / "cpu" / "elsewhere")
    with pytest.raises(InputError, match=r"no kubepods cgroup .* \(or give --cgroup-parent\)"):
        agent.cli._layout(backend, None, enforce=True)
    assert agent.cli._layout(backend, None, enforce=False).__class__.__name__ == "NoLayout"  # observing only
