"""Scoria's node agent (DaemonSet): topology, load and device reports, and cgroup QoS.

The agent is built in a later issue; this package exists so the layout and
imports are fixed from the start.
"""

__version__ = "0.1.0"
