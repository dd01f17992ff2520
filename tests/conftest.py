import logging

import pytest

from scheduler.builtins import register_builtins

register_builtins()  # as the entry points do


@pytest.fixture(autouse=True)
def _quiet_logs(caplog):
    caplog.set_level(logging.WARNING)
