"""Embedded mode's local runtime: pods as local processes in real cgroups (see :mod:`.local`)."""

from agent.runtime.evictor import LocalEvictor
from agent.runtime.local import LocalRuntime
from agent.runtime.phase import Backoff

__all__ = ["Backoff", "LocalEvictor", "LocalRuntime"]
