"""kube-scheduler's own plugin tests, ported as data: ``tests/fixtures/kube/<plugin>/*.yaml``.

Each file is one case of a Go test in ``kubernetes/kubernetes``
(``pkg/scheduler/framework/plugins/<plugin>/*_test.go``), in the schema of the Volcano conformance
suite (tests/scheduler/test_volcano_conformance.py): ``source: {file, function, case}``, optional
``differs``/``pending``, ``config``, ``cycles``, ``objects``, ``expect``, run through the real
simulator (tests/support/scenario.py).  A Go case that checks one node's filter verdict becomes a
cluster of that node (and the pods on it) with the pod to place: it binds there, or stays pending
with kube-scheduler's reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.scenario import check, run_scenario

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "kube"
CASES = sorted(ROOT.rglob("*.yaml"))


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
    result = run_scenario(case, tmp_path)
    problems = check(result, case["expect"])
    assert not problems, f"{source['file']} {source['function']} {source['case']!r}:\n  " + "\n  ".join(problems)


def test_cases_exist() -> None:
    assert len(CASES) >= 10
