"""Embedded mode's local runtime: pods as local processes in real cgroups (see :mod:`.local`)."""

from .evictor import LocalEvictor
from .local import LocalRuntime
from .phase import Backoff

__all__ = ["Backoff", "LocalEvictor", "LocalRuntime"]
