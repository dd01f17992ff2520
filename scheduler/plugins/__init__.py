"""Built-in plugins; importing this package registers them."""

from . import (  # noqa: F401
    binpack, capacity, conformance, drf, gang, nodeorder, overcommit, predicates, priority, proportion, sla, tdm,
)
