"""The list of kube-scheduler plugin test functions that the kube conformance suite accounts for:
``python hack/kube_cases.py KUBERNETES_GIT [--rev REV] [--write]``.

Issue 15 ports kube-scheduler's own tests of the plugins Scoria reimplements — InterPodAffinity,
PodTopologySpread, SchedulingGates, NodePorts: ``pkg/scheduler/framework/plugins/{interpodaffinity,
podtopologyspread,schedulinggates,nodeports}/*_test.go`` — as data under ``tests/fixtures/kube``, and lists
every case it does not port in ``tests/fixtures/kube/left_out.yaml`` with the reason.  This script reads those
files at one commit of a Kubernetes clone (bare or not) and prints, or with ``--write`` stores, the test
functions they define in ``tests/fixtures/kube/upstream_tests.yaml``; ``tests/scheduler/test_kube_conformance.py``
checks that each is ported or left out, so moving to a newer Kubernetes shows what it added.

Per function, the stored list may also say how many table cases the function has (``cases``): the suite then
checks that the ported and left-out cases add up to it.  Case names are not told apart reliably from the
other strings of a Go test table, so this script does not count them: it keeps the counts already stored for
functions that are still there, and they must be checked by hand when the commit moves.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kube" / "upstream_tests.yaml"
PLUGINS = ("interpodaffinity", "podtopologyspread", "schedulinggates", "nodeports")
PREFIX = "pkg/scheduler/framework/plugins/"
FUNC = re.compile(r"^func ((?:Test|Benchmark)\w*)\(", re.M)


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def _in_scope(path: str) -> bool:
    folder, _, name = path.removeprefix(PREFIX).partition("/")
    return path.startswith(PREFIX) and folder in PLUGINS and "/" not in name and name.endswith("_test.go")


def functions(repo: str, rev: str, previous: dict | None = None) -> dict[str, object]:
    """Every test function of the four plugins' test files at ``rev``; case counts kept from ``previous``."""
    commit = _git(repo, "rev-parse", f"{rev}^{{commit}}").strip()
    paths = sorted(p for p in _git(repo, "ls-tree", "-r", "--name-only", commit, PREFIX).split() if _in_scope(p))
    old_files = (previous or {}).get("files") or {}
    listed: dict[str, object] = {}
    for path in paths:
        names = [n for n in FUNC.findall(_git(repo, "show", f"{commit}:{path}")) if n != "TestMain"]
        if not names:
            continue
        entry: dict[str, object] = {"commit": commit, "functions": names}
        counts = {fn: n for fn, n in ((old_files.get(path) or {}).get("cases") or {}).items() if fn in names}
        if counts:
            entry["cases"] = counts
        listed[path] = entry
    return {"repository": "kubernetes/kubernetes", "files": listed}


def render(data: dict[str, object]) -> str:
    head = ("# kube-scheduler's test functions of the InterPodAffinity, PodTopologySpread, SchedulingGates and NodePorts\n"
            "# plugins (pkg/scheduler/framework/plugins/<plugin>/*_test.go), each file at the commit named, made by\n"
            "# hack/kube_cases.py; each function is ported under tests/fixtures/kube or listed in left_out.yaml with\n"
            "# the reason, and where 'cases' counts a function's table cases, ported and left-out cases add up to it\n"
            "# (tests/scheduler/test_kube_conformance.py checks both).\n")
    return head + yaml.safe_dump(data, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="a clone of kubernetes/kubernetes (its work tree or git directory)")
    parser.add_argument("--rev", default="HEAD", help="the commit to read (default HEAD)")
    parser.add_argument("--write", action="store_true", help=f"replace {OUT.relative_to(OUT.parents[3])}")
    args = parser.parse_args(argv)
    previous = yaml.safe_load(OUT.read_text()) if OUT.exists() else None
    text = render(functions(args.repo, args.rev, previous))
    if args.write:
        OUT.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
