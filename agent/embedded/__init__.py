"""Embedded mode's local runtime: pods as local processes in real cgroups (see :mod:`.runtime`)."""

from agent.embedded.evictor import LocalEvictor
from agent.embedded.runtime import LocalRuntime
from agent.embedded.phase import Backoff

__all__ = ["Backoff", "LocalEvictor", "LocalRuntime"]
