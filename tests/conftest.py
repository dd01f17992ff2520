import logging

import pytest

from scheduler.framework.plugin import load_builtin

load_builtin()


@pytest.fixture(autouse=True)
def _quiet_logs(caplog):
    caplog.set_level(logging.WARNING)
