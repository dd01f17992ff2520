"""tdm: time-division multiplexing — revocable nodes lent to preemptable pods inside a daily window.

A node labelled ``volcano.sh/revocable-zone=<zone>`` is revocable.  Each zone
has a daily window, ``tdm.revocable-zone.<zone>: "HH:MM-HH:MM"`` (Volcano's
argument; it may cross midnight: ``"22:00-06:00"``), read in the timezone of
the session's clock.  Equal start and end (``"0:00-0:00"``) is the whole day,
as Volcano reads it (the window ends at the same time the next day): the zone
is always open.  A zone with no window is never open.

* predicate — revocable nodes take only preemptable pods, and only while
  their zone is open; other nodes take anything.
* node_order — a preemptable pod scores 100 on a revocable node whose zone is
  open, as Volcano does (no weight argument: Volcano has none), so lent
  capacity is used before regular capacity.
* victim_tasks — once a configured zone closes, its running preemptable pods
  are handed to the ``shuffle`` action: per job and ``tdm.evict.period``
  (default 1m), as many as its disruption budget allows (one when it states
  none, as Volcano's maxVictims), the lowest-priority first, and never
  one that takes the job below its minimum.

A pod is preemptable when its annotation ``volcano.sh/preemptable`` says so
("false" there wins), else when it carries ``volcano.sh/revocable-zone: "*"``
(Volcano's other spelling), else when its PodGroup carries either.

The minimum a job keeps is, as Volcano reads PodGroup budgets,
``volcano.sh/jdb-min-available`` (running pods that must stay) or else
``volcano.sh/jdb-max-unavailable`` (pods that may be missing), integers or
percentages of the job's pods rounded up; without either, the job's
minMember when it is a gang (minMember > 1), so a plain pod may always go.
A job held at its minimum keeps its pods: the hold is logged once when it
starts and recorded with its reason in ``Session.state("tdm")["held"]``.

The time of a job's last eviction is kept in ``Session.state("tdm")`` and is
recorded at session close, from the evictions the session actually made.
Zones that have a label but no window are never open, but their pods are
not evicted (as in Volcano, an eviction needs a window that closed): a
mistyped or removed zone argument must not empty nodes.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from proto.errors import InputError
from proto.vocab.duration import DailyWindow as Window
from proto.vocab.duration import parse_daily_window as parse_window
from proto.vocab.placement import PREEMPTABLE_ANNOTATION, REVOCABLE_ZONE_LABEL, preemptable
from scheduler.framework.args import Arg, ArgError, Args
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import JobInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)

ZONE_PREFIX = "tdm.revocable-zone."
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
MAX_SCORE = 100.0  # kube-scheduler's MaxNodeScore, what Volcano's tdm gives an open revocable node
NOT_PREEMPTABLE = f"node(s) are revocable ({REVOCABLE_ZONE_LABEL}) and the pod is not preemptable"

_TIMES = re.compile(r"(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})")


def zone_window(text: Any) -> Window:
    """A zone's daily window; equal start and end is the whole day (``Window(s, s)`` contains every time)."""
    match = _TIMES.fullmatch(str(text).strip())
    if match:
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        if (h1, m1) == (h2, m2) and h1 <= 23 and m1 <= 59:
            return Window(h1 * 60 + m1, h2 * 60 + m2)
    return parse_window(text)


def parse_budget(value: str, total: int) -> int:
    """A PodGroup budget value (``2`` or ``30%`` of ``total``, rounded up, as Volcano does); ValueError if bad."""
    text = str(value).strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    match = re.fullmatch(r"(\d+)%", text)
    if match and int(match.group(1)) <= 100:
        return math.ceil(int(match.group(1)) * total / 100)
    raise InputError(f"expected a count or a percentage from 0% to 100%, got {value!r}")


class Tdm(Plugin):
    name = "tdm"
    hooks = ("predicate", "predicate_reasons", "node_order", "victim_tasks")
    arguments = {
        "zones": Arg(ZONE_PREFIX, "str", None, 'daily window "HH:MM-HH:MM" of revocable zone <name>', prefix=True),
        "evict_period": Arg("tdm.evict.period", "duration", 60.0,
                            "how often a job loses pods (as many as its budget allows) once its zone closes", minimum=0),
    }

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        """The arguments, with each zone's window parsed (``windows``): a bad window is refused here."""
        args = super().parse(raw)
        windows = {}
        for zone, text in args.zones.items():
            try:
                windows[zone] = zone_window(text)
            except ValueError as exc:
                raise ArgError(f"argument {ZONE_PREFIX + zone!r}: {exc}") from None
        return Args({**args.as_dict(), "windows": MappingProxyType(windows)}, args.unimplemented)

    # -- per session: which nodes are revocable, which zones are open ---------------------------
    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.state = ssn.state(self.name)
        self.windows: Mapping[str, Window] = self.args.windows
        n = ssn.nodes.count
        self.zones: list[str] = []  # zone names; zone_of holds indexes into it, -1 on regular nodes
        self.zone_of = np.full(n, -1, dtype=np.intp)
        codes: dict[str, int] = {}
        for i in np.flatnonzero(ssn.node_index.key_mask(REVOCABLE_ZONE_LABEL)):
            zone = ssn.nodes.nodes[i].labels[REVOCABLE_ZONE_LABEL]
            if zone:  # an empty value marks nothing, as in Volcano
                code = codes.get(zone)
                if code is None:
                    code = codes[zone] = len(self.zones)
                    self.zones.append(zone)
                self.zone_of[i] = code
        window_open = [zone in self.windows and self.windows[zone].contains(ssn.now) for zone in self.zones]
        self.zone_open = np.array(window_open + [False], dtype=bool)  # the extra False: zone_of == -1
        self.revocable = self.zone_of >= 0
        self.open_nodes = self.zone_open[self.zone_of]
        self.for_preemptable = _frozen(~self.revocable | self.open_nodes)
        self.for_others = _frozen(~self.revocable)
        self.scores = _frozen(np.where(self.open_nodes, MAX_SCORE, 0.0))
        self._group_preemptable: dict[str, bool] = {}
        self._offered: set[str] = set()  # tasks handed to shuffle this session
        self._offered_jobs: set[str] = set()

    # -- who is preemptable --------------------------------------------------------------------
    def preemptable(self, task: TaskInfo) -> bool:
        said = task.facts.preemptable  # read (and a bad value warned about) when the snapshot was taken
        if said is not None:
            return said
        if task.pod.annotations.get(REVOCABLE_ZONE_LABEL) == "*":
            return True
        return self._job_preemptable(task.job)

    def _job_preemptable(self, job: JobInfo) -> bool:
        known = self._group_preemptable.get(job.uid)
        if known is None:
            annotations = job.group.annotations if job.group is not None else {}
            said = _annotation(annotations, f"PodGroup {job.uid}", job.uid, self.state)
            known = said if said is not None else annotations.get(REVOCABLE_ZONE_LABEL) == "*"
            self._group_preemptable[job.uid] = known
        return known

    # -- predicate -------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        return self.for_preemptable if self.preemptable(task) else self.for_others

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        if not self.preemptable(task):
            n = int(np.count_nonzero(among & self.revocable))
            if n:
                reasons[NOT_PREEMPTABLE] = n
            return reasons
        closed = among & self.revocable & ~self.open_nodes
        if closed.any():
            counts = np.bincount(self.zone_of[closed], minlength=len(self.zones))
            for code in np.flatnonzero(counts):
                reasons[self._closed_reason(self.zones[code])] += int(counts[code])
        return reasons

    def _closed_reason(self, zone: str) -> str:
        window = self.windows.get(zone)
        if window is None:
            return (f"node(s) in revocable zone {zone}, which is never open: "
                    f"no window is configured ({ZONE_PREFIX}{zone})")
        return f"node(s) in revocable zone {zone} outside its window {window.text}"

    # -- node order -------------------------------------------------------------------------------
    def score_key(self, task: TaskInfo) -> bool:
        return self.preemptable(task)

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        if not self.preemptable(task) or not self.scores.any():
            return None  # no opinion: it is not lent capacity's to take, or no zone is open
        return self.scores.copy() if nodes is None else self.scores[nodes]

    # -- evictions once a zone closes -------------------------------------------------------------
    def victim_tasks(self, ssn: Session) -> list[tuple[TaskInfo, str]]:
        last: dict[str, datetime] = self.state.setdefault("last_eviction", {})
        period = timedelta(seconds=self.args.evict_period)
        held: dict[str, str] = {}
        out: list[tuple[TaskInfo, str]] = []
        for job, tasks in sorted(self._stranded().items(), key=lambda jt: jt[0].uid):
            if job.uid in self._offered_jobs:
                continue  # already given a victim this session
            allowed, limit = self.evictable_count(job)
            if allowed <= 0:
                held[job.uid] = (f"job {job.uid} keeps its {len(tasks)} pod(s) in closed revocable zone(s) "
                                 f"{', '.join(sorted({self.zones[self.zone_of[t.node]] for t in tasks}))}: "
                                 f"at its minimum ({limit})")
                continue
            previous = last.get(job.uid)
            if previous is not None and ssn.now < previous + period:
                log.debug("tdm: job %s next eviction at %s", job.uid, (previous + period).isoformat())
                continue
            # Volcano's maxVictims: as many as the job's budget allows, one when it states none
            count = min(allowed if self._budgeted(job) else 1, len(tasks))
            for victim in sorted(tasks, key=ssn.task_key, reverse=True)[:count]:  # the least important first
                zone = self.zones[self.zone_of[victim.node]]
                out.append((victim, f"revocable zone {zone} closed at {self.windows[zone].closes} (tdm)"))
                self._offered.add(victim.uid)
            self._offered_jobs.add(job.uid)
        self._note_holds(held)
        return out

    def _stranded(self) -> dict[JobInfo, list[TaskInfo]]:
        """Running preemptable tasks on nodes of configured zones whose window is closed, by job."""
        closed_zone = np.array([zone in self.windows for zone in self.zones] + [False], dtype=bool) & ~self.zone_open
        nodes = self.ssn.nodes
        by_job: dict[JobInfo, list[TaskInfo]] = {}
        for node in np.flatnonzero(closed_zone[self.zone_of]):
            for task in nodes.tasks[node].values():
                if task.status == TaskStatus.RUNNING and self.preemptable(task):
                    by_job.setdefault(task.job, []).append(task)
        return by_job

    def _budgeted(self, job: JobInfo) -> bool:
        """Whether the job states a disruption budget (jdb-min-available or jdb-max-unavailable) tdm can read."""
        annotations = job.group.annotations if job.group is not None else {}
        for key in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE):
            raw = annotations.get(key)
            if raw is not None:
                try:
                    parse_budget(raw, len(job.tasks))
                except ValueError:
                    continue
                return True
        return False

    def evictable_count(self, job: JobInfo) -> tuple[int, str]:
        """How many of ``job``'s pods may go now without going below its minimum, and what that minimum is."""
        running = job.counts[TaskStatus.RUNNING]
        total = len(job.tasks)
        annotations = job.group.annotations if job.group is not None else {}
        for key in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE):  # Volcano reads min-available first
            raw = annotations.get(key)
            if raw is None:
                continue
            try:
                value = parse_budget(raw, total)
            except ValueError as exc:
                _warn_once(self.state, (job.uid, key, raw), "PodGroup %s: ignoring %s: %s", job.uid, key, exc)
                continue
            if key == JDB_MIN_AVAILABLE:
                return running - value, f"{key} {raw}: {value} of {total} pod(s) must run, {running} run"
            c = job.counts
            unavailable = total - c[TaskStatus.SUCCEEDED] - c[TaskStatus.FAILED] - running
            return value - unavailable, f"{key} {raw}: {value} of {total} pod(s) may be down, {unavailable} are"
        minimum = job.min_member if job.min_member > 1 else 0
        return job.ready_num - minimum, f"minMember {job.min_member}, {job.ready_num} placed"

    def _note_holds(self, held: dict[str, str]) -> None:
        before = self.state.get("held", {})
        for uid, reason in held.items():
            if uid not in before:
                log.info("tdm: %s", reason)
        for uid in before.keys() - held.keys():
            log.info("tdm: job %s is no longer held at its minimum", uid)
        self.state["held"] = held

    def close(self, ssn: Session) -> None:
        """Remember when each job last lost a pod to tdm; forget what no longer matters."""
        last: dict[str, datetime] = self.state.setdefault("last_eviction", {})
        for task, _ in ssn.evictions:
            if task.uid in self._offered:
                last[task.job.uid] = ssn.now
        period = timedelta(seconds=self.args.evict_period)
        for uid in [uid for uid, at in last.items() if uid not in ssn.jobs or ssn.now >= at + period]:
            del last[uid]
        warned = self.state.get("warned")
        if warned:
            self.state["warned"] = {w for w in warned if w[0] in ssn.jobs}


def _frozen(mask: np.ndarray) -> np.ndarray:
    """Shared per-session arrays are handed to callers: make accidental in-place edits fail loudly."""
    mask.flags.writeable = False
    return mask


def _annotation(annotations: Mapping[str, str], owner: str, job: str, state: dict) -> bool | None:
    """``volcano.sh/preemptable`` of ``owner`` (in ``job``); a bad value is warned about once and read as unset."""
    try:
        return preemptable(annotations)
    except ValueError as exc:
        _warn_once(state, (job, owner, annotations.get(PREEMPTABLE_ANNOTATION)), "%s: ignoring %s", owner, exc)
        return None


def _warn_once(state: dict, key: tuple, message: str, *args: Any) -> None:
    """Log ``message`` the first time ``key`` (its job's uid first: forgotten with the job) is seen."""
    warned: set = state.setdefault("warned", set())
    if key not in warned:
        warned.add(key)
        log.warning(message, *args)
