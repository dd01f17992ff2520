"""The architecture's import rules, checked mechanically (DESIGN.md §6.12).

* api/ is plain objects and parsing: it imports no scheduling code;
* framework/ knows no concrete plugin or action (it loads them by registry);
* plugins do not import actions, and actions do not import plugins;
* nothing outside the wire boundary imports generated ``_pb2`` modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved), at any depth."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


RULES = [
    ("scheduler/api", ("scheduler.framework", "scheduler.plugins", "scheduler.actions", "scheduler.cluster.cache")),
    ("scheduler/plugins", ("scheduler.actions",)),
    ("scheduler/actions", ("scheduler.plugins",)),
]


@pytest.mark.parametrize("folder,forbidden", RULES, ids=[r[0] for r in RULES])
def test_layer(folder: str, forbidden: tuple[str, ...]) -> None:
    for path in files(folder):
        bad = sorted(m for m in imports(path) if m.startswith(forbidden))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_framework_does_not_name_plugins_or_actions() -> None:
    for path in files("scheduler/framework"):
        bad = sorted(m for m in imports(path) if m.startswith(("scheduler.plugins.", "scheduler.actions.")))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


WIRE_BOUNDARY = {"proto/codec.py", "scheduler/intake/server.py", "agent/client.py"}


def test_only_the_wire_boundary_imports_pb2() -> None:
    for folder in ("scheduler", "agent", "proto", "hack", "tests"):
        for path in files(folder):
            rel = str(path.relative_to(ROOT))
            if rel in WIRE_BOUNDARY or "_pb2" in path.name or rel.startswith("tests/"):
                continue
            bad = sorted(m for m in imports(path) if "_pb2" in m)
            assert not bad, f"{rel} imports {bad}"


def test_the_boundary_really_is_where_pb2_is_used() -> None:
    for rel in WIRE_BOUNDARY:
        assert any("_pb2" in m for m in imports(ROOT / rel)), rel


def test_the_checker_sees_relative_imports() -> None:
    found = imports(ROOT / "scheduler" / "plugins" / "gang.py")
    assert "scheduler.framework.plugin" in found and "scheduler.api.objects" in found
