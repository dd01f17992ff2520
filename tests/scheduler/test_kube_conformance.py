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

from tests.support.conformance import case_param, check_case, commit_files, load_case

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "kube"
CASES = sorted(p for p in ROOT.rglob("*.yaml") if not p.name.startswith("left_out") and p.name != "upstream_tests.yaml")


@pytest.mark.parametrize("path", [case_param(p, ROOT) for p in CASES])
def test_kube_case(path: Path, tmp_path: Path) -> None:
    case = load_case(path)
    source = case["source"]
    assert source["file"].startswith("pkg/scheduler/framework/plugins/"), path
    assert path.parent.name == source["function"], f"{path}: the folder must be the Go function's name"
    check_case(case, tmp_path)


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
    from hack import kube_cases as cases

    base = "pkg/scheduler/framework/plugins"
    files = {f"{base}/nodeports/node_ports_test.go": "func TestMain(m *testing.M) {}\nfunc TestNodePorts(t *T) {}\n"
                                                      "func helper() {}\nfunc BenchmarkPorts(b *B) {}\n",
             f"{base}/podtopologyspread/scoring_test.go": "func TestPodTopologySpreadScore(t *T) {}\n",
             f"{base}/podtopologyspread/testing/util_test.go": "func TestUtil(t *T) {}\n",
             f"{base}/noderesources/fit_test.go": "func TestFit(t *T) {}\n"}
    commit = commit_files(tmp_path, files)
    previous = {"files": {f"{base}/nodeports/node_ports_test.go": {"cases": {"TestNodePorts": 15, "TestGone": 3}}}}
    got = cases.functions(str(tmp_path), "HEAD", previous)
    assert got["files"] == {
        f"{base}/nodeports/node_ports_test.go": {"commit": commit, "functions": ["TestNodePorts", "BenchmarkPorts"],
                                                  "cases": {"TestNodePorts": 15}},
        f"{base}/podtopologyspread/scoring_test.go": {"commit": commit, "functions": ["TestPodTopologySpreadScore"]}}
    assert yaml.safe_load(cases.render(got)) == got
