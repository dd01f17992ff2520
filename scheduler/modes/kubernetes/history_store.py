"""The learned load history kept in the cluster itself: one annotation on each Node.

In Kubernetes mode the scheduler has no disk of its own worth keeping, and a
ConfigMap (1 MiB) cannot hold ten thousand nodes' weeks.  So each node carries
its own: ``scoria.io/load-history`` holds its last weeks — per week the week
number and a byte per hour of the week for CPU and for memory, zlib-compressed,
base64 — about a kilobyte per node.  Written once an hour per node with a
merge patch of that one annotation (nothing else of the Node is touched),
through the scheduler's rate limiter, read back when a scheduler starts.  A
node whose annotation cannot be read is skipped with a warning (the next save
replaces it); a node that is gone is forgotten; a write that fails is kept and
tried again with the next save, alone — the others are not written twice.
"""

from __future__ import annotations

import base64
import json
import logging
import struct
import zlib
from collections.abc import Iterable
from typing import Any

from proto.errors import InputError
from scheduler.history.learning import HOURS_PER_WEEK
from scheduler.history.store import HistoryStore, WeekRecord
from scheduler.modes.kubernetes.ratelimit import RateLimiter

log = logging.getLogger(__name__)

ANNOTATION = "scoria.io/load-history"
FORMAT = 1
_WEEK = struct.Struct(f"<i{HOURS_PER_WEEK}s{HOURS_PER_WEEK}s")


def encode(weeks: dict[int, tuple[bytes, bytes]]) -> str:
    raw = bytes([FORMAT]) + b"".join(_WEEK.pack(week, cpu, memory) for week, (cpu, memory) in sorted(weeks.items()))
    return base64.b64encode(zlib.compress(raw, 9)).decode()


def decode(text: str) -> dict[int, tuple[bytes, bytes]]:
    """ValueError when the annotation is not a load history this scheduler wrote."""
    try:
        raw = zlib.decompress(base64.b64decode(text, validate=True))
    except (ValueError, zlib.error) as exc:
        raise InputError(f"not base64 of zlib data ({exc})") from None
    if not raw or raw[0] != FORMAT or (len(raw) - 1) % _WEEK.size:
        raise InputError(f"unknown format {raw[:1].hex() or 'empty'} or a cut-off record")
    out = {}
    for offset in range(1, len(raw), _WEEK.size):
        week, cpu, memory = _WEEK.unpack_from(raw, offset)
        out[week] = (cpu, memory)
    return out


def _default_limiter() -> RateLimiter:
    return RateLimiter(qps=10, burst=20)


class NodeAnnotationHistoryStore(HistoryStore):
    def __init__(self, api_client: Any, limiter: Any = None):
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.limiter = limiter or _default_limiter()  # its own budget: ten thousand nodes an hour, not binds
        self.location = f"the {ANNOTATION} annotation of each Node"
        self._weeks: dict[str, dict[int, tuple[bytes, bytes]]] = {}
        self._unwritten: set[str] = set()  # nodes whose last write failed: written with the next save

    def load(self) -> list[WeekRecord]:
        resp = self.core.list_node(_preload_content=False, _request_timeout=(10.0, 120.0))
        out: list[WeekRecord] = []
        # with _preload_content=False the client returns the raw urllib3 response, not the V1NodeList it declares
        for item in json.loads(resp.data).get("items") or []:  # type: ignore[attr-defined]
            name = item["metadata"]["name"]
            text = (item["metadata"].get("annotations") or {}).get(ANNOTATION)
            if not text:
                continue
            try:
                weeks = decode(text)
            except ValueError as exc:
                log.warning("node %s: ignoring its %s annotation: %s", name, ANNOTATION, exc)
                continue
            self._weeks[name] = weeks
            out.extend(WeekRecord(name, week, cpu, memory) for week, (cpu, memory) in weeks.items())
        return out

    def save(self, records: Iterable[WeekRecord], *, forget_before: int | None = None) -> None:
        """One patch per node touched (and per node whose last write failed); failures are kept, not raised."""
        from kubernetes.client.exceptions import ApiException

        touched = set(self._unwritten)
        for r in records:
            self._weeks.setdefault(r.node, {})[r.week] = (r.cpu, r.memory)
            touched.add(r.node)
        failed = []
        for node in sorted(touched):
            weeks = self._weeks.get(node, {})
            if forget_before is not None:
                for week in [w for w in weeks if w < forget_before]:
                    del weeks[week]
            patch = {"metadata": {"annotations": {ANNOTATION: encode(weeks)}}}
            try:
                self.limiter.acquire()
                self.core.patch_node(node, patch, _preload_content=False, _request_timeout=(5.0, 30.0))
            except ApiException as exc:
                if exc.status == 404:  # the node is gone, and its history with it
                    self._weeks.pop(node, None)
                    self._unwritten.discard(node)
                    continue
                failed.append(node)
            except Exception:  # the API server away
                failed.append(node)
            else:
                self._unwritten.discard(node)
        if failed:
            self._unwritten.update(failed)
            log.warning("load history not written on %d node(s) (%s…); tried again with the next save",
                        len(failed), ", ".join(failed[:5]))

    def close(self) -> None:
        """Nothing to let go: the API client belongs to the Kubernetes mode."""
