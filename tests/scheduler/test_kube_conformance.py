"""kube-scheduler's own plugin tests, ported as data: ``tests/fixtures/kube/<plugin>/<function>/*.yaml``.

Each file is one case of a Go test in ``kubernetes/kubernetes``
(``pkg/scheduler/framework/plugins/<plugin>/*_test.go``), in the schema of the Volcano conformance
suite (tests/scheduler/test_volcano_conformance.py): ``source: {file, function, case}``, optional
``differs``/``pending``, ``config``, ``cycles``, ``objects``, ``expect``, run through the real
simulator (tests/support/scenario.py).  A Go case that checks filter verdicts becomes a cluster of
its nodes and pods with the pod to place, and ``expect.filter`` gives each node's verdict before any
cycle: none where the pod passes every filter, else kube-scheduler's reason.  A Go score case gives
``expect.scores``: the node scores of the configured plugins (nodeorder with only the plugin's weight
set).  A case the API server would refuse expects ``refused``: the one located error.  Some earlier
cases check instead where the pod binds, or that it stays pending with kube-scheduler's reason.

``tests/fixtures/kube/upstream_tests.yaml`` (``hack/kube_cases.py``) lists the test functions of those
files; each must be ported or listed with the reason in ``tests/fixtures/kube/left_out.yaml``, and where
it counts a function's table cases, the ported and left-out cases must add up to the count.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.support.scenario import check, run_scenario

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "kube"
CASES = sorted(p for p in ROOT.rglob("*.yaml") if not p.name.startswith("left_out") and p.name != "upstream_tests.yaml")


def _param(path: Path) -> object:
    case = yaml.safe_load(path.read_text())
    marks = [pytest.mark.xfail(reason=case["pending"], strict=True)] if case.get("pending") else []
    return pytest.param(path, marks=marks, id=str(path.relative_to(ROOT).with_suffix("")))


@pytest.mark.parametrize("path", [_param(p) for p in CASES])
def test_kube_case(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    source = case["source"]
    assert {"file", "function", "case"} <= set(source), f"{path}: source must name file, function and case"
    assert source["file"].startswith("pkg/scheduler/framework/plugins/"), path
    assert path.parent.name == source["function"], f"{path}: the folder must be the Go function's name"
    result = run_scenario(case, tmp_path)
    problems = check(result, case["expect"])
    assert not problems, f"{source['file']} {source['function']} {source['case']!r}:\n  " + "\n  ".join(problems)


def test_cases_exist() -> None:
    assert len(CASES) >= 150


def _left_out() -> list[dict]:
    entries = yaml.safe_load((ROOT / "left_out.yaml").read_text())
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert {"file", "function", "case", "why"} <= set(entry), entry
        assert str(entry["why"]).strip(), entry
    return entries


def test_every_kube_test_function_is_ported_or_left_out() -> None:
    upstream = yaml.safe_load((ROOT / "upstream_tests.yaml").read_text())
    files = upstream["files"]
    listed = {(path, fn) for path, entry in files.items() for fn in entry["functions"]}
    assert len(listed) >= 25
    ported: Counter = Counter()
    for path in CASES:
        source = yaml.safe_load(path.read_text())["source"]
        ported[(source["file"], source["function"])] += 1
    left = _left_out()
    left_whole = {(e["file"], e["function"]) for e in left if e["case"] == "(all cases)"}
    left_cases = Counter((e["file"], e["function"]) for e in left if e["case"] != "(all cases)")
    missing = sorted(listed - set(ported) - left_whole - set(left_cases))
    assert not missing, f"neither ported nor left out: {missing}"
    cited = set(ported) | left_whole | set(left_cases)
    unknown = sorted((f, fn) for f, fn in cited if f in files and fn not in files[f]["functions"])
    assert not unknown, f"cited, but not a test function of that file: {unknown}"
    assert not left_whole & set(ported), f"left out whole, yet ported: {sorted(left_whole & set(ported))}"
    for path, entry in files.items():
        for fn, count in (entry.get("cases") or {}).items():
            got = ported[(path, fn)] + left_cases[(path, fn)]
            assert got == count, f"{path} {fn}: {count} cases upstream, {ported[(path, fn)]} ported + " \
                                 f"{left_cases[(path, fn)]} left out"


def test_the_upstream_list_is_read_from_a_clone(tmp_path: Path) -> None:
    """hack/kube_cases.py on a small clone: the four plugins' test files only, TestMain left out, case
    counts kept for functions still there."""
    import importlib.util
    import subprocess

    spec = importlib.util.spec_from_file_location("kube_cases", ROOT.parents[2] / "hack" / "kube_cases.py")
    assert spec and spec.loader
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    base = "pkg/scheduler/framework/plugins"
    files = {f"{base}/nodeports/node_ports_test.go": "func TestMain(m *testing.M) {}\nfunc TestNodePorts(t *T) {}\n"
                                                      "func helper() {}\nfunc BenchmarkPorts(b *B) {}\n",
             f"{base}/podtopologyspread/scoring_test.go": "func TestPodTopologySpreadScore(t *T) {}\n",
             f"{base}/podtopologyspread/testing/util_test.go": "func TestUtil(t *T) {}\n",
             f"{base}/noderesources/fit_test.go": "func TestFit(t *T) {}\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    previous = {"files": {f"{base}/nodeports/node_ports_test.go": {"cases": {"TestNodePorts": 15, "TestGone": 3}}}}
    got = cases.functions(str(tmp_path), "HEAD", previous)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert got["files"] == {
        f"{base}/nodeports/node_ports_test.go": {"commit": commit, "functions": ["TestNodePorts", "BenchmarkPorts"],
                                                  "cases": {"TestNodePorts": 15}},
        f"{base}/podtopologyspread/scoring_test.go": {"commit": commit, "functions": ["TestPodTopologySpreadScore"]}}
    assert yaml.safe_load(cases.render(got)) == got
