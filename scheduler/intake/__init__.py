"""Intake: the scheduler's side of the wire.

The gRPC report server the agents stream to (``server``), what it does with each report on a stream
(``reports``), and the checks every report passes before anything in it reaches the cluster state
(``validate``: a node speaks only for itself; a corrupt report is refused whole). Intake sits above
the cluster state: it feeds :mod:`scheduler.cluster`, which imports nothing from here.
"""
