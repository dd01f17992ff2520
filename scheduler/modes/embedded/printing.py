"""What the embedded CLI prints, in kubectl's shapes: tables (and their ``-o wide`` form), objects as the API
server would hand them out (``-o json|yaml``), ``-o name``, and ``describe``'s text with its Events section.

Pure functions of the control API's answers (:mod:`.server`) and the time; :mod:`.client` fetches and prints.
An item is ``{"kind", "key", "manifest", "status"}`` (a node: the row ``/top/nodes`` gives).
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

from proto.vocab.quantity import format_quantity
from scheduler.controllers.host import rfc3339

# plural -> (kubectl's resource name, API group): ``-o name`` prints resource[.group]/name
RESOURCES = {"pods": ("pod", ""), "podgroups": ("podgroup", "scheduling.volcano.sh"),
             "queues": ("queue", "scheduling.volcano.sh"), "nodes": ("node", ""),
             "priorityclasses": ("priorityclass", "scheduling.k8s.io"), "events": ("event", ""),
             "namespaces": ("namespace", "")}
API_VERSIONS = {"nodes": "v1", "events": "v1"}
QOS_ANNOTATION = "volcano.sh/qos-level"
POD_REASONS = ("Evicted", "NodeLost", "NodeNotReady", "Preempted")  # kubectl shows the container's; these say more
_CAUSE = re.compile(r"([A-Z][A-Za-z]+): (.*)", re.DOTALL)  # "Evicted: node memory at 93%" -> reason, message


# -- time ----------------------------------------------------------------------------------------------
def human_duration(seconds: float) -> str:
    """A duration as kubectl prints ages: ``45s``, ``3m12s``, ``25m``, ``5h3m``, ``30h``, ``3d4h``, ``40d``, ``2y``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def parse_time(stamp: object) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def age(stamp: object, now: float) -> str:
    when = parse_time(stamp)
    return "<unknown>" if when is None else human_duration(now - when)


def long_time(stamp: object) -> str:
    """``describe``'s form: ``Mon, 02 Jan 2026 15:04:05 +0000`` in local time."""
    when = parse_time(stamp)
    return "<unknown>" if when is None else datetime.fromtimestamp(when).astimezone().strftime("%a, %d %b %Y %H:%M:%S %z")


# -- objects as the API server hands them out ----------------------------------------------------------
def object_name(plural: str, item: dict) -> str:
    resource, group = RESOURCES[plural]
    name = item["key"].rpartition("/")[2] if "key" in item else (item.get("metadata") or {}).get("name", "")
    return f"{resource}{'.' + group if group else ''}/{name}"


def as_object(plural: str, item: dict) -> dict:
    """The item as kubectl would print it with ``-o json|yaml``: the manifest, with its status in Kubernetes' form."""
    if plural == "events":
        return item
    if plural == "nodes":
        return _node_object(item)
    doc = copy.deepcopy(item["manifest"])
    status = item["status"]
    if plural == "pods":
        return _pod_object(doc, status)
    if plural == "podgroups":
        doc["status"] = {"phase": status.get("phase") or "Pending",
                         **{k: status[k] for k in ("running", "succeeded", "failed") if status.get(k)},
                         **({"conditions": status["conditions"]} if status.get("conditions") else {})}
    elif plural == "queues":
        doc["status"] = {"state": status.get("state") or "Open", "allocated": _quantities(status.get("allocated") or {})}
    return doc


def _quantities(amounts: dict) -> dict:
    return {k: format_quantity(k, v) for k, v in sorted(amounts.items())}


def _pod_object(doc: dict, status: dict) -> dict:
    meta, spec = doc.setdefault("metadata", {}), doc.setdefault("spec", {})
    annotations = {**(meta.get("annotations") or {}), **(status.get("annotations") or {})}
    if annotations:
        meta["annotations"] = annotations
    if status.get("deleting") or status.get("evicting"):
        meta["deletionTimestamp"] = status.get("deleting") or status.get("evicting")
    if status.get("nodeName"):
        spec["nodeName"] = status["nodeName"]
    phase = status.get("phase") or "Pending"
    out: dict[str, Any] = {"phase": phase}
    text = status.get("reason") or ""
    if not status.get("nodeName") and phase == "Pending":
        out["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              **({"message": text} if text else {})}]
    else:
        if status.get("nodeName") or phase != "Pending":
            out["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        if text:
            cause = _CAUSE.fullmatch(text)
            out.update(reason=cause.group(1), message=cause.group(2)) if cause else out.update(message=text)
    images = {c.get("name"): c.get("image") for c in spec.get("containers") or [] if isinstance(c, dict)}
    statuses = [_container_status(c, images.get(c.get("name"))) for c in (status.get("runtime") or {}).get(
        "containers") or []]
    if statuses:
        out["containerStatuses"] = statuses
    if status.get("podIP") and status.get("nodeName") and phase not in ("Succeeded", "Failed"):
        out["podIP"] = status["podIP"]  # the pod's own address (its network namespace's), given at bind
        out["podIPs"] = [{"ip": status["podIP"]}]
    doc["status"] = out
    return doc


def _container_status(c: dict, image: object) -> dict:
    state, reason, message = c.get("state"), c.get("reason") or "", c.get("message") or ""
    if state == "running":
        now: dict = {"running": {k: v for k, v in (("startedAt", c.get("startedAt")),) if v}}
    elif state == "terminated":
        now = {"terminated": _termination(c)}
    else:
        now = {"waiting": {"reason": "CrashLoopBackOff" if reason == "BackOff" else reason or "ContainerCreating",
                           **({"message": message} if message else {})}}
    last = c.get("lastState")
    return {"name": c.get("name"), **({"image": image} if image else {}), "ready": state == "running",
            "started": state == "running", "restartCount": c.get("restarts", 0), "state": now,
            "lastState": {"terminated": _termination(last)} if last else {}}


def _termination(c: dict) -> dict:
    return {"exitCode": c.get("exitCode", 0), **{k: c[k] for k in ("reason", "message", "startedAt", "finishedAt")
                                                  if c.get(k)}}


def _node_object(row: dict) -> dict:
    cond = {"type": "Ready", "status": {"Ready": "True", "NotReady": "False"}.get(row.get("status") or "", "Unknown"),
            "reason": row.get("reason") or "", "message": row.get("message") or ""}
    if row.get("since"):
        cond["lastTransitionTime"] = rfc3339(datetime.fromtimestamp(row["since"], UTC))
    alloc = {k: format_quantity(k, v) for k, v in sorted((row.get("allocatable") or {}).items())}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": row["key"], **({"labels": row["labels"]} if row.get("labels") else {})},
            "spec": {"taints": row["taints"]} if row.get("taints") else {},
            "status": {"allocatable": alloc, "capacity": alloc, "conditions": [cond]}}


# -- tables ------------------------------------------------------------------------------------------------
def pod_status(item: dict) -> str:
    """kubectl's STATUS column: the phase, or what explains it better (a container waiting in CrashLoopBackOff,
    one that ended with Error, Evicted, Terminating)."""
    obj = _pod_object(copy.deepcopy(item["manifest"]), item["status"])
    status = obj["status"]
    reason = status.get("reason") or status["phase"]
    running = False
    for c in reversed(status.get("containerStatuses") or []):
        state = c["state"]
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            t = state["terminated"]
            reason = t.get("reason") or f"ExitCode:{t.get('exitCode', 0)}"
        elif "running" in state:
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if status.get("reason") in POD_REASONS:  # what happened to the pod says more than its container's exit
        reason = status["reason"]
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason


def _restarts(item: dict, now: float) -> str:
    containers = (item["status"].get("runtime") or {}).get("containers") or []
    total = sum(int(c.get("restarts") or 0) for c in containers)
    last = max((parse_time((c.get("lastState") or {}).get("finishedAt")) or 0 for c in containers), default=0)
    return f"{total} ({human_duration(now - last)} ago)" if total and last else str(total)


def _ready(item: dict) -> str:
    spec = item["manifest"].get("spec") or {}
    containers = (item["status"].get("runtime") or {}).get("containers") or []
    return f"{sum(1 for c in containers if c.get('state') == 'running')}/{len(spec.get('containers') or [])}"


def table(plural: str, items: list[dict], *, wide: bool = False, namespaces: bool = False,
          now: float) -> list[tuple]:
    """The rows (header first) ``get`` prints: kubectl's columns, the namespace first with ``-A``."""
    rows = {"pods": _pods, "podgroups": _groups, "queues": _queues, "nodes": _nodes,
            "priorityclasses": _classes, "events": _events, "namespaces": _namespaces}[plural](items, wide, now)
    if namespaces and plural in ("pods", "podgroups", "events"):
        spaces = ["NAMESPACE"] + [_namespace(plural, i) for i in items]
        rows = [(ns, *row) for ns, row in zip(spaces, rows, strict=True)]
    return rows


def _namespace(plural: str, item: dict) -> str:
    if plural == "events":
        return (item.get("metadata") or {}).get("namespace") or "default"
    return item["key"].partition("/")[0]


def _pods(items: list[dict], wide: bool, now: float) -> list[tuple]:
    header = ("NAME", "READY", "STATUS", "RESTARTS", "AGE") + (("NODE", "QOS", "REASON") if wide else ())
    rows: list[tuple] = [header]
    for i in items:
        s, meta = i["status"], i["manifest"].get("metadata") or {}
        row: tuple = (i["key"].partition("/")[2], _ready(i), pod_status(i), _restarts(i, now),
                      age(meta.get("creationTimestamp"), now))
        if wide:  # the reason whole, however long (the default table has none: describe says it)
            row += (s.get("nodeName") or "<none>", (meta.get("annotations") or {}).get(QOS_ANNOTATION) or "<none>",
                    s.get("reason") or "<none>")
        rows.append(row)
    return rows


def _groups(items: list[dict], wide: bool, now: float) -> list[tuple]:
    rows: list[tuple] = [("NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE") + (("QUEUE",) if wide else ())]
    for i in items:
        spec, meta = i["manifest"].get("spec") or {}, i["manifest"].get("metadata") or {}
        rows.append((i["key"].partition("/")[2], i["status"].get("phase") or "Pending", spec.get("minMember", 1),
                     i["status"].get("running") or "<none>", age(meta.get("creationTimestamp"), now))
                    + ((spec.get("queue") or "default",) if wide else ()))
    return rows


def resources(amounts: dict | None) -> str:
    return ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted((amounts or {}).items())) or "<none>"


def _queues(items: list[dict], wide: bool, now: float) -> list[tuple]:
    rows: list[tuple] = [("NAME", "WEIGHT", "PARENT", "DESERVED", "ALLOCATED") + (("CAPABILITY", "GUARANTEE") if wide
                                                                                else ())]
    for i in items:
        spec, status = i["manifest"].get("spec") or {}, i["status"]
        row: tuple = (i["key"], spec.get("weight", 1), spec.get("parent") or "<none>",
                      resources(status.get("deserved")), resources(status.get("allocated")))
        if wide:
            row += (_spec_resources(spec.get("capability")), _spec_resources((spec.get("guarantee") or {}).get(
                "resource")))
        rows.append(row)
    return rows


def _spec_resources(amounts: object) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(amounts.items())) if isinstance(amounts, dict) and amounts else \
        "<none>"


def _nodes(items: list[dict], wide: bool, now: float) -> list[tuple]:
    rows: list[tuple] = [("NAME", "STATUS", "CPU", "MEMORY", "PODS") + (("TAINTS", "MESSAGE") if wide else ())]
    for n in items:
        alloc = n.get("allocatable") or {}
        row: tuple = (n["key"], n.get("status") or ("Ready" if n.get("ready") else "NotReady"),
                      f"{alloc.get('cpu', 0) / 1000:g}", format_quantity("memory", alloc.get("memory", 0)),
                      n.get("pods", 0))
        if wide:
            row += (",".join(taint(t) for t in n.get("taints") or []) or "<none>", n.get("message") or "<none>")
        rows.append(row)
    return rows


def taint(t: dict) -> str:
    return f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"


def _classes(items: list[dict], wide: bool, now: float) -> list[tuple]:
    rows: list[tuple] = [("NAME", "VALUE", "GLOBAL-DEFAULT", "PREEMPTIONPOLICY")]
    for i in items:
        m = i["manifest"]
        rows.append((i["key"], m.get("value"), str(bool(m.get("globalDefault"))).lower(),
                     m.get("preemptionPolicy") or "PreemptLowerPriority"))
    return rows


def _namespaces(items: list[dict], wide: bool, now: float) -> list[tuple]:
    rows: list[tuple] = [("NAME", "STATUS", "AGE") + (("LABELS",) if wide else ())]
    for i in items:
        meta = i["manifest"].get("metadata") or {}
        labels = ",".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items())) or "<none>"
        rows.append((i["key"], "Active", age(meta.get("creationTimestamp"), now)) + ((labels,) if wide else ()))
    return rows


def _events(items: list[dict], wide: bool, now: float) -> list[tuple]:
    if wide:
        header: tuple = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME")
    else:
        header = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
    rows: list[tuple] = [header]
    for e in items:
        obj = e.get("involvedObject") or {}
        what = f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}"
        row: tuple = (age(e.get("lastTimestamp"), now), e.get("type"), e.get("reason"), what)
        if wide:
            source = e.get("source") or {}
            row += (", ".join(v for v in (source.get("component"), source.get("host")) if v), e.get("message"),
                    age(e.get("firstTimestamp"), now), e.get("count", 1), (e.get("metadata") or {}).get("name"))
        else:
            row += (e.get("message"),)
        rows.append(row)
    return rows


# -- describe ------------------------------------------------------------------------------------------
def events_section(events: list[dict], now: float) -> list[str]:
    """``Events:`` as describe ends: each with its age, ``(xN over AGE)`` when it repeated."""
    if not events:
        return ["Events:  <none>"]
    rows: list[tuple] = [("Type", "Reason", "Age", "From", "Message"), ("----", "------", "----", "----", "-------")]
    for e in events:
        seen = age(e.get("lastTimestamp"), now)
        if int(e.get("count") or 1) > 1:
            seen += f" (x{e['count']} over {age(e.get('firstTimestamp'), now)})"
        source = e.get("source") or {}
        rows.append((e.get("type"), e.get("reason"), seen, source.get("component") or "", e.get("message")))
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    return ["Events:"] + ["  " + "  ".join(str(c).ljust(w) for c, w in zip(r[:4], widths, strict=True)) +
                          f"  {r[4]}" for r in rows]


def _kv(pairs: list[tuple[str, object]], indent: int = 0, width: int | None = None) -> list[str]:
    width = width or max((len(k) for k, _ in pairs), default=0) + 2
    return [" " * indent + f"{k + ':':<{width}}{v}".rstrip() for k, v in pairs]


def _mapping(title: str, values: dict | None, indent: int = 0, sep: str = "=") -> list[str]:
    """``Labels:  a=b`` with further ones aligned below, ``<none>`` when empty."""
    items = [f"{k}{sep}{v}" for k, v in sorted((values or {}).items())]
    head = " " * indent + f"{title + ':':<18}"
    if not items:
        return [head + "<none>"]
    return [head + items[0]] + [" " * (indent + 18) + i for i in items[1:]]


def describe(plural: str, item: dict, events: list[dict], now: float, *, pods: list[dict] | None = None) -> str:
    lines = {"pods": _describe_pod, "podgroups": _describe_group, "queues": _describe_queue,
             "nodes": _describe_node, "priorityclasses": _describe_class,
             "namespaces": _describe_namespace}[plural](item, now, pods or [])
    return "\n".join(lines + events_section(events, now))


def _describe_pod(item: dict, now: float, _: list[dict]) -> list[str]:
    obj = _pod_object(copy.deepcopy(item["manifest"]), item["status"])
    meta, spec, status = obj["metadata"], obj["spec"], obj["status"]
    runtime = item["status"].get("runtime") or {}
    lines = [f"{'Name:':<18}{meta.get('name')}", f"{'Namespace:':<18}{meta.get('namespace', 'default')}",
             f"{'Priority Class:':<18}{spec.get('priorityClassName') or '<none>'}",
             f"{'Node:':<18}{spec.get('nodeName') or '<none>'}",
             f"{'Start Time:':<18}{long_time(meta.get('creationTimestamp'))}"]
    lines += _mapping("Labels", meta.get("labels"))
    lines += _mapping("Annotations", meta.get("annotations"), sep=": ")
    lines.append(f"{'Status:':<18}{pod_status(item) if meta.get('deletionTimestamp') else status['phase']}")
    if status.get("reason"):
        lines.append(f"{'Reason:':<18}{status['reason']}")
    if status.get("message"):
        lines.append(f"{'Message:':<18}{status['message']}")
    lines.append(f"{'QoS Level:':<18}{(meta.get('annotations') or {}).get(QOS_ANNOTATION) or '<none>'}")
    lines.append("Containers:")
    states = {c.get("name"): c for c in status.get("containerStatuses") or []}
    for c in spec.get("containers") or []:
        lines += _describe_container(c, states.get(c.get("name")), runtime.get("logDir"))
    lines.append("Conditions:")
    lines += [f"  {'Type':<14}Status"] + [f"  {c['type']:<14}{c['status']}" for c in status.get("conditions") or []]
    if not spec.get("nodeName") and status.get("phase") == "Pending":
        lines.append(f"{'Waiting:':<18}{item['status'].get('reason') or 'not tried yet'}")
    lines += _mapping("Node-Selectors", spec.get("nodeSelector"))
    tolerations = [f"{t.get('key', '')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect', '')}"
                   f"{' for ' + str(t['tolerationSeconds']) + 's' if t.get('tolerationSeconds') is not None else ''}"
                   for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    lines.append(f"{'Tolerations:':<18}{tolerations[0] if tolerations else '<none>'}")
    lines += [" " * 18 + t for t in tolerations[1:]]
    return lines


def _describe_container(c: dict, state: dict | None, log_dir: str | None) -> list[str]:
    lines = [f"  {c.get('name')}:"]
    command = [str(x) for x in (c.get("command") or [])]
    args = [str(x) for x in (c.get("args") or [])]
    for title, values in (("Command", command), ("Args", args)):
        if values:
            lines.append(f"    {title}:")
            lines += [f"      {v}" for v in values]
    if state is None:
        lines.append(f"    {'State:':<16}Waiting")
        lines.append(f"      {'Reason:':<14}ContainerCreating")
    else:
        lines += _state("State", state["state"])
        if state.get("lastState"):
            lines += _state("Last State", state["lastState"])
        lines.append(f"    {'Ready:':<16}{str(state.get('ready', False)).title()}")
        lines.append(f"    {'Restart Count:':<16}{state.get('restartCount', 0)}")
    for title in ("limits", "requests"):
        amounts = (c.get("resources") or {}).get(title) or {}
        if amounts:
            lines.append(f"    {title.title()}:")
            lines += _kv([(k, v) for k, v in sorted(amounts.items())], indent=6)
    env = [e for e in c.get("env") or [] if isinstance(e, dict)]
    lines.append(f"    {'Environment:':<16}{'<none>' if not env else ''}".rstrip())
    for e in env:
        source = next(iter(e.get("valueFrom") or {"?": 0}))
        lines.append(f"      {e.get('name')}:  {e.get('value', f'(from {source})')}")
    if log_dir:
        lines.append(f"    {'Log:':<16}{log_dir}/{c.get('name')}.log")
    return lines


def _state(title: str, state: dict) -> list[str]:
    name, detail = next(iter(state.items())) if state else ("waiting", {})
    lines = [f"    {title + ':':<16}{name.title()}"]
    pairs: list[tuple[str, object]] = []
    if name == "waiting":
        pairs.append(("Reason", detail.get("reason") or "ContainerCreating"))
        if detail.get("message"):
            pairs.append(("Message", detail["message"]))
    elif name == "running":
        pairs.append(("Started", long_time(detail.get("startedAt"))))
    else:
        pairs += [(k, v) for k, v in (("Reason", detail.get("reason")), ("Message", detail.get("message")),
                                      ("Exit Code", detail.get("exitCode", 0))) if v not in (None, "")]
        pairs += [("Started", long_time(detail.get("startedAt"))), ("Finished", long_time(detail.get("finishedAt")))]
    return lines + _kv(pairs, indent=6, width=14)  # values in the column of State's, as kubectl aligns them


def _describe_group(item: dict, now: float, pods: list[dict]) -> list[str]:
    m, s = item["manifest"], item["status"]
    meta, spec = m.get("metadata") or {}, m.get("spec") or {}
    lines = [f"{'Name:':<18}{meta.get('name')}", f"{'Namespace:':<18}{meta.get('namespace', 'default')}"]
    lines += _mapping("Labels", meta.get("labels"))
    lines += _mapping("Annotations", meta.get("annotations"), sep=": ")
    lines += ["Spec:"] + _kv([("Min Member", spec.get("minMember", 1)),
                              ("Min Resources", _spec_resources(spec.get("minResources"))),
                              ("Queue", spec.get("queue") or "default"),
                              ("Priority Class Name", spec.get("priorityClassName") or "<none>")], indent=2)
    lines += ["Status:"] + _kv([("Phase", s.get("phase") or "Pending"), ("Running", s.get("running", 0)),
                                ("Succeeded", s.get("succeeded", 0)), ("Failed", s.get("failed", 0))], indent=2)
    conditions = s.get("conditions") or []
    lines.append("  Conditions:" + ("  <none>" if not conditions else ""))
    for c in conditions:
        lines += [f"    {c.get('type')}: {c.get('status')}"] + _kv(
            [(k, v) for k, v in (("Reason", c.get("reason")), ("Message", c.get("message"))) if v], indent=6)
    lines.append(f"Pods:  ({len(pods)} in total)" if pods else "Pods:  <none>")
    lines += [f"  {p['key']}  {pod_status(p)}" for p in pods]
    return lines


def _describe_queue(item: dict, now: float, _: list[dict]) -> list[str]:
    m, s = item["manifest"], item["status"]
    spec = m.get("spec") or {}
    lines = [f"{'Name:':<18}{item['key']}"]
    lines += _mapping("Labels", (m.get("metadata") or {}).get("labels"))
    lines += ["Spec:"] + _kv([("Weight", spec.get("weight", 1)), ("Parent", spec.get("parent") or "<none>"),
                              ("Reclaimable", str(spec.get("reclaimable", True)).lower()),
                              ("Capability", _spec_resources(spec.get("capability"))),
                              ("Guarantee", _spec_resources((spec.get("guarantee") or {}).get("resource"))),
                              ("Deserved", _spec_resources(spec.get("deserved")))], indent=2)
    lines += ["Status:"] + _kv([("State", "Open"), ("Allocated", resources(s.get("allocated"))),
                                ("Deserved now", resources(s.get("deserved")) if s.get("deserved") is not None
                                 else "<none> (no proportion or capacity plugin)")], indent=2)
    if item.get("implicit"):
        lines.append("Note:             made by the scheduler (as Volcano makes it): always there, never deleted")
    return lines


def _describe_node(row: dict, now: float, pods: list[dict]) -> list[str]:
    alloc = row.get("allocatable") or {}
    lines = [f"{'Name:':<18}{row['key']}"]
    lines += _mapping("Labels", row.get("labels"))
    taints = [taint(t) for t in row.get("taints") or []]
    lines.append(f"{'Taints:':<18}{taints[0] if taints else '<none>'}")
    lines += [" " * 18 + t for t in taints[1:]]
    since = rfc3339(datetime.fromtimestamp(row["since"], UTC)) if row.get("since") else None
    cond = {"Ready": "True", "NotReady": "False"}.get(row.get("status") or "", "Unknown")
    lines += ["Conditions:", f"  {'Type':<7}{'Status':<9}{'LastTransitionTime':<33}{'Reason':<24}Message",
              f"  {'Ready':<7}{cond:<9}{long_time(since):<33}{row.get('reason') or '':<24}{row.get('message') or ''}"]
    lines += ["Allocatable:"] + _kv([(k, format_quantity(k, v)) for k, v in sorted(alloc.items())], indent=2)
    if "cpuUsedCores" in row:
        quota = row.get("offlineQuotaMillis")
        lines += ["Usage (its agent's last report):"] + _kv([
            ("cpu in use", f"{row.get('cpuUsedCores', 0):.2f} cores"),
            ("memory in use", format_quantity("memory", int(row.get("memoryUsedBytes", 0)) // 2**20 * 2**20)),
            ("batch cpu", f"{row.get('batchCpuMillis', 0)}m"),
            ("batch memory", format_quantity("memory", int(row.get("batchMemoryBytes", 0)) // 2**20 * 2**20)),
            ("offline quota", "unlimited" if quota is None else f"{quota}m"),
            ("report age", f"{row.get('reportAge', 0)}s")], indent=2)
    active = [p for p in pods if (p["status"].get("phase") or "Pending") not in ("Succeeded", "Failed")]
    lines.append(f"Non-terminated Pods:  ({len(active)} in total)")
    if active:
        rows: list[tuple] = [("Namespace", "Name", "CPU Requests", "Memory Requests", "Age")]
        for p in active:
            requests: dict[str, str] = {}
            for c in (p["manifest"].get("spec") or {}).get("containers") or []:
                requests.update(((c.get("resources") or {}).get("requests")) or {})
            ns, _, name = p["key"].partition("/")
            rows.append((ns, name, requests.get("cpu", "0"), requests.get("memory", "0"),
                         age(((p["manifest"].get("metadata") or {}).get("creationTimestamp")), now)))
        widths = [max(len(str(r[i])) for r in rows) for i in range(5)]
        lines += ["  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def _describe_class(item: dict, now: float, _: list[dict]) -> list[str]:
    m = item["manifest"]
    return _kv([("Name", item["key"]), ("Value", m.get("value")), ("GlobalDefault", str(bool(m.get("globalDefault"))).lower()),
                ("PreemptionPolicy", m.get("preemptionPolicy") or "PreemptLowerPriority"),
                ("Description", m.get("description") or "")])


def _describe_namespace(item: dict, now: float, _: list[dict]) -> list[str]:
    meta = item["manifest"].get("metadata") or {}
    return ([f"{'Name:':<18}{item['key']}"] + _mapping("Labels", meta.get("labels")) +
            _mapping("Annotations", meta.get("annotations"), sep=": ") + [f"{'Status:':<18}Active"])
