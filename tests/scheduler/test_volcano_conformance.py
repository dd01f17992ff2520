"""Volcano's own scheduler unit tests, ported as data: ``tests/fixtures/volcano/**/*.yaml``.

Each file is one case of a Go test in ``volcano-sh/volcano`` (``pkg/scheduler/actions/*/*_test.go``,
``pkg/scheduler/plugins/*/*_test.go``), written as objects in and end state out and run through the
real simulator (tests/support/scenario.py)::

    source:                       # where the case comes from (required)
      file: pkg/scheduler/actions/allocate/allocate_test.go
      function: TestAllocate
      case: "one Job with two Pods on one node"
    differs: "..."                # optional: Scoria deliberately differs; why, citing the Volcano issue
    pending: "..."                # optional: not built yet (xfail, strict: passing it fails the suite)
    config: |                     # the scheduler configuration the Go test builds (Volcano format)
      actions: "allocate"
      tiers: [...]
    cycles: 1                     # Volcano's tests run the action once
    objects: [...]                # as in tests/fixtures/scenarios (full manifests or compact forms)
    expect: {...}                 # as in tests/fixtures/scenarios

Cases that cannot be written this way are listed, with the reason, in
``tests/fixtures/volcano/left_out*.yaml``.  ``tests/fixtures/volcano/upstream_tests.yaml`` (made by
``hack/volcano_cases.py`` from a Volcano clone) lists every test function of those Go files at the commit the
suite follows; each must be ported or left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.scenario import check, run_scenario

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "volcano"
CASES = sorted(ROOT.rglob("*.yaml"))
CASES = [p for p in CASES if not p.name.startswith("left_out") and p.name != "upstream_tests.yaml"]


def _param(path: Path) -> object:
    case = yaml.safe_load(path.read_text())
    marks = [pytest.mark.xfail(reason=case["pending"], strict=True)] if case.get("pending") else []
    return pytest.param(path, marks=marks, id=str(path.relative_to(ROOT).with_suffix("")))


@pytest.mark.parametrize("path", [_param(p) for p in CASES])
def test_volcano_case(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    source = case["source"]
    assert {"file", "function", "case"} <= set(source), f"{path}: source must name file, function and case"
    result = run_scenario(case, tmp_path)
    problems = check(result, case["expect"])
    assert not problems, f"{source['file']} {source['function']} {source['case']!r}:\n  " + "\n  ".join(problems)


def test_left_out_cases_say_why() -> None:
    paths = sorted(ROOT.rglob("left_out*.yaml"))
    assert len(paths) >= 4
    for path in paths:
        entries = yaml.safe_load(path.read_text()) or []
        assert isinstance(entries, list) and entries, path
        for entry in entries:
            assert {"file", "function", "case", "why"} <= set(entry), (path, entry)
            assert str(entry["why"]).strip(), (path, entry)


def test_every_ported_case_is_run_and_every_pending_one_says_by_what() -> None:
    """A case is either expected to pass, or pending with the issue (or BUG) that holds it back."""
    assert len(CASES) >= 150
    for path in CASES:
        case = yaml.safe_load(path.read_text())
        pending = case.get("pending")
        assert pending is None or str(pending).startswith(("issue ", "BUG:", "needs ")), (path, pending)


def _cited() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(file, function) of every ported case, and of every case left out."""
    ported = set()
    for path in CASES:
        source = yaml.safe_load(path.read_text())["source"]
        ported.add((source["file"], source["function"]))
    left = {(e["file"], e["function"]) for p in ROOT.rglob("left_out*.yaml") for e in yaml.safe_load(p.read_text())}
    return ported, left


def test_every_volcano_test_function_is_ported_or_left_out() -> None:
    upstream = yaml.safe_load((ROOT / "upstream_tests.yaml").read_text())
    listed = {(file, fn) for file, fns in upstream["files"].items() for fn in fns}
    assert len(listed) >= 200
    ported, left = _cited()
    missing = sorted(listed - ported - left)
    assert not missing, f"neither ported nor left out (Volcano {upstream['commit'][:12]}): {missing}"
    # a case naming a function its file does not define is a typo (files outside the listed globs are not checked)
    unknown = sorted((f, fn) for f, fn in ported | left if f in upstream["files"] and fn not in upstream["files"][f])
    assert not unknown, f"cited, but not a test function of that file: {unknown}"



def test_the_upstream_list_is_read_from_a_clone(tmp_path: Path) -> None:
    """hack/volcano_cases.py on a small clone: test functions of the two globs only, TestMain left out."""
    import importlib.util
    import subprocess

    spec = importlib.util.spec_from_file_location("volcano_cases", ROOT.parents[2] / "hack" / "volcano_cases.py")
    assert spec and spec.loader
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    files = {"pkg/scheduler/actions/allocate/allocate_test.go": "func TestMain(m *testing.M) {}\n"
                                                                 "func TestAllocate(t *testing.T) {}\n"
                                                                 "func helper() {}\nfunc BenchmarkAllocate(b *B) {}\n",
             "pkg/scheduler/plugins/gang/gang_test.go": "func TestGang(t *testing.T) {}\n",
             "pkg/scheduler/plugins/util/k8s/snapshot_test.go": "func TestSnapshot(t *testing.T) {}\n",
             "pkg/scheduler/plugins/defaults_test.go": "func TestDefaults(t *testing.T) {}\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    got = cases.functions(str(tmp_path), "HEAD")
    assert got["files"] == {"pkg/scheduler/actions/allocate/allocate_test.go": ["TestAllocate", "BenchmarkAllocate"],
                            "pkg/scheduler/plugins/gang/gang_test.go": ["TestGang"]}
    assert len(str(got["commit"])) == 40
