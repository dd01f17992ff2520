"""Intake: the scheduler's side of the wire.

The gRPC report server the agents stream to (``server``) and what it does with each report on a
stream (``reports``): a node speaks only for itself, and a report that fails the checks of
:mod:`scheduler.api.nodereport` is refused whole. Intake sits above the cluster state: it feeds
:mod:`scheduler.cluster`, which imports nothing from here.
"""
