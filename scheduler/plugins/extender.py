"""extender: Volcano's HTTP scheduler extender — an outside service asked, over HTTP, for its opinion.

Configured as in Volcano::

    - name: extender
      arguments:
        extender.urlPrefix: http://127.0.0.1:8888
        extender.httpTimeout: 100ms          # each call's limit (default 1s)
        extender.predicateVerb: predicate    # POST {urlPrefix}/{verb}; a verb left unset is not asked
        extender.prioritizeVerb: prioritize
        extender.ignorable: true             # a failing extender is skipped instead of refusing
        extender.managedResources: [nvidia.com/gpu]   # ask only about pods requesting one of these

Every call is a POST of a JSON body whose shape follows Volcano's (``pkg/scheduler/plugins/extender/
argument.go``; Volcano's types serialise without JSON tags, so the scheduler's objects carry Go field
names: ``{"UID", "Name", "Namespace", "Resreq": {"MilliCPU", "Memory", "ScalarResources", "MaxTaskNum"},
"Status", "Pod": {...}}`` for a task, ``{"Name", "Node", "Idle", "Used", "Allocatable", ...}`` for a
node — extended resources in milli-units, the task status as Volcano's bit value).  Answers are read
as Go reads them, field names without regard to case:

==================  ==============================  ==========================================
verb                request                         answer
==================  ==============================  ==========================================
onSessionOpen       Jobs, Nodes, Queues, ...        (ignored)
onSessionClose      {}                              (ignored)
predicate           {task, node}                    {status: "<refusal, empty if none>", code}
prioritize          {task, nodes: [...]}            {nodeScore: {node: score}, errorMessage}
preemptable         {evictor, evictees: [...]}      {status: 1 permit / 0 abstain / -1, victims}
reclaimable         {evictor, evictees: [...]}      same as preemptable
queueOverused       {queue}                         {overused: bool}
jobEnqueueable      {job}                           {status: 1 / 0 / -1}
jobEnqueued         {job}                           (ignored)
jobReady            {job}                           {status: bool}
allocateFunc        {task}                          {errorMessage}
deallocateFunc      {task}                          {errorMessage}
==================  ==============================  ==========================================

A call fails when the service cannot be reached, takes longer than ``httpTimeout``, answers with a
status other than 200, or with something that is not the JSON object expected (or over 10 MiB).  A
failure is logged (once per verb and session, with a count at the end) and counted in the
scheduler's state for the plugin (``ssn.state("extender")``: ``failures`` by verb, ``skipped``).
Then, with ``ignorable: true``, the extender is skipped — its predicate admits, it has no
score, no victim opinion, no queue or job opinion; without it, the hook refuses and says why, naming
the extender: the predicate refuses the node, no victims, the queue is overused, the job is not
enqueued and not ready.  Once the service could not be reached (or timed out) in a session, later
calls in the same session fail at once instead of waiting again.

Where Scoria differs from Volcano, deliberately:

* a failing ``onSessionOpen`` of a non-ignorable extender makes its hooks refuse for that session;
  Volcano then leaves all of the extender's functions unregistered, as if it were not configured;
* an ignorable extender that fails is skipped (abstains) everywhere; Volcano answers "no victims"
  from a failing ignorable preemptable/reclaimable, "permit" from jobEnqueueable and "not ready"
  from jobReady (and "ready" from a failing non-ignorable one);
* ``allocateFunc``/``deallocateFunc`` answers are notifications only: Scoria's placement events
  cannot fail, so an error answer is logged and counted but does not undo the placement;
* prioritize scores are asked once per task and session and then only for nodes that changed
  (scores depend on the node alone, as every scoring plugin's here); a node's ``Tasks`` are not sent;
* an ``extender.urlPrefix`` that is not an http(s) URL, an unparsable ``httpTimeout`` and a bad verb
  are refused when the configuration is loaded (Volcano falls back to a 1s timeout, and fails each call).
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from proto.vocab.quantity import format_quantity
from scheduler.api.hierarchy import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION
from scheduler.framework.args import Arg, ArgError, Args
from scheduler.framework.plugin import ABSTAIN, PERMIT, Plugin, Vote, reject
from scheduler.framework.resources import CPU, EPS, MEMORY, PODS, ResourceIndex
from scheduler.framework.snapshot import JobInfo, QueueInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)

MAX_BODY = 10 << 20  # answers larger than this are refused, as Volcano's
WORKERS = 16  # predicate calls for the nodes of one task in parallel, as Volcano's predicate helper

# Volcano's TaskStatus values (a bit each)
_STATUS = {TaskStatus.PENDING: 1, TaskStatus.ALLOCATED: 2, TaskStatus.PIPELINED: 4, TaskStatus.RUNNING: 32,
           TaskStatus.RELEASING: 64, TaskStatus.SUCCEEDED: 128, TaskStatus.FAILED: 256}

# hook -> the verb argument that turns it on
_HOOK_VERB = {
    "predicate": "predicate", "predicate_reasons": "predicate", "node_order": "prioritize",
    "preemptable": "preemptable", "reclaimable": "reclaimable", "victim_key": None, "overused": "queue_overused",
    "job_enqueueable": "job_enqueueable", "job_enqueued": "job_enqueued", "job_ready": "job_ready",
    "on_allocate": "allocate_func", "on_deallocate": "deallocate_func",
}


class ExtenderError(Exception):
    """One failed call; ``transport`` when the service could not be reached or timed out."""

    def __init__(self, message: str, *, transport: bool = False):
        super().__init__(message)
        self.transport = transport


def _verb(key: str) -> Arg:
    return Arg(key, "str", "")


class Extender(Plugin):
    name = "extender"
    hooks = ("predicate", "predicate_reasons", "node_order", "preemptable", "reclaimable", "victim_key",
             "overused", "job_enqueueable", "job_enqueued", "job_ready", "on_allocate", "on_deallocate")
    arguments = {
        "url_prefix": Arg("extender.urlPrefix", "str", ""),
        "http_timeout": Arg("extender.httpTimeout", "duration", 1.0),
        "session_open": _verb("extender.onSessionOpenVerb"),
        "session_close": _verb("extender.onSessionCloseVerb"),
        "predicate": _verb("extender.predicateVerb"),
        "prioritize": _verb("extender.prioritizeVerb"),
        "preemptable": _verb("extender.preemptableVerb"),
        "reclaimable": _verb("extender.reclaimableVerb"),
        "queue_overused": _verb("extender.queueOverusedVerb"),
        "job_enqueueable": _verb("extender.jobEnqueueableVerb"),
        "job_enqueued": _verb("extender.jobEnqueuedVerb"),
        "job_ready": _verb("extender.jobReadyVerb"),
        "allocate_func": _verb("extender.allocateFuncVerb"),
        "deallocate_func": _verb("extender.deallocateFuncVerb"),
        "ignorable": Arg("extender.ignorable", "bool", False),
        "managed_resources": Arg("extender.managedResources", "list", ()),
    }

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        args = super().parse(raw)
        verbs = {attr: getattr(args, attr) for attr, arg in cls.arguments.items() if arg.key.endswith("Verb")}
        for attr, verb in verbs.items():
            if verb and (verb.strip() != verb or any(c.isspace() or ord(c) < 32 or c in "?#" for c in verb)):
                raise ArgError(f"argument {cls.arguments[attr].key!r}: {verb!r} is not a URL path segment")
        url = args.url_prefix
        if url or any(verbs.values()):
            problem = _url_problem(url)
            if problem:
                raise ArgError(f"argument 'extender.urlPrefix': {problem}")
        if not args.http_timeout > 0:
            raise ArgError(f"argument 'extender.httpTimeout': must be longer than 0, got {args.http_timeout!r}")
        return args

    def enabled(self, hook: str) -> bool:
        verb = _HOOK_VERB.get(hook)
        if hook == "victim_key":
            return bool(self.args.preemptable or self.args.reclaimable) and super().enabled(hook)
        if verb is not None and not getattr(self.args, verb):
            return False
        return super().enabled(hook)

    # -- session ---------------------------------------------------------------------------------
    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.index = ssn.index
        self.nodes = ssn.nodes
        self.url = self.args.url_prefix.rstrip("/")
        self.state = ssn.state(self.name)
        self.state.setdefault("failures", Counter())
        self.state.setdefault("skipped", 0)
        self.session_failures: Counter = Counter()
        self.unreachable: str | None = None  # set at the first transport failure: later calls fail at once
        self.down: str | None = None  # a non-ignorable onSessionOpen failed: every hook refuses with this
        self.managed = frozenset(self.args.managed_resources)
        self.verdicts: dict[int, dict[str, str | None]] = {}  # node -> task uid -> refusal (None: admitted)
        self.version = ssn.nodes.version
        self.pool: ThreadPoolExecutor | None = None
        if self.args.session_open:
            body = {"Jobs": {uid: self._job(job) for uid, job in ssn.jobs.items()},
                    "Nodes": {name: self._node(i) for i, name in enumerate(ssn.nodes.names)},
                    "Queues": {name: _queue(ssn.index, q) for name, q in ssn.queues.items()},
                    "NamespaceInfo": {}, "RevocableNodes": {}, "NodeList": None}
            try:
                self._send(self.args.session_open, body, expect=False)
            except ExtenderError as exc:
                if not self._failed(self.args.session_open, exc):
                    self.down = f"{self.args.session_open} failed: {exc}"

    def close(self, ssn: Session) -> None:
        if self.args.session_close:
            try:
                self._send(self.args.session_close, {}, expect=False)
            except ExtenderError as exc:
                self._failed(self.args.session_close, exc)
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        if self.session_failures:
            counts = ", ".join(f"{verb} {n}" for verb, n in sorted(self.session_failures.items()))
            log.warning("extender %s: calls failed this session: %s%s", self.url, counts,
                        " (skipped: extender.ignorable)" if self.args.ignorable else "")

    # -- calling -----------------------------------------------------------------------------------
    def _send(self, verb: str, body: dict, *, expect: bool = True) -> dict:
        """POST ``body`` to ``{urlPrefix}/{verb}``; the decoded answer (an object), or ExtenderError."""
        if self.unreachable is not None:
            raise ExtenderError(f"not asked again this session after: {self.unreachable}", transport=True)
        try:
            return _post(f"{self.url}/{verb}", body, self.args.http_timeout, expect)
        except ExtenderError as exc:
            if exc.transport and self.unreachable is None:
                self.unreachable = str(exc)
            raise

    def _failed(self, verb: str, exc: ExtenderError) -> bool:
        """Log and count a failed call; True when the extender is ignorable (skip it)."""
        self.state["failures"][verb] += 1
        if not self.session_failures[verb]:
            log.warning("extender %s: %s failed: %s%s", self.url, verb, exc,
                        " (skipped: extender.ignorable)" if self.args.ignorable else "")
        self.session_failures[verb] += 1
        if self.args.ignorable:
            self.state["skipped"] += 1
        return bool(self.args.ignorable)

    def _reason(self, verb: str, problem: str) -> str:
        return f"extender {self.url}: {verb} {problem}"

    def _ask(self, verb: str, body: dict) -> tuple[dict | None, str | None]:
        """The answer, or (None, None) to skip an ignorable failure, or (None, refusal)."""
        if self.down is not None:
            return None, f"extender {self.url}: {self.down}"
        try:
            return self._send(verb, body), None
        except ExtenderError as exc:
            if self._failed(verb, exc):
                return None, None
            return None, self._reason(verb, f"failed: {exc}")

    def _interested(self, task: TaskInfo) -> bool:
        """Whether the pod asks for a resource the extender manages (every pod when it names none)."""
        return not self.managed or any(name in self.managed for name in task.pod.requests)

    # -- predicate -----------------------------------------------------------------------------------
    def _verdicts_for(self, task: TaskInfo, nodes: np.ndarray) -> dict[int, str | None]:
        """The extender's refusal (None: admitted) of ``task`` on each node, asked once per node state."""
        version = self.nodes.version
        if version != self.version:
            for node in self.nodes.changed_since(self.version):
                self.verdicts.pop(int(node), None)
            self.version = version
        out: dict[int, str | None] = {}
        missing = []
        for node in nodes.tolist():
            known = self.verdicts.get(node)
            if known is not None and task.uid in known:
                out[node] = known[task.uid]
            else:
                missing.append(node)
        if missing:
            verb = self.args.predicate
            task_json = self._task(task)
            bodies = [{"task": task_json, "node": self._node(node)} for node in missing]
            if self.down is not None:
                answers: list[str | None] = [f"extender {self.url}: {self.down}"] * len(missing)
            elif len(missing) == 1:
                answers = [self._predicate_answer(verb, bodies[0])]
            else:
                if self.pool is None:
                    self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="extender")
                calls = list(self.pool.map(lambda body: self._predicate_call(verb, body), bodies))
                answers = [self._predicate_verdict(verb, answer) for answer in calls]
            for node, answer in zip(missing, answers, strict=True):
                self.verdicts.setdefault(node, {})[task.uid] = answer
                out[node] = answer
        return out

    def _predicate_call(self, verb: str, body: dict) -> dict | ExtenderError:
        try:
            return self._send(verb, body)
        except ExtenderError as exc:
            return exc

    def _predicate_verdict(self, verb: str, answer: dict | ExtenderError) -> str | None:
        if isinstance(answer, ExtenderError):
            return None if self._failed(verb, answer) else self._reason(verb, f"failed: {answer}")
        message = _field(answer, "status")
        if message is None or message == "":
            return None
        if not isinstance(message, str):
            return None if self._failed(verb, ExtenderError(f"status is not a string: {message!r}")) else \
                self._reason(verb, f"failed: status is not a string: {message!r}")
        return f"extender: {message}"

    def _predicate_answer(self, verb: str, body: dict) -> str | None:
        return self._predicate_verdict(verb, self._predicate_call(verb, body))

    def _asked(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        """The nodes worth asking about: those where the task's request fits ``avail`` (others are refused
        by the resource check anyway)."""
        if avail is None:
            return np.arange(self.nodes.count)
        cols = task.cols
        fits = (avail[cols] >= task.req[cols, None] - EPS).all(axis=0)
        return np.flatnonzero(fits)

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        mask = np.ones(self.nodes.count, dtype=bool)
        if not self._interested(task):
            return mask
        for node, refusal in self._verdicts_for(task, self._asked(task, avail)).items():
            if refusal is not None:
                mask[node] = False
        return mask

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        if not self._interested(task):
            return reasons
        asked = self._asked(task, avail)
        asked = asked[among[asked]]
        for refusal in self._verdicts_for(task, asked).values():
            if refusal is not None:
                reasons[refusal] += 1
        return reasons

    # -- prioritize ------------------------------------------------------------------------------------
    def score_key(self, task: TaskInfo) -> str:
        return task.uid  # a node's score depends on that node: asked again only for nodes that changed

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        if not self._interested(task):
            return None
        chosen = np.arange(self.nodes.count) if nodes is None else nodes
        verb = self.args.prioritize
        answer, refusal = self._ask(verb, {"task": self._task(task),
                                           "nodes": [self._node(int(i)) for i in chosen]})
        if answer is None:
            if refusal is not None:  # scores cannot refuse: no opinion, logged and counted above
                log.debug("%s", refusal)
            return None
        scores = _field(answer, "nodeScore")
        message = _field(answer, "errorMessage")
        problem = None
        if message:
            problem = f"answered an error: {message}"
        elif not isinstance(scores, dict):
            problem = f"nodeScore is not an object: {scores!r}"
        elif not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                     for v in scores.values()):
            problem = "nodeScore has a value that is not a finite number"
        if problem is not None:
            self._failed(verb, ExtenderError(problem))
            return None
        assert isinstance(scores, dict)
        names = self.nodes.names
        return np.array([float(scores.get(names[int(i)], 0.0)) for i in chosen])

    # -- victims -----------------------------------------------------------------------------------------
    def victim_key(self, preemptor: TaskInfo) -> str:
        return preemptor.uid  # the extender sees the whole preemptor

    def _victims(self, verb: str, evictor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
        if not self._interested(evictor):
            return None
        answer, refusal = self._ask(verb, {"evictor": self._task(evictor),
                                           "evictees": [self._task(t) for t in candidates]})
        if answer is None:
            return None if refusal is None else []
        status = _field(answer, "status")
        if status == 0:
            return None
        victims = _field(answer, "victims") or []
        if not isinstance(status, int) or isinstance(status, bool) or not isinstance(victims, list):
            skip = self._failed(verb, ExtenderError(f"unexpected answer: status {status!r}, victims "
                                                    f"{type(victims).__name__}"))
            return None if skip else []
        chosen = {_field(v, "uid") for v in victims if isinstance(v, dict)}
        return [t for t in candidates if t.uid in chosen]

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
        return self._victims(self.args.preemptable, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
        return self._victims(self.args.reclaimable, reclaimer, candidates)

    # -- queues and jobs ---------------------------------------------------------------------------------
    def overused(self, queue: QueueInfo) -> str | None:
        verb = self.args.queue_overused
        answer, refusal = self._ask(verb, {"queue": _queue(self.index, queue)})
        if answer is None:
            return refusal
        overused = _field(answer, "overused")
        if not isinstance(overused, bool) and overused is not None:
            return None if self._failed(verb, ExtenderError(f"overused is not a boolean: {overused!r}")) else \
                self._reason(verb, f"failed: overused is not a boolean: {overused!r}")
        return self._reason(verb, f"says queue {queue.name} is overused") if overused else None

    def job_enqueueable(self, job: JobInfo) -> Vote:
        verb = self.args.job_enqueueable
        answer, refusal = self._ask(verb, {"job": self._job(job)})
        if answer is None:
            return ABSTAIN if refusal is None else reject(refusal)
        status = _field(answer, "status")
        if status == 1 and not isinstance(status, bool):
            return PERMIT
        if status == -1:
            return reject(self._reason(verb, f"refused job {job.uid}"))
        return ABSTAIN

    def job_enqueued(self, job: JobInfo) -> None:
        if self.down is None:
            self._notify(self.args.job_enqueued, {"job": self._job(job)})

    def job_ready(self, job: JobInfo) -> bool:
        verb = self.args.job_ready
        answer, refusal = self._ask(verb, {"job": self._job(job)})
        if answer is None:
            return refusal is None
        status = _field(answer, "status")
        if not isinstance(status, bool):
            return self._failed(verb, ExtenderError(f"status is not a boolean: {status!r}"))
        return status

    def on_allocate(self, task: TaskInfo) -> None:
        if self.down is None and self._interested(task):
            self._notify(self.args.allocate_func, {"task": self._task(task)})

    def on_deallocate(self, task: TaskInfo) -> None:
        if self.down is None and self._interested(task):
            self._notify(self.args.deallocate_func, {"task": self._task(task)})

    def _notify(self, verb: str, body: dict) -> None:
        try:
            answer = self._send(verb, body)
        except ExtenderError as exc:
            self._failed(verb, exc)
            return
        message = _field(answer, "errorMessage")
        if message:
            self._failed(verb, ExtenderError(f"answered an error (the placement stands): {message}"))

    # -- Volcano's shapes ----------------------------------------------------------------------------
    def _task(self, task: TaskInfo, *, pod: bool = True) -> dict:
        out: dict[str, Any] = {
            "UID": task.uid, "Job": task.job.uid, "Name": task.pod.name, "Namespace": task.pod.namespace,
            "TaskRole": task.pod.annotations.get("volcano.sh/task-spec", ""),
            "Resreq": _resource(self.index, task.req), "InitResreq": _resource(self.index, task.req),
            "NodeName": self.nodes.names[task.node] if task.node >= 0 else task.pod.node_name,
            "Status": _STATUS.get(task.status, 512), "Priority": task.priority,
            "Preemptable": bool(getattr(task.pod, "preemptable", True)), "BestEffort": task.best_effort,
        }
        if pod:
            out["Pod"] = _pod(task)
        return out

    def _job(self, job: JobInfo) -> dict:
        request = self.index.zeros()
        for task in job.tasks.values():
            request = request + task.req
        group = job.group
        return {
            "UID": job.uid, "Name": job.name, "Namespace": job.namespace, "Queue": job.queue,
            "Priority": job.priority, "MinAvailable": job.min_member,
            "Tasks": {t.uid: self._task(t, pod=False) for t in job.tasks.values()},
            "Allocated": _resource(self.index, job.allocated), "TotalRequest": _resource(self.index, request),
            "PodGroup": None if group is None else {
                "metadata": {"name": group.name, "namespace": group.namespace, "annotations": dict(group.annotations)},
                "spec": {"minMember": group.min_member, "queue": group.queue,
                         "priorityClassName": group.priority_class_name,
                         **({"minResources": _quantities(group.min_resources)} if group.min_resources else {})},
                "status": {"phase": job.phase}},
        }

    def _node(self, i: int) -> dict:
        node, t = self.nodes.nodes[i], self.nodes
        return {
            "Name": node.name,
            "Node": {"metadata": {"name": node.name, "labels": dict(node.labels), "annotations": dict(node.annotations)},
                     "spec": {"unschedulable": node.unschedulable,
                              "taints": [{"key": x.key, "value": x.value, "effect": x.effect} for x in node.taints]},
                     "status": {"allocatable": _quantities(node.allocatable), "capacity": _quantities(node.allocatable)}},
            "State": {"Phase": "NotReady" if node.unschedulable else "Ready"},
            "Idle": _resource(self.index, t.idle[:, i]), "Used": _resource(self.index, t.used[:, i]),
            "Releasing": _resource(self.index, t.releasing[:, i]), "Pipelined": _resource(self.index, t.pipelined[:, i]),
            "Allocatable": _resource(self.index, t.alloc[:, i]), "Capacity": _resource(self.index, t.alloc[:, i]),
        }


def _url_problem(url: str) -> str | None:
    if not url:
        return "missing: the verbs are asked at this http:// or https:// address"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{url!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"expected an http:// or https:// URL with a host, got {url!r}"
    if parts.query or parts.fragment or parts.username or parts.password:
        return f"{url!r}: a query, fragment or credentials cannot be part of the prefix the verbs are appended to"
    if port == 0:
        return f"{url!r}: port 0"
    return None


def _post(url: str, body: dict, timeout: float, expect: bool) -> dict:
    """One POST with ``timeout`` seconds in all; the answer's JSON object."""
    parts = urlsplit(url)
    data = json.dumps(body, separators=(",", ":")).encode()
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    start = time.monotonic()
    conn = conn_class(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.request("POST", parts.path or "/", body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = resp.read(MAX_BODY + 1)
    except TimeoutError:
        raise ExtenderError(f"no answer from {url} within {timeout:g}s", transport=True) from None
    except (OSError, http.client.HTTPException) as exc:
        raise ExtenderError(f"cannot reach {url}: {exc}", transport=True) from None
    finally:
        conn.close()
    if time.monotonic() - start > timeout:
        raise ExtenderError(f"no complete answer from {url} within {timeout:g}s", transport=True)
    if resp.status != 200:
        raise ExtenderError(f"{url} answered HTTP {resp.status}")
    if len(payload) > MAX_BODY:
        raise ExtenderError(f"{url} answered more than {MAX_BODY >> 20} MiB")
    if not expect:
        return {}
    try:
        answer = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ExtenderError(f"{url} answered something that is not JSON: {exc}") from None
    if not isinstance(answer, dict):
        raise ExtenderError(f"{url} answered {type(answer).__name__} JSON, expected an object")
    return answer


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` matching the key without regard to case, as Go's JSON decoder; None if absent."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lower:
            return value
    return None


def _resource(index: ResourceIndex, vec: np.ndarray) -> dict:
    """Volcano's Resource: millicores, bytes, the pod count, other resources in milli-units."""
    scalars: dict[str, float] = {}
    for col in np.flatnonzero(vec):
        c = int(col)
        if c in (CPU, MEMORY):
            continue
        value = float(vec[c])
        if math.isfinite(value):
            scalars[index.names[c]] = value if c == PODS else value * 1000
    pods = float(vec[PODS]) if math.isfinite(float(vec[PODS])) else 0.0
    cpu, memory = float(vec[CPU]), float(vec[MEMORY])
    return {"MilliCPU": cpu if math.isfinite(cpu) else 0.0, "Memory": memory if math.isfinite(memory) else 0.0,
            "ScalarResources": scalars, "MaxTaskNum": int(pods)}


def _quantities(amounts: dict[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in amounts.items()}


def _pod(task: TaskInfo) -> dict:
    pod = task.pod
    spec: dict[str, Any] = {
        "schedulerName": pod.scheduler_name, "nodeName": pod.node_name, "priorityClassName": pod.priority_class_name,
        "containers": [{"name": "main", "resources": {"requests": _quantities(pod.requests)}}],
    }
    if pod.priority is not None:
        spec["priority"] = pod.priority
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                                   ("effect", t.effect)) if v} for t in pod.tolerations]
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "labels": dict(pod.labels),
                         "annotations": dict(pod.annotations)},
            "spec": spec, "status": {"phase": pod.phase}}


def _queue(index: ResourceIndex, queue: QueueInfo) -> dict:
    q = queue.queue
    return {
        "UID": q.name, "Name": q.name, "Weight": q.weight,
        "Hierarchy": q.annotations.get(HIERARCHY_ANNOTATION, ""),
        "Weights": q.annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, ""),
        "Queue": {"metadata": {"name": q.name, "annotations": dict(q.annotations)},
                  "spec": {"weight": q.weight, "capability": _quantities(q.capability),
                           "deserved": _quantities(q.deserved), "guarantee": {"resource": _quantities(q.guarantee)},
                           "reclaimable": q.reclaimable, "parent": q.parent},
                  "status": {"state": q.state}},
    }
