"""Intake: the scheduler's side of the wire.

The gRPC report server the agents stream to, and the checks every report passes before anything
in it reaches the cluster state (a node speaks only for itself; a corrupt report is refused whole).
"""
