"""What hack/volcano_cases.py and hack/kube_cases.py share: the test functions an upstream Go repository
defines, read from a clone (its work tree or git directory) at one commit, and the list printed or stored."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

FUNC = re.compile(r"^func ((?:Test|Benchmark)\w*)\(", re.M)


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def commit_of(repo: str, rev: str) -> str:
    """The full hash of the commit ``rev`` names."""
    return git(repo, "rev-parse", f"{rev}^{{commit}}").strip()


def files(repo: str, commit: str, *under: str) -> list[str]:
    """Every file at ``commit`` (below the paths ``under``, where given)."""
    return git(repo, "ls-tree", "-r", "--name-only", commit, *under).split()


def test_functions(repo: str, commit: str, path: str) -> list[str]:
    """The test and benchmark functions the Go file ``path`` defines at ``commit``, in order; ``TestMain``
    (set-up, not a test) left out."""
    return [n for n in FUNC.findall(git(repo, "show", f"{commit}:{path}")) if n != "TestMain"]


def print_or_write(text: str, out: Path, write: bool) -> None:
    """``text`` to ``out`` when ``write``, else to standard output."""
    if write:
        out.write_text(text)
    else:
        sys.stdout.write(text)
