"""Registration by the entry point, and periodic actions marked by the action itself."""

from __future__ import annotations

import sys

import pytest

from scheduler.builtins import BUILTIN_ACTIONS, BUILTIN_PLUGINS, register_builtins
from scheduler.framework import plugin as registry
from scheduler.framework.config import default_config, parse_config
from scheduler.framework.plugin import Action, register_action


@pytest.fixture
def empty_registries():
    saved = dict(registry.ACTIONS), dict(registry.PLUGINS)
    registry.ACTIONS.clear()
    registry.PLUGINS.clear()
    yield
    registry.ACTIONS.clear()
    registry.PLUGINS.clear()
    registry.ACTIONS.update(saved[0])
    registry.PLUGINS.update(saved[1])


def test_a_config_read_before_registration_is_a_programming_error(empty_registries) -> None:
    with pytest.raises(RuntimeError, match="register_builtins"):
        parse_config('actions: "allocate"\ntiers: []\n')


def test_register_builtins_fills_the_registries_and_is_idempotent(empty_registries) -> None:
    register_builtins()
    register_builtins()
    assert set(registry.ACTIONS) == {a.name for a in BUILTIN_ACTIONS}
    assert set(registry.PLUGINS) == {p.name for p in BUILTIN_PLUGINS}
    assert default_config().actions  # the shipped default parses once registered


def test_another_class_under_a_taken_name_is_refused() -> None:
    class Impostor(Action):
        name = "allocate"

    with pytest.raises(ValueError, match="already registered"):
        register_action(Impostor)


def test_importing_the_framework_registers_nothing() -> None:
    """The framework does not import the built-ins: only an entry point does."""
    import subprocess

    code = ("import scheduler.framework.config, scheduler.framework.session, scheduler.cycle as c; "
            "from scheduler.framework import plugin; import sys; "
            "print(len(plugin.ACTIONS), len(plugin.PLUGINS), "
            "any(m.startswith(('scheduler.plugins.', 'scheduler.actions.')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "0", "False"]


def test_periodic_is_a_property_of_the_action() -> None:
    assert [a.name for a in BUILTIN_ACTIONS if a.periodic] == ["shuffle"]
    assert not default_config().has_periodic_action()
    shuffled = parse_config('actions: "allocate, shuffle"\ntiers:\n- plugins:\n  - name: tdm\n')
    assert shuffled.has_periodic_action()


def test_a_new_periodic_action_needs_no_change_to_the_loop() -> None:
    class Tick(Action):
        name = "test-tick"
        periodic = True

        def execute(self, ssn) -> None:
            pass

    register_action(Tick)
    try:
        assert parse_config('actions: "allocate, test-tick"\ntiers:\n- plugins:\n  - name: gang\n').has_periodic_action()
    finally:
        del registry.ACTIONS["test-tick"]
