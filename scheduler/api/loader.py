"""Read multi-document YAML files (or folders of them) into a checked workload.

Every document becomes an object through :func:`parse_object`; then the
references between objects are checked (a PodGroup's queue, a pod's group,
node and priority class, a queue's parent) so that a typo fails loudly with
the file, the object and the problem instead of leaving a pod pending forever.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from proto.codec import report_from_json
from scheduler.api.fields import refuse_unknown_fields
from scheduler.api.loadhistory import parse_node_load_history
from scheduler.api.manifests import ManifestError, object_id, parse_object
from scheduler.api.objects import DEFAULT_QUEUE, ROOT_QUEUE, Namespace, Node, Pod, PodGroup, PriorityClass, Queue
from scheduler.api.safeyaml import DEFAULT_LIMITS, Limits, YamlError, construct, iter_nodes

YAML_SUFFIXES = (".yaml", ".yml", ".json")
# Files on the simulator's command line are the user's own: a whole cluster may be one List document.
FILE_LIMITS = Limits(max_document_chars=64 * 2**20, max_text_chars=256 * 2**20, max_values=None)
SCORIA_API = "scoria.io/v1"
# Scoria's own document kinds (apiVersion scoria.io/v1): kind -> parser(doc, source) -> (name, object).
# A parser raises ManifestError (or ValueError, reported with the source) for a document it cannot use.
def node_report_from_doc(doc: dict, source: str) -> tuple[str, Any]:
    """The protocol's NodeReport in its JSON form; its content is checked where the clock is known."""
    try:
        report = report_from_json(doc)
    except ValueError as exc:
        raise ManifestError(source, "NodeReport", f"not a valid NodeReport: {exc}") from None
    name = report.identity.node_name
    if not name:
        raise ManifestError(source, "NodeReport", "identity.nodeName: missing")
    return name, report


SCORIA_KINDS: dict[str, Callable[[dict, str], tuple[str, Any]]] = {"NodeReport": node_report_from_doc,
                                                                   "NodeLoadHistory": parse_node_load_history}
BUILTIN_PRIORITY_CLASSES = {
    "system-cluster-critical": PriorityClass("system-cluster-critical", 2_000_000_000),
    "system-node-critical": PriorityClass("system-node-critical", 2_000_001_000),
}


@dataclass
class Workload:
    """Objects read from manifests, each with the place it came from."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    podgroups: list[PodGroup] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    # scoria.io/v1 documents by kind (NodeReport, NodeLoadHistory): (name, object) in input order
    scoria: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    # documents of the kinds a caller added (load_workload's extra_kinds): kind -> (key, object) in input order
    extra: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    # the manifests objects came from, by (kind, key), when load_workload is asked to keep them
    documents: dict[tuple[str, str], dict] = field(default_factory=dict)
    sources: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, obj: Node | Pod | PodGroup | Queue | PriorityClass | Namespace, source: str) -> None:
        kind = type(obj).__name__
        key = (kind, getattr(obj, "key", None) or obj.name)
        if key in self.sources:
            raise ManifestError(source, f"{kind} {key[1]}",
                                f"defined twice (first at {self.sources[key]})")
        self.sources[key] = source
        match obj:
            case Node():
                self.nodes.append(obj)
            case Pod():
                self.pods.append(obj)
            case PodGroup():
                self.podgroups.append(obj)
            case Queue():
                self.queues.append(obj)
            case PriorityClass():
                self.priority_classes.append(obj)
            case Namespace():
                self.namespaces.append(obj)

    def add_scoria(self, kind: str, name: str, obj: Any, source: str) -> None:
        if (kind, name) in self.sources:
            raise ManifestError(source, f"{kind} {name}", f"defined twice (first at {self.sources[(kind, name)]})")
        self.sources[(kind, name)] = source
        self.scoria.setdefault(kind, []).append((name, obj))

    def add_extra(self, kind: str, key: str, obj: Any, source: str) -> None:
        if (kind, key) in self.sources:
            raise ManifestError(source, f"{kind} {key}", f"defined twice (first at {self.sources[(kind, key)]})")
        self.sources[(kind, key)] = source
        self.extra.setdefault(kind, []).append((key, obj))


def parse_scoria(doc: dict, source: str) -> tuple[str, str, Any]:
    """A scoria.io/v1 document: (kind, name, object)."""
    kind = doc.get("kind")
    if not isinstance(kind, str) or (parser := SCORIA_KINDS.get(kind)) is None:
        known = ", ".join(sorted(SCORIA_KINDS)) or "none"
        raise ManifestError(source, object_id(doc), f"kind: unknown {SCORIA_API} kind {kind!r}; known: {known}")
    try:
        name, obj = parser(doc, source)
    except ValueError as exc:
        if isinstance(exc, ManifestError):
            raise
        raise ManifestError(source, object_id(doc), str(exc)) from None
    return kind, name, obj


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given; folders as their YAML/JSON files, recursively, in name order."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES))
        elif path.is_file():
            out.append(path)
        else:
            raise ManifestError(str(path), "", "no such file or folder")
    return out


def iter_documents(path: Path) -> Iterable[tuple[object, str]]:
    """Yield ``(document, "file:line")`` for each YAML document; ``List`` kinds are unpacked."""
    try:
        if path.stat().st_size > 4 * FILE_LIMITS.max_text_chars:  # more characters than the limit, whatever they are
            raise ManifestError(str(path), "", f"invalid YAML: the text is longer than "
                                               f"{FILE_LIMITS.max_text_chars:,} characters")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(str(path), "", f"cannot read: {exc}") from None
    return iter_text(text, str(path), limits=FILE_LIMITS)


def iter_text(text: str, path: str, *, limits: Limits = DEFAULT_LIMITS) -> Iterable[tuple[object, str]]:
    """:func:`iter_documents` of text already read, named ``path`` in messages.

    Documents are read as JSON values only, within ``limits`` (:mod:`scheduler.api.safeyaml`):
    a problem is a ManifestError naming ``path``, the line and the column.
    """
    try:
        for node in iter_nodes(text, limits):
            where = f"{path}:{node.start_mark.line + 1}"
            doc = construct(node)
            if doc is None:
                continue
            if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                lines = _item_lines(node)
                for i, item in enumerate(doc["items"]):
                    line = lines[i] if i < len(lines) else node.start_mark.line + 1
                    yield item, f"{path}:{line} (items[{i}])"
            else:
                yield doc, where
    except YamlError as exc:
        where = f"{path}:{exc.line}:{exc.column}" if exc.line else path
        raise ManifestError(where, "", f"invalid YAML: {exc.problem}") from None


def _item_lines(node: yaml.Node) -> list[int]:
    """Line numbers of the entries of a List document's ``items``."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if getattr(key, "value", None) == "items" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return []


#: a parser for a document kind of a higher layer (the controllers' Job, Command): (doc, source) -> (key, object)
ExtraParser = Callable[[dict, str], tuple[str, Any]]


def load_workload(paths: Iterable[str | os.PathLike], *,
                  extra_kinds: Mapping[tuple[str, str], tuple[str, ExtraParser]] | None = None,
                  keep_documents: bool = False) -> Workload:
    """Parse and cross-check every object in ``paths``; raise ManifestError on the first problem.

    ``extra_kinds`` maps (apiVersion, kind) to (name, parser) for documents other layers read (they land
    in :attr:`Workload.extra` under that name); ``keep_documents`` keeps every object's manifest
    (:attr:`Workload.documents`).
    """
    work = Workload()
    files = expand_paths(paths)
    if not files:
        raise ManifestError(", ".join(str(p) for p in paths) or "(no input)", "", "no YAML or JSON files found")
    extra = extra_kinds or {}
    for path in files:
        for doc, where in iter_documents(path):
            if isinstance(doc, dict) and doc.get("apiVersion") == SCORIA_API:
                work.add_scoria(*parse_scoria(doc, where), where)
                continue
            refuse_unknown_fields(doc, where)  # strict, as kubectl: a typo is named, never read as absent
            handler = extra.get((str(doc.get("apiVersion")), str(doc.get("kind")))) if isinstance(doc, dict) else None
            if handler is not None and isinstance(doc, dict):
                name, parser = handler
                key, obj = parser(doc, where)
                work.add_extra(name, key, obj, where)
                if keep_documents:
                    work.documents[(name, key)] = doc
                continue
            obj = parse_object(doc, where)
            work.add(obj, where)
            if keep_documents and isinstance(doc, dict):
                work.documents[(type(obj).__name__, getattr(obj, "key", None) or obj.name)] = doc
    check_references(work)
    return work


def check_references(work: Workload) -> None:
    """Refuse dangling names between objects; the message names the referring object."""
    queues = {q.name for q in work.queues} | {DEFAULT_QUEUE}
    groups = {g.key for g in work.podgroups}
    nodes = {n.name for n in work.nodes} | {name for name, _ in work.scoria.get("NodeReport", ())}
    classes = {c.name for c in work.priority_classes} | set(BUILTIN_PRIORITY_CLASSES)
    defaults = [c.name for c in work.priority_classes if c.global_default]
    if len(defaults) > 1:
        src = work.sources[("PriorityClass", defaults[1])]
        raise ManifestError(src, f"PriorityClass {defaults[1]}",
                            f"globalDefault: only one PriorityClass may be the default (also {defaults[0]})")

    def fail(kind: str, key: str, message: str) -> ManifestError:
        return ManifestError(work.sources[(kind, key)], f"{kind} {key}", message)

    uids: dict[str, str] = {}
    for pod in work.pods:
        if pod.uid in uids:
            raise fail("Pod", pod.key, f"metadata.uid: {pod.uid!r} is already the uid of Pod {uids[pod.uid]}")
        uids[pod.uid] = pod.key

    for group in work.podgroups:
        if group.queue not in queues:
            raise fail("PodGroup", group.key, f"spec.queue: queue {group.queue!r} is not defined")
        if group.priority_class_name and group.priority_class_name not in classes:
            raise fail("PodGroup", group.key,
                       f"spec.priorityClassName: PriorityClass {group.priority_class_name!r} is not defined")
    for pod in work.pods:
        group_name = pod.group_name
        if group_name and f"{pod.namespace}/{group_name}" not in groups:
            raise fail("Pod", pod.key, f"metadata.annotations: PodGroup {pod.namespace}/{group_name} is not defined")
        queue = pod.annotations.get("scheduling.volcano.sh/queue-name", "")
        if not group_name and queue and queue not in queues:
            raise fail("Pod", pod.key, f"metadata.annotations: queue {queue!r} is not defined")
        if pod.node_name and pod.node_name not in nodes:
            raise fail("Pod", pod.key, f"spec.nodeName: node {pod.node_name!r} is not defined")
        if pod.priority_class_name and pod.priority_class_name not in classes:
            raise fail("Pod", pod.key,
                       f"spec.priorityClassName: PriorityClass {pod.priority_class_name!r} is not defined")
    _check_queue_tree(work, queues, fail)


def _check_queue_tree(work: Workload, queues: set[str], fail: Callable[[str, str, str], ManifestError]) -> None:
    parents = {q.name: q.parent for q in work.queues}
    for queue in work.queues:
        if queue.parent and queue.parent != ROOT_QUEUE and queue.parent not in queues:
            raise fail("Queue", queue.name, f"spec.parent: queue {queue.parent!r} is not defined")
        seen, cur = {queue.name}, queue.parent
        while cur and cur != ROOT_QUEUE:
            if cur in seen:
                raise fail("Queue", queue.name, f"spec.parent: queues form a cycle through {cur!r}")
            seen.add(cur)
            cur = parents.get(cur, "")


__all__ = ["Workload", "load_workload", "expand_paths", "iter_documents", "check_references",
           "ManifestError", "object_id", "BUILTIN_PRIORITY_CLASSES"]
