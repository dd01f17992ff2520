"""Scoria's node agent (DaemonSet): topology, load and device reports, and cgroup QoS.

``python -m agent`` runs it (:mod:`agent.cli`); :mod:`agent.loop` holds the loops.
"""

__version__ = "0.1.0"
