"""The architecture's import rules (DESIGN.md §6.12) live as import-linter contracts in
pyproject.toml; ``hack/test.sh`` runs ``lint-imports``.  These tests keep the contracts honest:
they hold, and the lists they name cannot fall behind the tree (a new plugin, action or mode that
is missing from its independence contract, or from the built-ins, fails here)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from scheduler.builtins import BUILTIN_ACTIONS, BUILTIN_PLUGINS

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def modules_in(folder: str) -> set[str]:
    """The modules (or packages) directly inside a package, as dotted names, helpers left out."""
    base = ROOT / folder
    found = {p.stem for p in base.glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in base.iterdir() if (p / "__init__.py").exists()}
    return {f"{folder.replace('/', '.')}.{name}" for name in found - {"shared", "base", "table"}}


def independence(prefix: str) -> set[str]:
    for contract in CONTRACTS:
        if contract["type"] == "independence" and all(m.startswith(prefix) for m in contract["modules"]):
            return set(contract["modules"])
    raise AssertionError(f"no independence contract over {prefix}")


def test_every_plugin_action_and_mode_is_in_its_independence_contract() -> None:
    assert independence("scheduler.plugins.") == modules_in("scheduler/plugins")
    assert independence("scheduler.actions.") == modules_in("scheduler/actions")
    assert independence("scheduler.modes.") == modules_in("scheduler/modes")


def test_the_builtins_register_every_plugin_and_action_module() -> None:
    assert {c.__module__ for c in BUILTIN_PLUGINS} == modules_in("scheduler/plugins")
    assert {c.__module__ for c in BUILTIN_ACTIONS} == modules_in("scheduler/actions")


def test_only_the_codec_of_proto_may_import_the_generated_code() -> None:
    """The wire-boundary contract names proto's modules one by one (proto itself holds the generated code):
    a new module of proto is under it unless it is the codec."""
    contract = next(c for c in CONTRACTS if c.get("forbidden_modules") == ["proto.scoria"])
    assert set(contract["source_modules"]) >= {"agent", "scheduler"}
    assert {m for m in contract["source_modules"] if m.startswith("proto.")} == modules_in("proto") - {
        "proto.codec", "proto.scoria"}


def test_the_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_hack_never_imports_the_tests() -> None:
    """hack/lib is what the demo, the benchmarks and the tests share; the tests may use it, not the reverse."""
    import ast

    bad = []
    for path in sorted((ROOT / "hack").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "tests" or n.startswith("tests.")]
    assert not bad


def test_every_job_plugin_is_in_its_contract_and_the_registry() -> None:
    from scheduler.controllers.jobplugins.registry import PLUGINS

    modules = modules_in("scheduler/controllers/jobplugins") - {"scheduler.controllers.jobplugins.registry"}
    assert independence("scheduler.controllers.jobplugins.") == modules
    assert {cls.__module__ for cls in PLUGINS.values()} == modules


def test_test_helpers_live_in_tests_support() -> None:
    """Outside tests/support (builders, fakes, runners) a module of tests/ is a test, a package marker or conftest."""
    stray = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("*.py"))
             if p.parts[len(ROOT.parts) + 1] not in ("support", "fixtures")
             and not (p.name.startswith("test_") or p.name in ("__init__.py", "conftest.py"))]
    assert not stray


def test_the_readme_layout_names_every_package_and_only_files_that_exist() -> None:
    """README's layout block cannot fall behind the tree: each package of agent/, scheduler/ and proto/ (and the
    folders of hack/ and tests/) is named there, and every file it names exists."""
    import re

    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## Layout"):readme.index("### How the parts depend on each other")]
    missing = [f"{top}/{d.name}/" for top in ("agent", "scheduler", "proto", "hack", "tests")
               for d in sorted((ROOT / top).iterdir())
               if d.is_dir() and d.name not in ("__pycache__", "scoria") and f"{d.name}/" not in block]
    assert not missing, "README's layout does not name these folders"
    files = {p.name for p in ROOT.rglob("*") if ".git" not in p.parts and ".venv" not in p.parts}
    named = set(re.findall(r"[\w-]+\.(?:py|sh|proto)\b", block))
    assert not named - files, "README's layout names files that do not exist"
