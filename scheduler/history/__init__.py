"""Online load learned by time of week: how long a node's room for offline work will last.

One module per job:

* :mod:`scheduler.history.learning` — :class:`~scheduler.history.learning.LoadHistory`: sampling
  each node's online load, closing hours into an hour-of-week ring of the last K weeks, and
  forecasting from it (:class:`~scheduler.history.learning.Forecast`);
* :mod:`scheduler.history.store` — the :class:`~scheduler.history.store.HistoryStore` interface
  through which learned weeks (:class:`~scheduler.history.store.WeekRecord`) survive restarts;
* :mod:`scheduler.history.sqlitestore` — the store in one SQLite file (``serve --state-dir``);
  Kubernetes mode without a state directory keeps the weeks on the Nodes themselves
  (:mod:`scheduler.modes.kubernetes.history_store`);
* :mod:`scheduler.history.saver` — the thread that closes finished hours and saves changed weeks.

:class:`scheduler.api.loadhistory.NodeLoadHistory` is the ``scoria.io/v1`` document the simulator
reads past load from; it is learned through the same :class:`LoadHistory`.
"""

# The public names, for callers written against the former module scheduler/history.py; new code imports
# from the module that defines the name.
from scheduler.history.learning import HOURS_PER_WEEK, Forecast, LoadHistory, span_hours, unix_hour, week_of
from scheduler.history.saver import HistorySaver
from scheduler.history.sqlitestore import SqliteHistoryStore
from scheduler.history.store import HistoryStore, HistoryStoreError, WeekRecord

__all__ = [
    "HOURS_PER_WEEK", "Forecast", "HistorySaver", "HistoryStore", "HistoryStoreError", "LoadHistory",
    "SqliteHistoryStore", "WeekRecord", "span_hours", "unix_hour", "week_of",
]
