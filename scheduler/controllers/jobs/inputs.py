"""What the Job controller's decision takes and gives: its settings, what exists of a Job, the outcome."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scheduler.controllers.jobs.observe import JobMemory
from scheduler.controllers.kinds import Kind
from scheduler.controllers.sshkeys import ssh_keygen
from scheduler.controllers.writes import Effect


@dataclass
class Settings:
    """How the Job controller runs in a mode."""

    scheduler_name: str = "scoria"  # a Job that names none gets this (Volcano's webhook default)
    # Volcano creates a Job's pods only once the scheduler admitted its PodGroup (Inqueue); a scheduler
    # configured without the enqueue action admits nothing, so there pods are created at once
    wait_for_admission: bool = True
    key_pair: Callable[[], tuple[str, str]] = ssh_keygen


@dataclass
class Observed:
    """What exists of one Job."""

    job: dict
    pods: list[dict] = field(default_factory=list)  # the pods it controls
    podgroup: dict | None = None
    commands: list[dict] = field(default_factory=list)  # Commands whose target is this Job
    objects: Mapping[tuple[Kind, str], dict] = field(default_factory=dict)  # its namespace's plugin-kind objects
    priorities: Mapping[str, int] = field(default_factory=dict)  # PriorityClass values by name


@dataclass
class Outcome:
    effects: list[Effect]
    memory: JobMemory
    wake_at: float | None = None  # Unix seconds: reconcile again then, even if nothing changes


@dataclass(frozen=True)
class Target:
    kind: str  # task, pod or partition
    task: str
    pod: str = ""
    partition: str = ""
