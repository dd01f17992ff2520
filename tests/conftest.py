import logging

import pytest

from scheduler.builtins import register_builtins
from scheduler.framework.keeper import SnapshotKeeper

register_builtins()  # as the entry points do
# Every cycle's incremental snapshot is compared with one taken from scratch: a change the cache's journal
# missed fails the test that made it (SnapshotDiverged), wherever it happens.
SnapshotKeeper.verify = True


@pytest.fixture(autouse=True)
def _quiet_logs(caplog):
    caplog.set_level(logging.WARNING)
