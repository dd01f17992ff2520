"""Volcano Jobs in embedded mode: admission at apply, and the controllers running beside the scheduler.

* **Apply** (:meth:`EmbeddedControllers.admit`): a ``batch.volcano.sh`` Job is admitted as Volcano's
  webhook admits it, against the queues and priority classes the cluster has (an update as Volcano lets a
  Job change); a ``bus.volcano.sh`` Command must name a Job that exists; a ConfigMap or Secret is checked
  for what a pod reads of it.  A refused object is one ManifestError naming the field; nothing of the
  apply is stored.  What is stored is as given: the controller fills in Volcano's defaults when it reads.
* **The loop** (:meth:`EmbeddedControllers.run`, its own thread): one
  :class:`~scheduler.controllers.loop.ControllerLoop` over the :class:`~.jobhost.StoreHost`, reconciled
  when something may have changed — an apply or delete (noted), a cycle that bound, evicted or changed a
  phase (the cache's generation moves), a container starting or ending on a node (noted) — a little
  later to gather what comes together (:data:`DEBOUNCE_S`), again at once after a reconcile that wrote
  (it sees its own writes as changes, as Volcano does watch events), and at the loop's ``wake_at``
  (policy timeouts, ``ttlSecondsAfterFinished``).  Each reconcile's writes are one store transaction.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scheduler.api.manifests import ManifestError, object_id
from scheduler.api.objects import DEFAULT_QUEUE, PriorityClass, Queue
from scheduler.controllers.host import rfc3339
from scheduler.controllers.jobs.admission import (
    AdmissionContext,
    QueueFacts,
    admit_command,
    admit_job,
    admit_job_update,
)
from scheduler.controllers.jobs.controller import Settings
from scheduler.controllers.kinds import COMMAND, CONFIGMAP, JOB, SECRET
from scheduler.controllers.loop import ControllerLoop
from scheduler.controllers.podgroups import PodGroupSettings
from scheduler.controllers.sshkeys import ssh_keygen
from scheduler.modes.embedded.jobhost import STORE_KINDS, StoreHost
from scheduler.modes.embedded.store import Stored

if TYPE_CHECKING:
    from scheduler.modes.embedded.mode import Embedded

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.02     # what arrives this close together is reconciled once
IDLE_CHECK_S = 0.25   # how often the cache's generation is looked at when nothing was noted
YIELD_S = 2.0         # the longest a look at our own writes waits for a scheduling cycle to end
#: the kinds apply hands to the controllers, by (apiVersion, kind)
APPLIED = {(JOB.api_version, JOB.kind): JOB, (COMMAND.api_version, COMMAND.kind): COMMAND,
           (CONFIGMAP.api_version, CONFIGMAP.kind): CONFIGMAP, (SECRET.api_version, SECRET.kind): SECRET}


def is_controller_kind(doc: Any) -> bool:
    return isinstance(doc, dict) and (str(doc.get("apiVersion")), str(doc.get("kind"))) in APPLIED


class EmbeddedControllers:
    def __init__(self, embedded: Embedded, *, scheduler_name: str = "scoria",
                 key_pair: Callable[[], tuple[str, str]] = ssh_keygen) -> None:
        self.embedded = embedded
        self.host = StoreHost(embedded)
        self.scheduler_name = scheduler_name
        self.key_pair = key_pair
        self.loop = ControllerLoop(Settings(scheduler_name=scheduler_name, key_pair=key_pair),
                                   PodGroupSettings(scheduler_names=frozenset({scheduler_name})))
        self.reconciles = 0
        self.cpu_seconds = 0.0  # the controllers' thread's CPU time in reconciles (hack/bench/jobs.py reads it)
        self._thread: threading.Thread | None = None

    def configure(self, *, scheduler_names: frozenset[str], wait_for_admission: bool) -> None:
        """What the scheduler runs with: its names (a Job naming none gets the first) and whether its
        configuration admits PodGroups (an ``enqueue`` action; without one, pods are made at once)."""
        self.scheduler_name = sorted(scheduler_names)[0] if scheduler_names else "scoria"
        self.loop.settings = Settings(scheduler_name=self.scheduler_name, wait_for_admission=wait_for_admission,
                                      key_pair=self.key_pair)
        self.loop.podgroups = PodGroupSettings(scheduler_names=scheduler_names)

    # -- apply ---------------------------------------------------------------------------------------
    def admit(self, doc: dict, source: str, *, queues: Collection[Queue] = (),
              priority_classes: Collection[PriorityClass] = (), jobs: Collection[str] = ()) -> Stored:
        """The object to store for an applied Job, Command, ConfigMap or Secret; ManifestError when refused.
        The caller holds the cache lock (queues and priority classes are read from it); ``queues``,
        ``priority_classes`` and ``jobs`` (namespace/name) are applied in the same request."""
        kind = APPLIED[(doc["apiVersion"], doc["kind"])]
        meta = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        key = f"{namespace}/{name}"
        old = self.embedded.store.get(STORE_KINDS[kind], key)
        if kind == JOB:
            context = self._context(queues, priority_classes)
            if old is None:
                admit_job(doc, source, context)
            else:
                admit_job_update(old.manifest, doc, source, context)
        elif kind == COMMAND:
            command = admit_command(doc, source)
            target = f"{namespace}/{command.target_name}"
            if target not in jobs and self.embedded.store.get("Job", target) is None:
                raise ManifestError(source, object_id(doc), f"target.name: Job {namespace}/{command.target_name} "
                                                            "not found")
        else:
            _check_data(doc, source, secret=kind == SECRET)
        doc.setdefault("metadata", {})["namespace"] = namespace
        if old is None:
            import uuid
            doc["metadata"]["uid"] = doc["metadata"].get("uid") or str(uuid.uuid4())
            doc["metadata"].setdefault("creationTimestamp", rfc3339(datetime.now(UTC)))
        else:
            for field in ("uid", "creationTimestamp"):
                if field in (old.manifest.get("metadata") or {}):
                    doc["metadata"][field] = old.manifest["metadata"][field]
        return Stored(STORE_KINDS[kind], key, doc, old.status if old is not None else {})

    def _context(self, applied: Collection[Queue], classes: Collection[PriorityClass]) -> AdmissionContext:
        cache = self.embedded.cache
        every = {**cache.queues, **{q.name: q for q in applied}}
        queues = {name: QueueFacts(q.state, sum(1 for o in every.values() if o.parent == name))
                  for name, q in every.items()}
        queues.setdefault(DEFAULT_QUEUE, QueueFacts())
        return AdmissionContext(queues=queues, priority_classes=set(cache.priority_classes) | {c.name for c in classes},
                                scheduler_name=self.scheduler_name)

    # -- the loop ------------------------------------------------------------------------------------
    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="controllers", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def kick(self) -> None:
        """Something the controllers read changed (any thread): reconcile soon."""
        self.host._changed.set()

    def run(self, stop: threading.Event) -> None:
        generation = -1
        wake_at: float | None = None
        again = True
        while not stop.is_set():
            timeout = IDLE_CHECK_S if wake_at is None else max(0.0, min(IDLE_CHECK_S, wake_at - time.time()))
            noted = again or self.host._changed.wait(timeout)
            if stop.is_set():
                return
            due = wake_at is not None and time.time() >= wake_at
            moved = self.embedded.cache.generation != generation
            if not (noted or due or moved):
                continue
            time.sleep(DEBOUNCE_S)
            if again and not self.host._changed.is_set():
                self._after_scheduling(stop)
            self.host._changed.clear()
            generation = self.embedded.cache.generation
            try:
                writes, wake_at = self.reconcile_once()
            except Exception:  # a bug, or the store failing: look again from scratch shortly
                log.exception("Volcano Job controllers: reconcile failed")
                self.loop.memory.clear()
                self.loop.seen.clear()
                wake_at, writes = time.time() + 1.0, 0
            again = writes > 0

    def _after_scheduling(self, stop: threading.Event) -> None:
        """Before looking at our own writes again: while a scheduling cycle is coming or running (the pods just
        made woke it), wait for its end — at most :data:`YIELD_S`, and not past any other change noted."""
        deadline = time.monotonic() + YIELD_S
        scheduling = self.embedded.cache.scheduling
        while scheduling.is_set() and not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self.host._changed.wait(min(left, 0.01)):
                return

    def reconcile_once(self) -> tuple[int, float | None]:
        """One reconcile, committed; (writes, when to look again)."""
        began = time.thread_time()
        self.host.sync()
        try:
            result = self.loop.reconcile(self.host, datetime.now(UTC))
            collected = self.host.collect_garbage()
            writes = self.host.commit()
        except BaseException:
            self.host.discard()
            raise
        finally:
            self.reconciles += 1
            self.cpu_seconds += time.thread_time() - began
        return writes + collected, result.wake_at


def _check_data(doc: dict, source: str, *, secret: bool) -> None:
    """A ConfigMap's ``data`` and ``binaryData`` or a Secret's ``data`` (base64) and ``stringData`` (folded into
    ``data`` as the API server does) as a pod reads them."""
    where = object_id(doc)
    if secret and isinstance(doc.get("stringData"), dict):
        data = doc.setdefault("data", {}) if isinstance(doc.get("data"), dict | None) else doc["data"]
        if data is None:
            data = doc["data"] = {}
        for key, value in doc.pop("stringData").items():
            if not isinstance(value, str):
                raise ManifestError(source, where, f"stringData.{key}: must be a string")
            data[key] = base64.b64encode(value.encode()).decode()
    for section, encoded in (("data", secret), ("binaryData", True)):
        values = doc.get(section)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ManifestError(source, where, f"{section}: must be a mapping of keys to strings")
        for key, value in values.items():
            if not isinstance(value, str):
                raise ManifestError(source, where, f"{section}.{key}: must be a string")
            if encoded:
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    raise ManifestError(source, where, f"{section}.{key}: not base64") from None
