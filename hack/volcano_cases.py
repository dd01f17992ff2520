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
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hack.lib.gotests import commit_of, files, print_or_write, test_functions  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "volcano" / "upstream_tests.yaml"
GLOBS = ("pkg/scheduler/actions/*/*_test.go", "pkg/scheduler/plugins/*/*_test.go")


def _in_scope(path: str) -> bool:
    # fnmatch's * crosses '/', so the depth is checked by counting the parts
    return any(fnmatch.fnmatch(path, g) and path.count("/") == g.count("/") for g in GLOBS)


def functions(repo: str, rev: str) -> dict[str, object]:
    commit = commit_of(repo, rev)
    listed: dict[str, list[str]] = {}
    for path in sorted(p for p in files(repo, commit) if _in_scope(p)):
        names = test_functions(repo, commit, path)
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
    print_or_write(render(functions(args.repo, args.rev)), OUT, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
