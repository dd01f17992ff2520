"""Run modes: where the scheduler's decisions go and where its objects come from.

``simulator`` (files in, a printed end state out), ``embedded`` (one machine: the cluster in SQLite,
pods run by the agents' local runtime) and ``kubernetes`` (an API server, watched and written).
A mode sits above the framework and the cluster state; the framework knows no mode.
"""
