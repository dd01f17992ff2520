"""Built-in plugins; importing this package registers them."""

from . import (  # noqa: F401
    binpack, capacity, colocation, conformance, deviceshare, drf, gang, nodeorder, numaaware, overcommit,
    predicates, priority, proportion, sla, tdm, usage,
)
from . import forecast  # noqa: F401
