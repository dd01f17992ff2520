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
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from proto.errors import InputError
from proto.localsock import connect_unix, is_permission_error, permission_hint, unix_path
from proto.vocab.quantity import format_quantity
from scheduler.api.loader import expand_paths, iter_text
from scheduler.api.manifests import object_id
from scheduler.modes.embedded import podlogs, printing
from scheduler.modes.embedded.selectors import parse_selector
from scheduler.modes.table import text_table

DEFAULT_SERVER = "unix:///var/lib/scoria/control.sock"
MAX_BODY = 4 * 2**20  # what the server takes in one apply (scheduler.modes.embedded.server.MAX_BODY)
FILES_TYPE = "application/vnd.scoria.files+json"  # several files in one apply (server.FILES_TYPE)
TIMEOUT = 30.0
KINDS = {"event": "events", "events": "events", "ev": "events",
         "pod": "pods", "pods": "pods", "po": "pods", "podgroup": "podgroups", "podgroups": "podgroups",
         "pg": "podgroups", "queue": "queues", "queues": "queues", "q": "queues", "node": "nodes", "nodes": "nodes",
         "no": "nodes", "priorityclass": "priorityclasses", "priorityclasses": "priorityclasses", "pc": "priorityclasses",
         "namespace": "namespaces", "namespaces": "namespaces", "ns": "namespaces"}
NAMESPACED = {"pods", "podgroups", "events"}
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


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

    def namespaces(p: argparse.ArgumentParser) -> None:
        p.add_argument("-n", "--namespace", default=None, help="the namespace (default: default)")
        p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")

    p = sub.add_parser("apply", help="create or update objects from files (embedded mode)")
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE",
                   help="YAML/JSON file or folder (repeatable)")
    server(p)
    p = sub.add_parser("get", help="list pods, podgroups, queues, nodes, priorityclasses, namespaces or events "
                                   "(embedded mode)")
    p.add_argument("kind")
    p.add_argument("name", nargs="?")
    namespaces(p)
    p.add_argument("-o", "--output", choices=("wide", "yaml", "json", "name"), default=None,
                   help="wide: more columns, reasons whole; yaml|json: the objects; name: kind/name")
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="only objects whose labels match (a=b,c!=d,e in (f))")
    p.add_argument("-w", "--watch", action="store_true", help="after listing, print each change until Ctrl-C")
    server(p)
    p = sub.add_parser("describe", help="objects in detail, with their events (embedded mode)")
    p.add_argument("kind")
    p.add_argument("name", nargs="?")
    namespaces(p)
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="only objects whose labels match")
    server(p)
    p = sub.add_parser("logs", help="a pod's container logs (embedded mode, this machine)")
    p.add_argument("name")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-c", "--container")
    p.add_argument("--tail", type=int, default=None, metavar="N", help="the last N lines")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what the container writes")
    p.add_argument("-p", "--previous", action="store_true", help="the container's previous run (before a restart)")
    server(p)
    p = sub.add_parser("delete", help="delete an object, or those in files (-f); a running pod is stopped first "
                                      "(embedded mode)")
    p.add_argument("kind", nargs="?")
    p.add_argument("name", nargs="?")
    p.add_argument("-f", "--filename", action="append", metavar="FILE",
                   help="delete the objects in this YAML/JSON file or folder (repeatable)")
    p.add_argument("-n", "--namespace", default="default")
    server(p)
    p = sub.add_parser("top", help="real usage: nodes (with batch allocatable and offline quota) or pods "
                                   "(embedded mode)")
    p.add_argument("kind", choices=("nodes", "node", "no", "pods", "pod", "po"))
    namespaces(p)
    server(p)


def run(args: argparse.Namespace) -> int:
    try:
        return {"apply": apply, "get": get, "describe": describe, "logs": logs, "delete": delete,
                "top": top}[args.command](args)
    except CtlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:  # Ctrl-C ends -w and -f: what was printed is the answer
        return 0


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
        raise CtlError(f"unknown kind {text!r}; one of pods, podgroups, queues, nodes, priorityclasses, namespaces, "
                       "events", 2)
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


def _items(args: argparse.Namespace, plural: str) -> list[dict]:
    """What ``get``/``describe`` show: one object by name, else those of the namespace (every one with -A), of
    the kind, matching ``-l``."""
    namespace = args.namespace or "default"
    if args.name:
        if plural == "events":
            raise CtlError("get events takes no name: describe the object to see its events", 2)
        return [request(args.server, "GET", _path(plural, args.name, namespace))]
    items = request(args.server, "GET", "/events" if plural == "events" else f"/objects/{plural}")
    if plural in NAMESPACED and not args.all_namespaces:
        items = [i for i in items if _namespace_of(plural, i) == namespace]
    if getattr(args, "selector", None):
        try:
            selector = parse_selector(args.selector)
        except InputError as exc:
            raise CtlError(str(exc), 2) from None
        items = [i for i in items if selector.matches(_labels(plural, i))]
    return items


def _namespace_of(plural: str, item: dict) -> str:
    if plural == "events":
        return (item.get("metadata") or {}).get("namespace") or "default"
    return str(item["key"]).partition("/")[0]


def _labels(plural: str, item: dict) -> dict[str, str]:
    if plural == "nodes":
        return item.get("labels") or {}
    meta = (item.get("metadata") if plural == "events" else (item.get("manifest") or {}).get("metadata")) or {}
    labels = meta.get("labels")
    return labels if isinstance(labels, dict) else {}


def get(args: argparse.Namespace) -> int:
    plural = _kind(args.kind)
    if args.all_namespaces and args.name:
        raise CtlError("a name cannot go with -A (--all-namespaces): name the namespace with -n", 2)
    version = request(args.server, "GET", "/watch/0")["version"] if args.watch else 0  # answered at once
    items = _items(args, plural)
    if not items and not args.watch and args.output not in ("json", "yaml"):
        where = "" if plural not in NAMESPACED or args.all_namespaces else f" in {args.namespace or 'default'} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    widths = _print(args, plural, items, header=True, single=bool(args.name))
    if not args.watch:
        return 0
    seen = {_identity(plural, i): _signature(plural, i) for i in items}
    last = {_identity(plural, i): i for i in items}
    while True:  # until Ctrl-C
        version = request(args.server, "GET", f"/watch/{version}")["version"]
        try:
            items = _items(args, plural)
        except CtlError as exc:
            if args.name and "not found" in str(exc):  # the one watched is gone: kubectl ends too
                return 0
            raise
        now = {_identity(plural, i): i for i in items}
        changed = [i for key, i in now.items() if seen.get(key) != _signature(plural, i)]
        changed += [i for key, i in last.items() if key not in now]  # gone: its last state, as kubectl prints it
        seen, last = {key: _signature(plural, i) for key, i in now.items()}, now
        if changed:
            widths = _print(args, plural, changed, header=False, widths=widths)


def _identity(plural: str, item: dict) -> str:
    return str((item.get("metadata") or {}).get("name")) if plural == "events" else str(item["key"])


def _signature(plural: str, item: dict) -> str:
    """What a watch compares: an object's content, without what moves with every report (a node's usage)."""
    if plural == "nodes":
        item = {k: item.get(k) for k in ("key", "status", "reason", "taints", "allocatable", "pods", "labels")}
    return json.dumps(item, sort_keys=True, default=str)


def _print(args: argparse.Namespace, plural: str, items: list[dict], *, header: bool, single: bool = False,
           widths: list[int] | None = None) -> list[int]:
    """Print ``items`` as ``-o`` says; the table's column widths (a watch prints later rows to the first ones)."""
    output = args.output
    if output == "name":
        for i in items:
            print(printing.object_name(plural, i))
        return widths or []
    if output in ("json", "yaml"):
        objects = [printing.as_object(plural, i) for i in items]
        if args.watch:  # each object as it changes, as kubectl prints a watch
            docs = objects
        else:
            docs = [objects[0] if single else {"apiVersion": "v1", "kind": "List", "items": objects,
                                               "metadata": {"resourceVersion": ""}}]
        for d in docs:
            if output == "json":
                print(json.dumps(d, indent=4))
            else:
                print(("---\n" if args.watch else "") +
                      yaml.safe_dump(d, sort_keys=False, default_flow_style=False, width=1 << 30).rstrip())
        sys.stdout.flush()
        return widths or []
    rows = printing.table(plural, items, wide=output == "wide", namespaces=bool(args.all_namespaces), now=time.time())
    if widths is None:
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    else:
        widths = [max(w, *(len(str(r[i])) for r in rows[1:])) for i, w in enumerate(widths)]
    for row in rows if header else rows[1:]:
        print("   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    sys.stdout.flush()
    return widths


def describe(args: argparse.Namespace) -> int:
    plural = _kind(args.kind)
    if plural == "events":
        raise CtlError("describe an object to see its events (get events lists them all)", 2)
    items = _items(args, plural)
    if not items:
        print("No resources found.", file=sys.stderr)
        return 0
    pods: list[dict] = []
    if plural in ("nodes", "podgroups"):
        pods = request(args.server, "GET", "/objects/pods")
    out = []
    for item in items:
        key = str(item["key"])
        ns, _, name = key.rpartition("/")
        events = request(args.server, "GET", f"/events/{_path(plural, name, ns or None).removeprefix('/objects/')}")
        if plural == "nodes":
            mine = [p for p in pods if p["status"].get("nodeName") == key]
        elif plural == "podgroups":
            mine = [p for p in pods if p["key"].partition("/")[0] == ns and
                    ((p["manifest"].get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION) == name]
        else:
            mine = []
        out.append(printing.describe(plural, item, events, time.time(), pods=mine))
    print("\n\n".join(out))
    return 0


def logs(args: argparse.Namespace) -> int:
    try:
        return podlogs.logs(args, lambda: request(args.server, "GET", _path("pods", args.name, args.namespace)))
    except podlogs.LogsError as exc:
        raise CtlError(str(exc), exc.status) from None


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
    if args.kind in ("pods", "pod", "po"):
        return top_pods(args)
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


def top_pods(args: argparse.Namespace) -> int:
    """kubectl's ``top pods``: each pod's CPU and memory in use, as its node's agent last measured them."""
    namespace = args.namespace or "default"
    pods = [p for p in request(args.server, "GET", "/top/pods")
            if args.all_namespaces or p.get("namespace") == namespace]
    if not pods:
        where = "" if args.all_namespaces else f" in {namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    rows: list[tuple] = [(("NAMESPACE",) if args.all_namespaces else ()) + ("NAME", "CPU(cores)", "MEMORY(bytes)")]
    for p in sorted(pods, key=lambda p: (p.get("namespace", ""), p.get("name", ""))):
        rows.append(((p.get("namespace"),) if args.all_namespaces else ()) + (
            p.get("name"), f"{round(float(p.get('cpuUsedCores') or 0) * 1000)}m",
            f"{int(p.get('memoryUsedBytes') or 0) // 2**20}Mi"))
    print(text_table(rows))
    return 0


def _mi(amount: int) -> int:
    return int(amount) // 2**20 * 2**20  # whole MiB read better
