import logging

import pytest

from scheduler.builtins import register_builtins
from scheduler.framework.keeper import SnapshotKeeper
from tests.support.wire import stale_grpc_poller

register_builtins()  # as the entry points do
# Every cycle's incremental snapshot is compared with one taken from scratch: a change the cache's journal
# missed fails the test that made it (SnapshotDiverged), wherever it happens.
SnapshotKeeper.verify = True
# grpc.aio's poller may wake the event loop of an earlier test after that test closed it; asyncio then logs an
# error about a loop no test is looking at, which would count against whichever test runs then
logging.getLogger("asyncio").addFilter(lambda record: not stale_grpc_poller(record))


@pytest.fixture(autouse=True)
def _quiet_logs(caplog):
    caplog.set_level(logging.WARNING)


ARTIFACTS_KEY = pytest.StashKey[list]()


@pytest.fixture
def artifact(request):
    """``artifact(path)``: note a file a test kept for people to look at (a screenshot); the run's summary lists
    each one, pass or fail."""
    kept = request.config.stash.setdefault(ARTIFACTS_KEY, [])
    return lambda path: kept.append(f"{request.node.nodeid}: {path}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    kept = config.stash.get(ARTIFACTS_KEY, [])
    if kept:
        terminalreporter.section("artifacts kept")
        for line in kept:
            terminalreporter.write_line(line)
