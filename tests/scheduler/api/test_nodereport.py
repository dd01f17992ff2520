"""The checks every node report passes before anything in it is kept (scheduler/api/nodereport.py)."""

from __future__ import annotations

import pytest

from proto.model import ContainerUsage, DeviceProcess, Eviction, Gpu, NumaZone, PodUsage
from scheduler.api.nodereport import check_report
from tests.support.wire import changed_report

NOW = 1_800_000_000.0


def report(**changes):
    return changed_report(NOW, **changes)


BAD = [
    ("empty node name", {"identity__node_name": ""}, "identity.node_name"),
    ("invalid node name", {"identity__node_name": "Node_A"}, "identity.node_name"),
    ("no sample time", {"identity__sample_time_ns": 0}, "identity.sample_time_ns"),
    ("sample from the future", {"identity__sample_time_ns": int((NOW + 3600) * 1e9)}, "in the future"),
    ("sample 31 s ahead", {"identity__sample_time_ns": int((NOW + 31) * 1e9)}, "31s in the future (clock skew over 30s)"),
    ("interval too short", {"identity__report_interval_ms": 1}, "identity.report_interval_ms"),
    ("no CPUs", {"capacity__cpu_millis": 0}, "a node needs CPUs and memory"),
    ("negative memory", {"capacity__memory_bytes": -1}, "a node needs CPUs and memory"),
    ("more zones than CPUs", {"capacity__numa_zones": [NumaZone(i) for i in range(9)]}, "9 zones but only 8 CPUs"),
    ("CPU out of range", {"capacity__numa_zones__0__cpus": [0, 99]}, "CPU 99 is out of range"),
    ("CPU in two zones", {"capacity__numa_zones__1__cpus": [3, 4]}, "in two zones"),
    ("short distances", {"capacity__numa_zones__0__distances": [10]}, "capacity.numa_zones[0].distances"),
    ("NaN usage", {"load__cpu_used_cores": float("nan")}, "load.cpu_used_cores: must be a finite number"),
    ("infinite usage", {"load__cpu_used_cores": float("inf")}, "load.cpu_used_cores"),
    ("negative pod usage", {"load__pods__0__cpu_used_cores": -0.5}, "load.pods[0].cpu_used_cores"),
    ("duplicate pod uid", {"load__pods__1__uid": "pod-uid-1"}, "load.pods[1].uid"),
    ("pressure over 100", {"load__io_pressure__some_avg10": 101.0}, "load.io_pressure.some_avg10"),
    ("GPU memory used over total", {"devices__gpus__0__memory_used_bytes": 81 * 2**30}, "more than the"),
    ("GPU utilisation NaN", {"devices__gpus__0__gpu_utilization_percent": float("nan")}, "gpu_utilization_percent"),
    ("duplicate GPU uuid", {"devices__gpus__1__uuid": "GPU-0b3c"}, "devices.gpus[1]"),
    ("GPU NUMA node unknown", {"devices__gpus__0__numa_node": 5}, "devices.gpus[0].numa_node"),
    ("too many GPUs", {"devices__gpus": [Gpu(i, f"GPU-{i}") for i in range(65)]}, "65 GPUs, more than"),
    ("too many pods", {"load__pods": [PodUsage(f"u{i}") for i in range(2001)]}, "2001 pods"),
    ("negative container cpu", {"load__pods__1__containers__0__cpu_used_cores": -1.0},
     "load.pods[1].containers[0].cpu_used_cores"),
    ("pod pressure over 100", {"load__pods__1__cpu_pressure__some_avg10": 250.0}, "load.pods[1].cpu_pressure.some_avg10"),
    ("too many containers", {"load__pods__1__containers": [ContainerUsage(str(i)) for i in range(65)]},
     "65 containers"),
    ("negative batch cpu", {"colocation__batch_cpu_millis": -5}, "colocation.batch_cpu_millis"),
    ("negative quota", {"colocation__offline_cpu_quota_millis": -1}, "colocation.offline_cpu_quota_millis"),
    ("eviction without pod", {"colocation__evictions": [Eviction("")]}, "colocation.evictions[0].pod_uid"),
    ("unknown topology policy", {"capacity__topology_policy": "strict"}, "capacity.topology_policy"),
    ("GPU link to itself", {"devices__gpus__0__links__0__peer_index": 0}, "devices.gpus[0].links[0].peer_index"),
    ("GPU link to a missing GPU", {"devices__gpus__1__links__0__peer_index": 7}, "devices.gpus[1].links[0]"),
    ("negative NVLink count", {"devices__gpus__0__links__0__nvlinks": -2}, "links[0].nvlinks"),
    ("runtime phase unknown", {"runtime__0__phase": "Sleeping"}, "runtime[0].phase"),
    ("runtime uid repeated", {"runtime__1__uid": "pod-uid-1"}, "runtime[1].uid"),
    ("runtime container state", {"runtime__0__containers__0__state": "zombie"}, "runtime[0].containers[0].state"),
    ("negative process memory", {"devices__npus__0__processes": [DeviceProcess(1, -1)]}, "processes[0].memory_bytes"),
]


@pytest.mark.parametrize("changes,needle", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_reports_are_refused_with_the_field(changes, needle) -> None:
    message = check_report(report(**changes), now_ns=int(NOW * 1e9))
    assert message is not None and needle in message


def test_a_good_report_passes() -> None:
    assert check_report(report(), now_ns=int(NOW * 1e9)) is None
    assert check_report(report(identity__sample_time_ns=int((NOW + 29) * 1e9)), now_ns=int(NOW * 1e9)) is None


BIG = 3 * 2**20
LARGE = [
    ("3 MiB distances", {"capacity__numa_zones__0__distances": [-1] * BIG}, "capacity.numa_zones[0].distances"),
    ("10 MB node name", {"identity__node_name": "N" * 10_000_000}, "identity.node_name"),
    ("3 MiB topology policy", {"capacity__topology_policy": "x" * BIG}, "capacity.topology_policy"),
    ("3 MiB GPU uuid repeated", {"devices__gpus__0__uuid": "g" * BIG, "devices__gpus__1__uuid": "g" * BIG},
     "devices.gpus[1]"),
    ("3 MiB runtime phase", {"runtime__0__phase": "p" * BIG}, "runtime[0].phase"),
    ("3 MiB container state", {"runtime__0__containers__0__state": "s" * BIG}, "runtime[0].containers[0].state"),
    ("3 MiB uid repeated", {"load__pods__0__uid": "u" * BIG, "load__pods__1__uid": "u" * BIG}, "load.pods[1].uid"),
]


@pytest.mark.parametrize("changes,field", [c[1:] for c in BAD + LARGE], ids=[c[0] for c in BAD + LARGE])
def test_a_problem_is_short_names_the_field_and_shortens_the_value(changes, field) -> None:
    """Issue 13 item 8: the refusal goes back to the sender; a large value must not make it large."""
    message = check_report(report(**changes), now_ns=int(NOW * 1e9))
    assert message is not None and len(message) <= 300 and field in message, message[:400]


def test_values_are_shown_shortened() -> None:
    from scheduler.api.nodereport import shown

    assert shown("web") == "'web'" and shown([10, 21]) == "[10, 21]" and shown(2.5) == "2.5"
    assert shown("x" * 100) == repr("x" * 60) + "… (100 characters)"
    assert shown(list(range(BIG))) == f"[0, 1, 2, 3, 4, 5, 6, 7, … ({BIG} items)]"


def test_pod_detail_on_the_wire_must_name_a_listed_pod_once() -> None:
    """Per-container usage travels in load.pod_details, joined to load.pods by uid."""
    from proto import codec
    msg = codec.report_to_pb(report())
    assert [d.uid for d in msg.load.pod_details] == ["pod-uid-3"]  # only pods with detail have an entry
    assert check_report(msg, now_ns=int(NOW * 1e9)) is None
    assert codec.report_from_pb(msg).load.pods[1].containers[1].name == "ba9876543210"
    msg.load.pod_details[0].uid = "pod-uid-404"
    assert "load.pod_details[0].uid: names no pod" in check_report(msg, now_ns=int(NOW * 1e9))
    msg.load.pod_details[0].uid = "pod-uid-3"
    msg.load.pod_details.add(uid="pod-uid-3")
    assert "more than one entry" in check_report(msg, now_ns=int(NOW * 1e9))
    del msg.load.pod_details[1]
    msg.load.pod_details[0].containers[0].memory_used_bytes = -4
    assert "load.pod_details[0].containers[0].memory_used_bytes" in check_report(msg, now_ns=int(NOW * 1e9))
