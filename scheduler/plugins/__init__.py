"""Built-in plugins; importing this package registers them."""

from scheduler.plugins import (
    binpack,
    capacity,
    colocation,
    conformance,
    deviceshare,
    drf,
    forecast,  # noqa: F401
    gang,
    nodeorder,
    numaaware,
    overcommit,
    predicates,
    priority,
    proportion,
    sla,
    tdm,
    usage,
)
