"""The list of Volcano's scheduler test functions that the conformance suite accounts for:
``python hack/volcano_cases.py VOLCANO_GIT [--rev REV] [--write]``.

Issue 14 takes Volcano's scheduler unit tests as the reference: every test function in
``pkg/scheduler/actions/*/*_test.go`` and ``pkg/scheduler/plugins/*/*_test.go`` must be ported as data under
``tests/fixtures/volcano`` or listed in a ``left_out*.yaml`` with the reason.  This script reads those files at one
commit of a Volcano clone (bare or not) and prints, or with ``--write`` stores, the functions they define in
``tests/fixtures/volcano/upstream_tests.yaml``.  ``tests/scheduler/test_volcano_conformance.py`` checks that every
function listed there is accounted for, so moving the pin to a newer Volcano shows what it added.

``TestMain`` (set-up, not a test) is left out.  Table cases inside a function are not listed: their names are not
told apart reliably from the other string fields of a Go test table, so the check is per function.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "volcano" / "upstream_tests.yaml"
GLOBS = ("pkg/scheduler/actions/*/*_test.go", "pkg/scheduler/plugins/*/*_test.go")
FUNC = re.compile(r"^func ((?:Test|Benchmark)\w*)\(", re.M)


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def _in_scope(path: str) -> bool:
    # fnmatch's * crosses '/', so the depth is checked by counting the parts
    return any(fnmatch.fnmatch(path, g) and path.count("/") == g.count("/") for g in GLOBS)


def functions(repo: str, rev: str) -> dict[str, object]:
    commit = _git(repo, "rev-parse", f"{rev}^{{commit}}").strip()
    files = sorted(p for p in _git(repo, "ls-tree", "-r", "--name-only", commit).split() if _in_scope(p))
    listed: dict[str, list[str]] = {}
    for path in files:
        names = [n for n in FUNC.findall(_git(repo, "show", f"{commit}:{path}")) if n != "TestMain"]
        if names:
            listed[path] = names
    return {"repository": "volcano-sh/volcano", "commit": commit, "files": listed}


def render(data: dict[str, object]) -> str:
    head = ("# Volcano's scheduler test functions (pkg/scheduler/actions/*/*_test.go, pkg/scheduler/plugins/*/*_test.go)\n"
            "# at one commit, made by hack/volcano_cases.py; each is ported under tests/fixtures/volcano or listed in a\n"
            "# left_out*.yaml with the reason (tests/scheduler/test_volcano_conformance.py checks it).\n")
    return head + yaml.safe_dump(data, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="a clone of volcano-sh/volcano (its work tree or git directory)")
    parser.add_argument("--rev", default="HEAD", help="the commit to read (default HEAD)")
    parser.add_argument("--write", action="store_true", help=f"replace {OUT.relative_to(OUT.parents[3])}")
    args = parser.parse_args(argv)
    text = render(functions(args.repo, args.rev))
    if args.write:
        OUT.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
