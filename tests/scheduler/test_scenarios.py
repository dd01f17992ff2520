"""Scenario files under tests/fixtures/scenarios, each run through the real simulator."""

from pathlib import Path

import pytest

from tests.support.scenario import check, load_scenario, run_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    result = run_scenario(scenario, tmp_path)
    problems = check(result, scenario["expect"])
    assert not problems, f"{scenario['name']}:\n  " + "\n  ".join(problems)


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 8
