"""``python -m scheduler job|queue ...``: vcctl's commands, words and flags, so habits carry over.

::

    job run -f FILE | -N NAME [-i IMAGE -r REPLICAS -m MIN -R REQUESTS -L LIMITS -S SCHEDULER] [-n NS]
    job list [-n NS | --all-namespaces] [-S SCHEDULER] [--selector TEXT]
    job view|suspend|resume|delete -N NAME [-n NS]
    queue create -n NAME [-w WEIGHT] [-S Open|Closed]
    queue get -n NAME  |  queue list
    queue operate -n NAME -a open|close|delete|update [-w WEIGHT]

Against a cluster with ``--kubeconfig FILE`` (:class:`scheduler.modes.kubernetes.vcclient.KubeBackend`), else
against the embedded scheduler's control socket ``--server`` (``scheduler.modes.embedded.vcclient``).  A Job is
checked as Volcano's admission would before it is sent (against the backend's queues), so a refusal names the
field and nothing is stored; ``suspend`` and ``resume`` send the Command vcctl sends; a Queue is deleted only
once closed, never ``default``.  ``job list`` prints vcctl's columns.

Exit status: 0; 1 for what the backend refuses or cannot do (not found, exists already, unreachable); 2 for
bad input (a flag, a file, a Job admission refuses).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from proto.errors import InputError
from scheduler.api.loader import iter_documents
from scheduler.api.manifests import ManifestError
from scheduler.controllers.jobs.admission import AdmissionContext, QueueFacts, admit_job
from scheduler.controllers.jobs.spec import JOB_API
from scheduler.controllers.kinds import meta, name_of, part
from scheduler.controllers.vcctl import (
    DEFAULT_QUEUE,
    QUEUE_STATES,
    RESUME,
    SUSPEND,
    Backend,
    VcctlError,
    check_queue_deletable,
    job_command,
    job_row,
    queue_manifest,
)
from scheduler.modes.table import text_table

DEFAULT_SERVER = "unix:///var/lib/scoria/control.sock"
COMMANDS = ("job", "queue")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def backend(p: argparse.ArgumentParser) -> None:
        p.add_argument("-k", "--kubeconfig", metavar="FILE",
                       help="talk to this cluster's API server (a Kubernetes-mode Scoria) instead of the embedded "
                            "scheduler")
        p.add_argument("--server", default=os.environ.get("SCORIA_SERVER") or DEFAULT_SERVER,
                       metavar="unix:///PATH/control.sock",
                       help="the embedded scheduler's control socket (default $SCORIA_SERVER or %(default)s)")

    job = sub.add_parser("job", help="Volcano Jobs, as vcctl job: run, list, view, suspend, resume, delete")
    jobs = job.add_subparsers(dest="action", required=True)
    p = jobs.add_parser("run", help="create a Job from a file, or a one-task Job from flags")
    p.add_argument("-f", "--filename", metavar="FILE", help="the Job's YAML (or JSON)")
    p.add_argument("-N", "--name", help="the Job's name (required without -f)")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-i", "--image", default="busybox")
    p.add_argument("-m", "--min", type=int, default=1, help="minAvailable (default 1)")
    p.add_argument("-r", "--replicas", type=int, default=1, help="replicas of its one task (default 1)")
    p.add_argument("-R", "--requests", default="cpu=1000m,memory=100Mi", metavar="NAME=QUANTITY,...")
    p.add_argument("-L", "--limits", default="cpu=1000m,memory=100Mi", metavar="NAME=QUANTITY,...")
    p.add_argument("-S", "--scheduler", default="scoria", help="spec.schedulerName (default scoria)")
    backend(p)
    p = jobs.add_parser("list", help="the Jobs of a namespace, with vcctl's columns")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("--all-namespaces", action="store_true")
    p.add_argument("-S", "--scheduler", default="", help="only Jobs naming this scheduler")
    p.add_argument("--selector", default="", help="only Jobs whose name contains this")
    backend(p)
    for action, text in (("view", "one Job in detail, with its events"), ("suspend", "abort a Job's pods (AbortJob)"),
                         ("resume", "run an aborted Job again (ResumeJob)"),
                         ("delete", "delete a Job; its pods and objects go with it")):
        p = jobs.add_parser(action, help=text)
        p.add_argument("-N", "--name", required=True)
        p.add_argument("-n", "--namespace", default="default")
        backend(p)

    queue = sub.add_parser("queue", help="Volcano Queues, as vcctl queue: create, get, list, operate")
    queues = queue.add_subparsers(dest="action", required=True)
    p = queues.add_parser("create", help="a Queue with a weight and a state")
    p.add_argument("-n", "--name", required=True)
    p.add_argument("-w", "--weight", type=int, default=1)
    p.add_argument("-S", "--state", default="Open", choices=("Open", "Closed"))
    backend(p)
    p = queues.add_parser("get", help="one Queue")
    p.add_argument("-n", "--name", required=True)
    backend(p)
    p = queues.add_parser("list", help="every Queue")
    backend(p)
    p = queues.add_parser("operate", help="open, close or delete a Queue, or update its weight")
    p.add_argument("-n", "--name", required=True)
    p.add_argument("-a", "--action", dest="operation", required=True, choices=("open", "close", "delete", "update"))
    p.add_argument("-w", "--weight", type=int, default=0, help="the new weight (update)")
    backend(p)


def connect(args: argparse.Namespace) -> Backend:
    """The backend the flags name: a cluster (``--kubeconfig``) or the embedded scheduler (``--server``)."""
    if args.kubeconfig:
        from scheduler.modes.kubernetes.mode import api_client
        from scheduler.modes.kubernetes.vcclient import KubeBackend
        return KubeBackend(api_client(kubeconfig=args.kubeconfig))
    try:
        module = importlib.import_module("scheduler.modes.embedded.vcclient")
    except ImportError:
        raise VcctlError("this build has no embedded backend for job and queue: give --kubeconfig") from None
    backend: Backend = module.EmbeddedBackend(args.server)
    return backend


def run(args: argparse.Namespace, backend: Backend | None = None) -> int:
    """One command; its exit status.  InputError (bad input) is left to the caller (exit 2)."""
    try:
        backend = backend or connect(args)
        if args.command == "job":
            return JOB_ACTIONS[args.action](args, backend)
        return QUEUE_ACTIONS[args.action](args, backend)
    except VcctlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status


# -- job -------------------------------------------------------------------------------------------------
def job_run(args: argparse.Namespace, backend: Backend) -> int:
    if args.filename:
        doc, source = read_job(args.filename)
        doc.setdefault("metadata", {}).setdefault("namespace", args.namespace)
    elif not args.name:
        raise InputError("job run: give --name (and the flags of its one task) or --filename")
    else:
        doc, source = flag_job(args), "job run"
    context = AdmissionContext(queues=queue_facts(backend.list_queues()), scheduler_name=args.scheduler)
    admit_job(doc, source, context)  # what Volcano's webhook would refuse is refused here, naming the field
    made = backend.create_job(doc)
    print(f"run job {name_of(made) or name_of(doc)} successfully")
    return 0


def read_job(filename: str) -> tuple[dict, str]:
    """The one Job a file holds (vcctl reads one)."""
    from pathlib import Path

    docs = [(d, where) for d, where in iter_documents(Path(filename)) if d is not None]
    if len(docs) != 1:
        raise InputError(f"{filename}: expected one Job, found {len(docs)} document(s)")
    doc, where = docs[0]
    if not isinstance(doc, dict) or doc.get("kind") != "Job" or doc.get("apiVersion") != JOB_API:
        raise ManifestError(where, "", f"expected a Job of apiVersion {JOB_API}")
    return doc, where


def flag_job(args: argparse.Namespace) -> dict:
    """The Job vcctl's ``job run`` makes from flags: one task named after the Job, one container, never restarted."""
    resources = {k: v for k, v in (("requests", resource_list(args.requests, "--requests")),
                                   ("limits", resource_list(args.limits, "--limits"))) if v}
    container = {"name": args.name, "image": args.image, "imagePullPolicy": "IfNotPresent", "resources": resources}
    template = {"metadata": {"name": args.name, "labels": {"job.volcano.sh": args.name}},
                "spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"apiVersion": JOB_API, "kind": "Job", "metadata": {"name": args.name, "namespace": args.namespace},
            "spec": {"minAvailable": args.min, "schedulerName": args.scheduler,
                     "tasks": [{"name": args.name, "replicas": args.replicas, "template": template}]}}


def resource_list(text: str, flag: str) -> dict[str, str]:
    """``cpu=1000m,memory=100Mi`` as a resource list (vcctl's populateResourceListV1)."""
    from proto.vocab.quantity import parse_quantity

    out: dict[str, str] = {}
    for statement in [s for s in text.split(",") if s.strip()]:
        name, sep, value = statement.partition("=")
        if not sep or not name.strip() or "=" in value:
            raise InputError(f"{flag}: invalid argument syntax {statement!r}, expected <resource>=<value>")
        try:
            parse_quantity(value.strip())
        except ValueError as exc:
            raise InputError(f"{flag}: {name.strip()}={value.strip()}: {exc}") from None
        out[name.strip()] = value.strip()
    return out


def queue_facts(queues: list[dict]) -> dict[str, QueueFacts]:
    facts = {name_of(q): QueueFacts(state=str(part(q, "status").get("state") or "Open"),
                                    children=sum(1 for o in queues if part(o, "spec").get("parent") == name_of(q)))
             for q in queues}
    facts.setdefault(DEFAULT_QUEUE, QueueFacts())  # Scoria's implicit default queue
    return facts


def job_list(args: argparse.Namespace, backend: Backend) -> int:
    jobs = backend.list_jobs(None if args.all_namespaces else args.namespace)
    rows = [job_row(j) for j in jobs
            if (not args.scheduler or part(j, "spec").get("schedulerName") == args.scheduler)
            and args.selector in name_of(j)]
    if not rows:
        print("No resources found")
        return 0
    header: tuple[str, ...] = ("Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running",
                               "Succeeded", "Failed", "Unknown", "RetryCount")
    keys: tuple[str, ...] = ("name", "creation", "phase", "jobType", "replicas", "minAvailable", "pending", "running",
                             "succeeded", "failed", "unknown", "retryCount")
    if args.all_namespaces:
        header, keys = ("Namespace", *header), ("namespace", *keys)
    print(text_table([header] + [tuple(str(r[k]) for k in keys) for r in rows]))
    return 0


def job_view(args: argparse.Namespace, backend: Backend) -> int:
    job = backend.get_job(args.namespace, args.name)
    print(describe_job(job, backend.job_events(args.namespace, args.name)))
    return 0


def describe_job(job: dict, events: list[dict]) -> str:
    m, spec, status = meta(job), part(job, "spec"), part(job, "status")
    lines = [f"Name:         {name_of(job)}", f"Namespace:    {m.get('namespace', 'default')}",
             f"Labels:       {_pairs(m.get('labels'))}", f"Annotations:  {_pairs(m.get('annotations'))}",
             f"API Version:  {job.get('apiVersion', JOB_API)}", "Kind:         Job",
             f"Created:      {m.get('creationTimestamp', '')}", f"UID:          {m.get('uid', '')}", "Spec:",
             f"  Min Available:   {spec.get('minAvailable', '')}", f"  Queue:           {spec.get('queue') or 'default'}",
             f"  Scheduler Name:  {spec.get('schedulerName', '')}", f"  Max Retry:       {spec.get('maxRetry', 3)}",
             f"  Plugins:         {', '.join(sorted(spec.get('plugins') or {})) or '<none>'}", "  Tasks:"]
    for task in spec.get("tasks") or []:
        if isinstance(task, dict):
            lines.append(f"    {task.get('name', '')}: replicas {task.get('replicas', 0)}, minAvailable "
                         f"{task.get('minAvailable', task.get('replicas', 0))}")
    state = part(status, "state")
    lines += ["Status:", f"  Phase:           {state.get('phase', '')}"
                         + (f" ({state['reason']})" if state.get("reason") else ""),
              f"  Since:           {state.get('lastTransitionTime', '')}"]
    for key, label in (("minAvailable", "Min Available"), ("pending", "Pending"), ("running", "Running"),
                       ("succeeded", "Succeeded"), ("failed", "Failed"), ("terminating", "Terminating"),
                       ("unknown", "Unknown"), ("retryCount", "Retry Count"), ("version", "Version")):
        lines.append(f"  {label + ':':<17}{status.get(key, 0)}")
    lines.append("Events:")
    if events:
        table = text_table([("Type", "Reason", "Time", "Message")]
                           + [(e["type"], e["reason"], e["time"], e["message"]) for e in events])
        lines += ["  " + line for line in table.splitlines()]
    else:
        lines.append("  <none>")
    return "\n".join(lines)


def _pairs(mapping: Any) -> str:
    if not isinstance(mapping, dict) or not mapping:
        return "<none>"
    return ", ".join(f"{k}={v}" for k, v in sorted(mapping.items()))


def job_command_action(action: str) -> Any:
    def send(args: argparse.Namespace, backend: Backend) -> int:
        job = backend.get_job(args.namespace, args.name)
        backend.create_command(job_command(job, action))
        return 0
    return send


def job_delete(args: argparse.Namespace, backend: Backend) -> int:
    backend.delete_job(args.namespace, args.name)
    print(f"delete job {args.name} successfully")
    return 0


JOB_ACTIONS = {"run": job_run, "list": job_list, "view": job_view, "suspend": job_command_action(SUSPEND),
               "resume": job_command_action(RESUME), "delete": job_delete}


# -- queue -----------------------------------------------------------------------------------------------
def queue_create(args: argparse.Namespace, backend: Backend) -> int:
    if args.weight < 1:
        raise InputError(f"queue create: --weight must be at least 1, got {args.weight}")
    backend.create_queue(queue_manifest(args.name, weight=args.weight, state=args.state))
    return 0


def queue_rows(queues: list[dict]) -> str:
    rows: list[tuple[str, ...]] = [("Name", "Weight", "State", "Inqueue", "Pending", "Running", "Unknown")]
    for q in queues:
        status = part(q, "status")
        rows.append((name_of(q), str(part(q, "spec").get("weight", 1)), str(status.get("state") or "Open"),
                     *(str(status.get(k, 0)) for k in ("inqueue", "pending", "running", "unknown"))))
    return text_table(rows)


def queue_get(args: argparse.Namespace, backend: Backend) -> int:
    print(queue_rows([backend.get_queue(args.name)]))
    return 0


def queue_list(args: argparse.Namespace, backend: Backend) -> int:
    queues = backend.list_queues()
    print(queue_rows(queues) if queues else "No resources found")
    return 0


def queue_operate(args: argparse.Namespace, backend: Backend) -> int:
    if args.operation == "update":
        if args.weight < 1:
            raise InputError(f"queue operate: to update queue {args.name}, give --weight (greater than 0)")
        backend.set_queue_weight(args.name, args.weight)
    elif args.operation == "delete":
        check_queue_deletable(backend.get_queue(args.name))
        backend.delete_queue(args.name)
    else:
        backend.get_queue(args.name)  # NotFound, said as such
        backend.set_queue_state(args.name, QUEUE_STATES[args.operation])
    return 0


QUEUE_ACTIONS = {"create": queue_create, "get": queue_get, "list": queue_list, "operate": queue_operate}
