"""``python -m scheduler apply|get|describe|logs|delete|top``: kubectl-like commands against the embedded scheduler.

They talk to ``serve --embedded``'s control API (:mod:`scheduler.modes.embedded.server`), a Unix socket:
``--server``, default ``$SCORIA_SERVER`` or ``unix:///var/lib/scoria/control.sock`` (the socket of
``serve --embedded --state /var/lib/scoria``).  Only root, or members of the group the scheduler
grants it to (``serve --api-group``), can open it; anyone else is told so in one line.  A refused
manifest exits with status 2 and the server's one-line reason; nothing of that file is stored.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from proto.errors import InputError
from proto.localsock import connect_unix, is_permission_error, permission_hint, unix_path
from proto.vocab.quantity import format_quantity
from scheduler.api.loader import expand_paths, iter_text
from scheduler.api.manifests import object_id
from scheduler.modes.table import text_table

DEFAULT_SERVER = "unix:///var/lib/scoria/control.sock"
MAX_BODY = 4 * 2**20  # what the server takes in one apply (scheduler.modes.embedded.server.MAX_BODY)
FILES_TYPE = "application/vnd.scoria.files+json"  # several files in one apply (server.FILES_TYPE)
TIMEOUT = 30.0
KINDS = {"pod": "pods", "pods": "pods", "po": "pods", "podgroup": "podgroups", "podgroups": "podgroups",
         "pg": "podgroups", "queue": "queues", "queues": "queues", "q": "queues", "node": "nodes", "nodes": "nodes",
         "no": "nodes", "priorityclass": "priorityclasses", "priorityclasses": "priorityclasses", "pc": "priorityclasses",
         "namespace": "namespaces", "namespaces": "namespaces", "ns": "namespaces"}
NAMESPACED = {"pods", "podgroups"}
CONTAINER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a DNS-1123 label, as Kubernetes names containers


class CtlError(Exception):
    """Something to tell the user, and the exit status."""

    def __init__(self, message: str, status: int = 1, *, http_status: int | None = None):
        super().__init__(message)
        self.status = status
        self.http_status = http_status  # the server's answer (404, 409, ...), None when there was none


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def server(p: argparse.ArgumentParser) -> None:
        p.add_argument("--server", default=os.environ.get("SCORIA_SERVER") or DEFAULT_SERVER,
                       metavar="unix:///PATH/control.sock",
                       help="the embedded scheduler's control socket (default $SCORIA_SERVER or %(default)s)")

    p = sub.add_parser("apply", help="create or update objects from files (embedded mode)")
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE",
                   help="YAML/JSON file or folder (repeatable)")
    server(p)
    p = sub.add_parser("get", help="list pods, podgroups, queues, nodes, priorityclasses or namespaces (embedded mode)")
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
    p = sub.add_parser("delete", help="delete an object, or those in files (-f); a running pod is stopped first "
                                      "(embedded mode)")
    p.add_argument("kind", nargs="?")
    p.add_argument("name", nargs="?")
    p.add_argument("-f", "--filename", action="append", metavar="FILE",
                   help="delete the objects in this YAML/JSON file or folder (repeatable)")
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
class UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over the control socket."""

    def __init__(self, path: Path, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = connect_unix(self.path, self.timeout or TIMEOUT)


def socket_of(server: str) -> Path:
    """The control socket ``--server`` names (``unix:///path``, ``unix:path`` or a path)."""
    try:
        path = unix_path(server) if server.startswith("unix:") else Path(server) if server.startswith("/") else None
    except InputError as exc:
        raise CtlError(f"--server: {exc}", 2) from None
    if path is None:
        raise CtlError(f"--server: expected the control socket, like {DEFAULT_SERVER}, got {server!r} (the control "
                       "API is not served over TCP)", 2)
    return path


def request(server: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> Any:
    """The server's JSON answer to ``method path``; CtlError with its one-line reason otherwise."""
    sock = socket_of(server)
    conn = UnixConnection(sock, TIMEOUT)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise _unreachable(server, sock, exc) from None
        # reached: from here on a failure is the scheduler's answer (or the lack of one), never "cannot reach"
        try:
            conn.request(method, path, body=body, headers=headers or {})
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the whole body was read (413, say): its answer is waiting
        resp = conn.getresponse()
        data = resp.read()
    except TimeoutError:
        raise CtlError(f"the scheduler at {server} did not answer within {TIMEOUT:g} s (it may still be working "
                       "on the request: see its log)") from None
    except OSError as exc:
        raise CtlError(f"the scheduler at {server} closed the connection without an answer "
                       f"({exc.strerror or str(exc) or type(exc).__name__}): see its log") from None
    except http.client.HTTPException as exc:
        raise CtlError(f"the scheduler at {server} answered something that is not HTTP ({exc!r})") from None
    finally:
        conn.close()
    if resp.status >= 400:
        try:
            message = json.loads(data).get("error") or resp.reason
        except (ValueError, AttributeError):
            message = f"{resp.status} {resp.reason}"
        raise CtlError(message, 2 if resp.status in (400, 413) else 1, http_status=resp.status)
    try:
        return json.loads(data or b"null")
    except ValueError:
        raise CtlError(f"the scheduler at {server} answered something that is not JSON") from None


def _unreachable(server: str, sock: Path, exc: OSError) -> CtlError:
    if is_permission_error(exc):
        return CtlError(permission_hint(sock))
    why = exc.strerror or str(exc) or type(exc).__name__
    return CtlError(f"cannot reach the scheduler at {server} ({why}); is `python -m scheduler serve --embedded` "
                    f"running with its state in {sock.parent}?")


def _kind(text: str) -> str:
    plural = KINDS.get(text.lower())
    if plural is None:
        raise CtlError(f"unknown kind {text!r}; one of pods, podgroups, queues, nodes, priorityclasses, namespaces", 2)
    return plural


def _path(plural: str, name: str, namespace: str | None) -> str:
    """The object's path, each name one percent-encoded segment (``web?canary`` never becomes ``web``)."""
    ns = (namespace or "default") if plural in NAMESPACED else "-"
    for what, text, limit in (("namespace", ns, 63), (f"{plural[:-1]} name", name, 253)):
        if len(text) > limit:  # the server checks names; this one need not be sent to be refused
            raise CtlError(f"invalid {what} {text[:80] + '…'!r}: at most {limit} characters", 2)
    return f"/objects/{plural}/{quote(ns, safe='')}/{quote(name, safe='')}"


# -- commands ---------------------------------------------------------------------------------------
def _read_files(names: list[str]) -> list[tuple[Path, str]]:
    """The files ``-f`` names (folders: their YAML/JSON files), read; CtlError (2) for one that cannot be."""
    try:
        files = expand_paths(names)
    except InputError as exc:
        raise CtlError(str(exc), 2) from None
    if not files:
        raise CtlError(f"no YAML or JSON files in {', '.join(names)}", 2)
    out = []
    for path in files:
        try:
            out.append((path, Path(path).read_text()))
        except (OSError, UnicodeDecodeError) as exc:
            raise CtlError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", 2) from None
    return out


def apply(args: argparse.Namespace) -> int:
    """Every file in one request: one apply is one transaction, however many files and folders it names."""
    files = _read_files(args.filename)
    names = ", ".join(str(p) for p, _ in files)
    names = names if len(names) <= 200 else names[:200] + "…"
    size = sum(len(text.encode()) for _, text in files)
    body = json.dumps({"files": [{"name": str(path), "text": text} for path, text in files]}).encode()
    if size > MAX_BODY or len(body) > MAX_BODY:
        raise CtlError(f"{names}: {size} bytes{f' ({len(body)} to send)' if size <= MAX_BODY else ''}, over the limit "
                       f"of {MAX_BODY} bytes ({MAX_BODY // 2**20} MiB) of one apply: apply fewer or smaller files "
                       "at a time", 2)
    answer = request(args.server, "POST", "/apply", body, {"Content-Type": FILES_TYPE})
    for item in answer.get("results") or [{"name": n, "result": "applied"} for n in answer["applied"]]:
        kind, _, key = item["name"].partition("/")
        print(f"{kind}/{key.rpartition('/')[2]} {item['result']}")  # kubectl's form: pod/web created
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
    meta = item["manifest"].get("metadata") or {}
    log_dir = ((item["status"].get("runtime") or {}).get("logDir"))
    if not log_dir:
        raise CtlError(f"pod {args.namespace}/{args.name} has no logs yet (not started)")
    containers = [c.get("name") for c in (item["manifest"].get("spec") or {}).get("containers") or []]
    name = args.container or (containers[0] if len(containers) == 1 else None)
    if name is None:
        raise CtlError(f"pod {args.namespace}/{args.name} has several containers: choose one with -c "
                       f"({', '.join(map(str, containers))})", 2)
    if not isinstance(name, str) or len(name) > 63 or not CONTAINER_NAME.fullmatch(name) or name not in containers:
        raise CtlError(f"pod {args.namespace}/{args.name} has no container {str(name)[:80]!r} "
                       f"(it has {', '.join(map(str, containers)) or 'none'})", 2)
    path = _log_file(Path(log_dir), name, f"{meta.get('namespace')}_{meta.get('name')}_{meta.get('uid')}")
    try:
        text = path.read_text(errors="replace")
    except PermissionError:
        raise CtlError(f"permission denied on {path}: the pods' logs are root's; run as root") from None
    except OSError as exc:
        raise CtlError(f"cannot read {path}: {exc.strerror}") from None
    if args.tail is not None:
        text = "".join(text.splitlines(keepends=True)[-args.tail:])
    sys.stdout.write(text)
    return 0


def _log_file(log_dir: Path, container: str, folder: str) -> Path:
    """``log_dir/container.log``, only where ``log_dir`` is the pod's own folder (``<ns>_<name>_<uid>``) and the
    file, links resolved, lies inside it."""
    if log_dir.name != folder or not log_dir.is_absolute():
        raise CtlError(f"the pod's log folder {str(log_dir)[:200]!r} is not its own ({folder}): not reading it")
    try:
        root = log_dir.resolve(strict=True)
        path = (log_dir / f"{container}.log").resolve(strict=True)
    except PermissionError:
        raise CtlError(f"permission denied on {log_dir}: the pods' logs are root's; run as root") from None
    except (OSError, RuntimeError) as exc:
        raise CtlError(f"cannot read {log_dir / f'{container}.log'}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    if path.parent != root:
        raise CtlError(f"{log_dir / f'{container}.log'} leads outside the pod's log folder: not reading it")
    return path


def delete(args: argparse.Namespace) -> int:
    if args.filename:
        if args.kind or args.name:
            raise CtlError("delete takes either KIND NAME or -f FILE, not both", 2)
        return delete_files(args)
    if not args.kind or not args.name:
        raise CtlError("delete needs KIND NAME (delete pod web) or -f FILE", 2)
    plural = _kind(args.kind)
    answer = request(args.server, "DELETE", _path(plural, args.name, args.namespace))
    print(f"{plural[:-1]} {args.name} {answer['result']}")
    return 0


def delete_files(args: argparse.Namespace) -> int:
    """``delete -f``: each object the files define, in their order; one not found is said and the rest still
    deleted (exit 1 at the end), as kubectl does."""
    targets = []
    for path, text in _read_files(args.filename):
        try:
            docs = list(iter_text(text, str(path)))
        except InputError as exc:
            raise CtlError(str(exc), 2) from None
        for doc, where in docs:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            meta = (doc.get("metadata") if isinstance(doc, dict) else None) or {}
            plural = KINDS.get(kind.lower()) if isinstance(kind, str) else None
            if plural is None or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                raise CtlError(f"{where}: {object_id(doc) if isinstance(doc, dict) else 'not an object'}: cannot be "
                               "deleted (a kind and a metadata.name are needed)", 2)
            namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
            targets.append((plural, meta["name"], namespace or args.namespace))
    failed = 0
    for plural, name, namespace in targets:
        try:
            answer = request(args.server, "DELETE", _path(plural, name, namespace))
        except CtlError as exc:
            if exc.status == 2:
                raise
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{plural[:-1]} {name} {answer['result']}")
    return 1 if failed else 0


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
    rows = [("NAME", "STATUS", "CPU", "MEMORY", "PODS")]
    for n in items:
        alloc = n["allocatable"]
        rows.append((n["key"], n.get("status") or ("Ready" if n["ready"] else "NotReady"), f"{alloc.get('cpu', 0) / 1000:g}",
                     format_quantity("memory", alloc.get("memory", 0)), n["pods"]))
    return rows


def _classes(items: list[dict[str, Any]]) -> list[tuple]:
    return [("NAME", "VALUE")] + [(i["key"], i["manifest"].get("value")) for i in items]


def _namespaces(items: list[dict[str, Any]]) -> list[tuple]:
    def labels(item: dict[str, Any]) -> str:
        found = (item["manifest"].get("metadata") or {}).get("labels") or {}
        return ",".join(f"{k}={v}" for k, v in sorted(found.items())) or "-"
    return [("NAME", "LABELS")] + [(i["key"], labels(i)) for i in items]


TABLES = {"pods": _pods, "podgroups": _groups, "queues": _queues, "nodes": _nodes, "priorityclasses": _classes,
          "namespaces": _namespaces}


