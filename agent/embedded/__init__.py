"""Embedded mode's local runtime: pods as local processes in real cgroups (see :mod:`.runtime`)."""

from agent.embedded.evictor import LocalEvictor
from agent.embedded.phase import Backoff
from agent.embedded.runtime import LocalRuntime

__all__ = ["Backoff", "LocalEvictor", "LocalRuntime"]
