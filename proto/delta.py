"""Delta reports: what an agent leaves out, and the whole report the scheduler puts back together.

A delta report (``NodeReport.delta`` set, see ``ReportDelta`` in ``proto/scoria/v1/agent.proto``) carries
identity, colocation and load's node-wide figures always, and each of four sections — capacity, devices,
the pods (``load.pods`` with ``load.pod_details``), runtime — only when it differs from the base, a report the
scheduler acknowledged on the same stream.

* The agent's side, :func:`delta_for`: which sections of a report are the same as in the base (model
  objects, compared whole; the agent reuses unchanged objects, so most comparisons stop at ``is``).
* The scheduler's side, :func:`merged`: the delta with the base's sections put back, as a
  :class:`ReportView` — an object with the field names of a ``NodeReport`` whose sections are the received
  messages' own (nothing is copied), which the checks, the cache and :mod:`proto.codec` read as they read a
  received message.  A view can be the base of the next delta.

This module imports no generated code: it reads messages only through the field names they share with
:mod:`proto.model`.
"""

from __future__ import annotations

from typing import Any

from proto.model import NodeReport, ReportDelta

#: the sections a delta report may leave out, as ReportDelta names them
SECTIONS = ("same_capacity", "same_devices", "same_pods", "same_runtime")


def delta_for(report: NodeReport, base: NodeReport, base_sequence: int) -> ReportDelta:
    """``report`` as a delta on ``base`` (the report the scheduler acknowledged as ``base_sequence``)."""
    load, base_load = report.load, base.load
    return ReportDelta(
        base_sequence,
        same_capacity=report.capacity is base.capacity or report.capacity == base.capacity,
        same_devices=report.devices is base.devices or report.devices == base.devices,
        same_pods=load.pods is base_load.pods or load.pods == base_load.pods,
        same_runtime=report.runtime is base.runtime or report.runtime == base.runtime)


class LoadView:
    """A delta's ``load``: its own node-wide figures with the base's pods."""

    __slots__ = ("cpu_used_cores", "memory_used_bytes", "cpu_pressure", "memory_pressure", "io_pressure", "pods",
                 "pod_details")

    def __init__(self, load: Any, pods: Any, pod_details: Any):
        self.cpu_used_cores, self.memory_used_bytes = load.cpu_used_cores, load.memory_used_bytes
        self.cpu_pressure, self.memory_pressure, self.io_pressure = (load.cpu_pressure, load.memory_pressure,
                                                                     load.io_pressure)
        self.pods, self.pod_details = pods, pod_details


class ReportView:
    """A merged delta: a received report's sections, some of them its base's, under a NodeReport's field names."""

    __slots__ = ("identity", "capacity", "devices", "load", "colocation", "runtime", "delta")

    def __init__(self, identity: Any, capacity: Any, devices: Any, load: Any, colocation: Any, runtime: Any,
                 delta: Any):
        self.identity, self.capacity, self.devices, self.load = identity, capacity, devices, load
        self.colocation, self.runtime, self.delta = colocation, runtime, delta


def merged(message: Any, base: Any) -> ReportView:
    """The delta ``message`` with the sections it leaves out taken from ``base`` (a received full report or an
    earlier view).  Checks nothing: the caller checks the result as it would a full report."""
    d = message.delta
    load = message.load
    if d.same_pods:
        b = base.load
        load = LoadView(load, b.pods, b.pod_details)
    return ReportView(message.identity,
                      base.capacity if d.same_capacity else message.capacity,
                      base.devices if d.same_devices else message.devices,
                      load, message.colocation,
                      base.runtime if d.same_runtime else message.runtime,
                      d)
