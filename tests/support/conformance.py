"""What the suites of upstream test cases ported as data share (tests/scheduler/test_volcano_conformance.py,
tests/scheduler/test_kube_conformance.py): a case file as a test parameter, a case run and checked, and a
small Go clone for the scripts that list the upstream test functions (hack/volcano_cases.py, hack/kube_cases.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.scenario import check, run_scenario


def case_param(path: Path, root: Path) -> object:
    """``path`` as a test parameter named after it below ``root``; a ``pending`` case is a strict xfail."""
    case = yaml.safe_load(path.read_text())
    marks = [pytest.mark.xfail(reason=case["pending"], strict=True)] if case.get("pending") else []
    return pytest.param(path, marks=marks, id=str(path.relative_to(root).with_suffix("")))


def load_case(path: Path) -> dict:
    """The case in ``path``, its ``source`` naming file, function and case."""
    case = yaml.safe_load(path.read_text())
    assert {"file", "function", "case"} <= set(case["source"]), f"{path}: source must name file, function and case"
    return case


def check_case(case: dict, tmp_path: Path) -> None:
    """Run ``case`` through the simulator; fail naming its source and every expectation it missed."""
    source = case["source"]
    problems = check(run_scenario(case, tmp_path), case["expect"])
    assert not problems, f"{source['file']} {source['function']} {source['case']!r}:\n  " + "\n  ".join(problems)


def commit_files(repo: Path, files: dict[str, str]) -> str:
    """A git repository at ``repo`` with one commit of ``files`` (path: text); that commit's hash."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
