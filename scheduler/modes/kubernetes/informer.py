"""List, then watch, one kind of object from the API server, and keep the cache in step with it.

An :class:`Informer` lists the objects (remembering the list's
``resourceVersion``), then watches from there, handing every change to its
handlers.  It keeps its own map of what it last handed on, keyed by
namespace/name, so that whatever happens to the watch nothing is lost or
counted twice:

* the watch ends (server timeout, network): watch again from the last
  resourceVersion seen;
* the resourceVersion is too old (410 Gone, or an ``ERROR`` event carrying
  it): list again and *diff* against the map — objects that vanished meanwhile
  are deleted, changed ones updated, unchanged ones left alone;
* every ``resync`` seconds the same list-and-diff runs anyway;
* an API error: back off (exponential, capped) and try again.

Objects are plain dicts as the API server sends them (no client models:
they are slow and drop fields the client does not know).  A list's items carry
no ``apiVersion``/``kind``; given ``type_meta`` the informer puts them back, so
every object it holds names its kind.  ``keep`` narrows what it holds (an object
that stops passing is handed on as deleted); ``listeners`` hear of every change
handed on, after the handlers.  A kind the server does not serve, or does not
let this client list (404, 403), sets ``missing`` until a list succeeds.
``on_list`` hears of every list once its objects have been handed on.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger(__name__)

Handler = Callable[[dict], None]


def key_of(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    def __init__(self, kind: str, list_fn: Callable[..., Any], *, on_upsert: Handler, on_delete: Handler,
                 resync: float = 600.0, watch_timeout: int = 300, list_kwargs: dict | None = None,
                 clock: Callable[[], float] = time.monotonic, max_backoff: float = 30.0,
                 on_list: Callable[[str], None] | None = None, type_meta: tuple[str, str] | None = None,
                 keep: Callable[[dict], bool] | None = None):
        self.kind = kind
        self.list_fn = list_fn
        self.list_kwargs = dict(list_kwargs or {})
        self.on_upsert, self.on_delete = on_upsert, on_delete
        self.resync, self.watch_timeout, self.max_backoff = resync, watch_timeout, max_backoff
        self.clock = clock
        self.on_list = on_list or (lambda kind: None)
        self.known: dict[str, dict] = {}  # key -> the object last handed on
        self.type_meta = type_meta  # (apiVersion, kind) put on objects that lack them (list items)
        self.keep = keep
        self.listeners: list[Callable[[str, dict], None]] = []  # ("upsert" | "delete", object) after the handlers
        self.missing = False  # the last list was refused as not served (404) or not allowed (403)
        self.resource_version = ""
        self.synced = threading.Event()
        self.lists = 0  # how many times it listed (first list, 410s, resyncs): for tests and metrics
        self._resp: Any = None  # the open watch response (urllib3's, as list_fn returns it unparsed)
        # inside a request not answered yet (a list and its body, a watch before its headers): nothing can
        # wake this thread there, so whoever stops it does not wait for it
        self.asking = False
        self._stop = threading.Event()

    # -- the loop -------------------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> None:
        """List and watch until ``stop`` (or :meth:`stop`); never raises."""
        stop = stop or self._stop
        failures = 0
        listed_at = None
        told_missing = False  # said once that the kind is not served: its retries are not news
        while not (stop.is_set() or self._stop.is_set()):
            try:
                if listed_at is None or self.clock() - listed_at >= self.resync:
                    self.relist()
                    listed_at = self.clock()
                    told_missing = False
                self.watch_once(stop)
                failures = 0
            except Gone:
                log.info("%s: watch from resourceVersion %s expired; listing again", self.kind, self.resource_version)
                listed_at = None
            except Exception as exc:  # the API server is away or refused: back off, keep what we have
                if stop.is_set() or self._stop.is_set():
                    break  # the stream was closed under us on the way out
                failures += 1
                delay = min(self.max_backoff, 0.2 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                missing = self.missing and isinstance(exc, ApiException)  # 404/403 to a list
                if missing and told_missing:
                    log.debug("%s: %s; retrying in %.1fs", self.kind, _describe(exc), delay)
                else:
                    log.warning("%s: %s; retrying in %.1fs%s", self.kind, _describe(exc), delay,
                                " (said once: the retries are logged at debug level)" if missing else "")
                told_missing = missing
                if stop.wait(delay) or self._stop.wait(0):
                    break
                if isinstance(exc, ApiException) and exc.status == 410:
                    listed_at = None

    def stop(self) -> None:
        """Stop now, whatever the watch is doing.

        A quiet watch (PriorityClasses, Queues: a bookmark a minute at best) has the informer thread
        blocked in ``recv`` holding the response's buffer lock, so closing the response from here would
        wait for the next byte.  Shutting the socket down instead ends that ``recv`` at once; the
        informer thread then closes the response itself.
        """
        self._stop.set()
        _shut(self._resp)

    def relist(self) -> None:
        """List everything and hand on only the differences from what was handed on before."""
        self.asking = True
        try:
            resp = self.list_fn(_preload_content=False, _request_timeout=(10.0, 120.0), **self.list_kwargs)
            data = resp.data
        except ApiException as exc:
            self.missing = exc.status in (403, 404)
            raise
        finally:
            self.asking = False
        self.missing = False
        if self._stop.is_set():  # answered after stop(): shutdown did not wait for it, and nothing is handed on
            return
        body = json.loads(data)
        self.lists += 1
        fresh = {key_of(obj): obj for obj in body.get("items") or []}
        for key in list(self.known):
            if key not in fresh:
                self._delete(self.known[key])
        for obj in fresh.values():
            self._upsert(obj)
        self.resource_version = (body.get("metadata") or {}).get("resourceVersion") or ""
        self.on_list(self.kind)  # after the list's objects are handed on: whoever hears it may count on them
        self.synced.set()

    def watch_once(self, stop: threading.Event) -> None:
        """Follow one watch stream from the current resourceVersion until it ends.

        The stream is read here rather than through the client's ``Watch``, whose
        raw mode fails on the very ``ERROR`` event (410) that says to list again.
        """
        # a read timeout past the server's own: a connection that went silent (a load balancer failing
        # over, a NAT entry dropped) ends the watch instead of hanging it for ever
        self.asking = True
        try:
            resp = self._resp = self.list_fn(watch=True, resource_version=self.resource_version,
                                             timeout_seconds=self.watch_timeout, allow_watch_bookmarks=True,
                                             _preload_content=False,
                                             _request_timeout=(10.0, self.watch_timeout + 30.0), **self.list_kwargs)
        finally:
            self.asking = False
        if self._stop.is_set():  # stopped while the watch was being opened: stop() saw no response yet
            _shut(resp)
        try:
            for line in iter_resp_lines(resp):
                if stop.is_set() or self._stop.is_set():
                    break
                event = json.loads(line)
                self.handle({"type": event.get("type"), "raw_object": event.get("object")})
        except ApiException as exc:
            if exc.status == 410:
                raise Gone from None
            raise
        finally:
            self._resp = None
            resp.close()
            resp.release_conn()

    def handle(self, event: dict) -> None:
        kind, obj = event.get("type"), event.get("raw_object") or event.get("object")
        if not isinstance(obj, dict):
            return
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone
            raise ApiException(status=obj.get("code") or 500, reason=obj.get("message") or "watch error")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        if kind == "DELETED":
            self._delete(obj)
        elif kind in ("ADDED", "MODIFIED"):
            self._upsert(obj)
        if rv:
            self.resource_version = rv

    # -- handing on -------------------------------------------------------------------------------
    def _upsert(self, obj: dict) -> None:
        if self.type_meta is not None:
            obj.setdefault("apiVersion", self.type_meta[0])
            obj.setdefault("kind", self.type_meta[1])
        if self.keep is not None and not self.keep(obj):
            self._delete(obj)  # not (or no longer) of interest: as if gone
            return
        key = key_of(obj)
        old = self.known.get(key)
        if old is not None and _version(old) == _version(obj) and _version(obj):
            return  # seen already (a relist, or a watch replaying what the list had)
        if old is not None and _uid(old) != _uid(obj):
            self._call(self.on_delete, old)  # deleted and recreated under the same name while we were away
            self._tell("delete", old)
        self.known[key] = obj
        self._call(self.on_upsert, obj)
        self._tell("upsert", obj)

    def _delete(self, obj: dict) -> None:
        key = key_of(obj)
        old = self.known.pop(key, None)
        if old is None:
            return  # never handed on (or already deleted): nothing to undo
        self._call(self.on_delete, old)
        self._tell("delete", old)

    def _tell(self, change: str, obj: dict) -> None:
        for listener in self.listeners:
            try:
                listener(change, obj)
            except Exception:
                log.exception("%s %s: listener failed", self.kind, key_of(obj))

    def _call(self, handler: Handler, obj: dict) -> None:
        try:
            handler(obj)
        except Exception:  # one bad object must not stop the informer
            log.exception("%s %s: handler failed", self.kind, key_of(obj))


def _shut(resp: Any) -> None:
    """Shut down the socket under an open watch response (urllib3's), unblocking a thread reading it."""
    if resp is None:
        return
    conn = getattr(resp, "_connection", None) or getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:  # the connection was handed back already: reach the socket through the reader
        reader = getattr(getattr(resp, "_fp", None), "fp", None)
        sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed meanwhile: nothing is waiting on it


def _version(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion") or ""


def _uid(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("uid") or ""


def _describe(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"API error {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"
