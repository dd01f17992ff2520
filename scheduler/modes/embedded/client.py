"""``python -m scheduler apply|get|describe|logs|delete|top``: kubectl-like commands against the embedded scheduler.

They talk to ``serve --embedded``'s control endpoint (:mod:`scheduler.modes.embedded.server`,
``--server``, default ``$SCORIA_SERVER`` or ``http://127.0.0.1:50052``).  A
refused manifest exits with status 2 and the server's one-line reason; nothing
of that file is stored.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from proto.errors import InputError
from proto.vocab.quantity import format_quantity
from scheduler.api.loader import expand_paths
from scheduler.modes.table import text_table

DEFAULT_SERVER = "http://127.0.0.1:50052"
KINDS = {"pod": "pods", "pods": "pods", "po": "pods", "podgroup": "podgroups", "podgroups": "podgroups",
         "pg": "podgroups", "queue": "queues", "queues": "queues", "q": "queues", "node": "nodes", "nodes": "nodes",
         "no": "nodes", "priorityclass": "priorityclasses", "priorityclasses": "priorityclasses", "pc": "priorityclasses"}
NAMESPACED = {"pods", "podgroups"}


class CtlError(Exception):
    """Something to tell the user, and the exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def server(p: argparse.ArgumentParser) -> None:
        p.add_argument("--server", default=os.environ.get("SCORIA_SERVER", DEFAULT_SERVER),
                       help="the embedded scheduler's control endpoint (default $SCORIA_SERVER or %(default)s)")

    p = sub.add_parser("apply", help="create or update objects from files (embedded mode)")
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE",
                   help="YAML/JSON file or folder (repeatable)")
    server(p)
    p = sub.add_parser("get", help="list pods, podgroups, queues, nodes or priorityclasses (embedded mode)")
    p.add_argument("kind")
    p.add_argument("name", nargs="?")
    p.add_argument("-n", "--namespace", default=None)
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    server(p)
    p = sub.add_parser("describe", help="one object in detail, with why it waits (embedded mode)")
    p.add_argument("kind")
    p.add_argument("name")
    p.add_argument("-n", "--namespace", default="default")
    server(p)
    p = sub.add_parser("logs", help="a pod's container logs (embedded mode, this machine)")
    p.add_argument("name")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-c", "--container")
    p.add_argument("--tail", type=int, default=None, metavar="N")
    server(p)
    p = sub.add_parser("delete", help="delete an object; a running pod is stopped first (embedded mode)")
    p.add_argument("kind")
    p.add_argument("name")
    p.add_argument("-n", "--namespace", default="default")
    server(p)
    p = sub.add_parser("top", help="nodes' real usage, batch allocatable and offline quota (embedded mode)")
    p.add_argument("kind", choices=("nodes", "node", "no"))
    server(p)


def run(args: argparse.Namespace) -> int:
    try:
        return {"apply": apply, "get": get, "describe": describe, "logs": logs, "delete": delete,
                "top": top}[args.command](args)
    except CtlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status


# -- talking to the server ---------------------------------------------------------------------------
def request(server: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> Any:
    req = urllib.request.Request(server.rstrip("/") + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error") or exc.reason
        except ValueError:
            message = exc.reason
        raise CtlError(message, 2 if exc.code == 400 else 1) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        raise CtlError(f"cannot reach the scheduler at {server} ({getattr(exc, 'reason', exc)}); is "
                       "`python -m scheduler serve --embedded` running?") from None


def _kind(text: str) -> str:
    plural = KINDS.get(text.lower())
    if plural is None:
        raise CtlError(f"unknown kind {text!r}; one of pods, podgroups, queues, nodes, priorityclasses", 2)
    return plural


def _path(plural: str, name: str, namespace: str | None) -> str:
    return f"/objects/{plural}/{(namespace or 'default') if plural in NAMESPACED else '-'}/{name}"


# -- commands ---------------------------------------------------------------------------------------
def apply(args: argparse.Namespace) -> int:
    try:
        files = expand_paths(args.filename)
    except InputError as exc:
        raise CtlError(str(exc), 2) from None
    for path in files:
        answer = request(args.server, "POST", "/apply", Path(path).read_bytes(),
                         {"X-Source": str(path), "Content-Type": "application/yaml"})
        for name in answer["applied"]:
            print(f"{name} applied")
    return 0


def get(args: argparse.Namespace) -> int:
    plural = _kind(args.kind)
    if args.name:
        items = [request(args.server, "GET", _path(plural, args.name, args.namespace))]
    else:
        items = request(args.server, "GET", f"/objects/{plural}")
        if args.namespace and plural in NAMESPACED:
            items = [i for i in items if i["key"].startswith(f"{args.namespace}/")]
    if args.output == "json":
        json.dump(items, sys.stdout, indent=2)
        print()
    else:
        print(text_table(TABLES[plural](items)))
    return 0


def describe(args: argparse.Namespace) -> int:
    plural = _kind(args.kind)
    item = request(args.server, "GET", _path(plural, args.name, args.namespace))
    if plural != "pods":
        print(json.dumps(item, indent=2))
        return 0
    m, s = item["manifest"], item["status"]
    meta, spec = m.get("metadata") or {}, m.get("spec") or {}
    runtime = s.get("runtime") or {}
    lines = [f"Name:        {meta.get('name')}", f"Namespace:   {meta.get('namespace')}",
             f"UID:         {meta.get('uid')}", f"Node:        {s.get('nodeName') or '<none>'}",
             f"Phase:       {s.get('phase', 'Pending')}", f"Reason:      {s.get('reason') or ''}",
             f"Restarts:    {runtime.get('restarts', 0)}", f"Logs:        {runtime.get('logDir') or '<none>'}",
             "Annotations:"]
    lines += [f"  {k}: {v}" for k, v in sorted({**(meta.get('annotations') or {}),
                                                **(s.get('annotations') or {})}.items())]
    lines.append("Containers:")
    states = {c["name"]: c for c in runtime.get("containers") or []}
    for c in spec.get("containers") or []:
        state = states.get(c.get("name"), {})
        command = " ".join(map(str, (c.get("command") or []) + (c.get("args") or [])))
        lines.append(f"  {c.get('name')}: {command}")
        lines.append(f"    requests: {((c.get('resources') or {}).get('requests')) or {}}")
        if state:
            lines.append(f"    state: {state.get('state')}  exit code: {state.get('exitCode')}  "
                         f"restarts: {state.get('restarts')}  pid: {state.get('pid') or '-'}")
    print("\n".join(lines))
    return 0


def logs(args: argparse.Namespace) -> int:
    item = request(args.server, "GET", _path("pods", args.name, args.namespace))
    log_dir = ((item["status"].get("runtime") or {}).get("logDir"))
    if not log_dir:
        raise CtlError(f"pod {args.namespace}/{args.name} has no logs yet (not started)")
    containers = [c.get("name") for c in (item["manifest"].get("spec") or {}).get("containers") or []]
    name = args.container or (containers[0] if len(containers) == 1 else None)
    if name is None:
        raise CtlError(f"pod {args.namespace}/{args.name} has several containers: choose one with -c "
                       f"({', '.join(containers)})", 2)
    path = Path(log_dir) / f"{name}.log"
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise CtlError(f"cannot read {path}: {exc.strerror}") from None
    if args.tail is not None:
        text = "".join(text.splitlines(keepends=True)[-args.tail:])
    sys.stdout.write(text)
    return 0


def delete(args: argparse.Namespace) -> int:
    plural = _kind(args.kind)
    answer = request(args.server, "DELETE", _path(plural, args.name, args.namespace))
    print(f"{plural[:-1]} {args.name} {answer['result']}")
    return 0


def top(args: argparse.Namespace) -> int:
    rows = [("NODE", "CPU(used)", "MEMORY(used)", "BATCH-CPU", "BATCH-MEMORY", "OFFLINE-QUOTA", "PODS", "READY")]
    for n in request(args.server, "GET", "/top/nodes"):
        alloc = n["allocatable"]
        quota = n.get("offlineQuotaMillis")
        rows.append((n["key"], f"{n.get('cpuUsedCores', 0):.2f}/{alloc.get('cpu', 0) / 1000:g}",
                     f"{format_quantity('memory', _mi(n.get('memoryUsedBytes', 0)))}",
                     f"{n.get('batchCpuMillis', 0)}m", format_quantity("memory", _mi(n.get("batchMemoryBytes", 0))),
                     "unlimited" if quota is None else f"{quota}m", n["pods"], "yes" if n["ready"] else "no"))
    print(text_table(rows))
    return 0


def _mi(amount: int) -> int:
    return int(amount) // 2**20 * 2**20  # whole MiB read better


# -- tables -----------------------------------------------------------------------------------------
def _pods(items: list[dict[str, Any]]) -> list[tuple]:
    rows = [("NAMESPACE", "NAME", "NODE", "PHASE", "RESTARTS", "REASON")]
    for i in items:
        s = i["status"]
        ns, _, name = i["key"].partition("/")
        rows.append((ns, name, s.get("nodeName") or "-", s.get("phase") or "Pending",
                     (s.get("runtime") or {}).get("restarts", 0), (s.get("reason") or "")[:100]))
    return rows


def _groups(items: list[dict[str, Any]]) -> list[tuple]:
    rows = [("NAMESPACE", "NAME", "QUEUE", "MINMEMBER", "PHASE")]
    for i in items:
        ns, _, name = i["key"].partition("/")
        spec = i["manifest"].get("spec") or {}
        rows.append((ns, name, spec.get("queue") or "default", spec.get("minMember", 1),
                     i["status"].get("phase") or "Pending"))
    return rows


def _queues(items: list[dict[str, Any]]) -> list[tuple]:
    rows = [("NAME", "WEIGHT", "ALLOCATED")]
    for i in items:
        alloc = i["status"].get("allocated") or {}
        rows.append((i["key"], (i["manifest"].get("spec") or {}).get("weight", 1),
                     ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(alloc.items())) or "-"))
    return rows


def _nodes(items: list[dict[str, Any]]) -> list[tuple]:
    rows = [("NAME", "READY", "CPU", "MEMORY", "PODS")]
    for n in items:
        alloc = n["allocatable"]
        rows.append((n["key"], "yes" if n["ready"] else "no", f"{alloc.get('cpu', 0) / 1000:g}",
                     format_quantity("memory", alloc.get("memory", 0)), n["pods"]))
    return rows


def _classes(items: list[dict[str, Any]]) -> list[tuple]:
    return [("NAME", "VALUE")] + [(i["key"], i["manifest"].get("value")) for i in items]


TABLES = {"pods": _pods, "podgroups": _groups, "queues": _queues, "nodes": _nodes, "priorityclasses": _classes}


