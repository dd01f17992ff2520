"""Embedded mode: one machine, no Kubernetes.

The cluster lives in SQLite (``store``); ``mode`` wires the scheduler to it and to the agents'
local runtimes; ``server`` is the control endpoint and ``client`` the kubectl-like CLI that talks
to it (apply, get, describe, logs, delete, top).
"""
