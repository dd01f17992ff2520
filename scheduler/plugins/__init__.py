"""Built-in plugins; importing this package registers them."""

from scheduler.plugins import binpack, capacity, colocation, conformance, deviceshare, drf, gang, nodeorder, numaaware, overcommit, predicates, priority, proportion, sla, tdm, usage
from scheduler.plugins import forecast  # noqa: F401
