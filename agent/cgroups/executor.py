"""The one place cgroup files are written.

Writes only what differs from the file (read, compare, write), parents before
children (a child's limit can never exceed its parent's on v1, so shrinking a
parent first and loosening it last is the kernel's rule too), and logs every
change with its old and new value.  A pod whose cgroup vanished between
listing and writing is skipped, not an error; any other failure is counted and
logged with the path, and the remaining writes still happen.
"""

from __future__ import annotations

import errno
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from agent.cgroups.backend import Backend, KnobUnsupported
from agent.intents import CgroupWrite

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    knob: str
    old: object
    new: object
    why: str


class Executor:
    def __init__(self, backend: Backend, *, on_error: Callable[[str], None] | None = None, audit_size: int = 1000):
        self.backend = backend
        self.on_error = on_error or (lambda kind: None)
        self.audit: deque[Change] = deque(maxlen=audit_size)  # the latest changes, for inspection

    def apply(self, writes: list[CgroupWrite]) -> list[Change]:
        """Carry out ``writes``; return the changes actually made."""
        changes = []
        for w in order(writes):
            try:
                current = self.backend.read(w.path, w.knob)
                # compare in the file's own terms (v2 weights, v1 "unlimited" sentinels, quota rounding)
                target = self.backend.decode(w.knob, self.backend.encode(w.knob, w.value))
                if _same(current, target):
                    continue
                self.backend.write(w.path, w.knob, w.value)
            except FileNotFoundError:
                log.debug("cgroup %s is gone; skipping %s", w.path, w.knob)
                continue
            except KnobUnsupported as exc:
                log.warning("skipping %s on %s: %s", w.knob, w.path, exc)
                self.on_error("unsupported")
                continue
            except OSError as exc:
                kind = errno.errorcode.get(exc.errno or 0, "io")
                log.error("cannot set %s of %s to %r: %s", w.knob, w.path, w.value, exc)
                self.on_error(kind)
                continue
            change = Change(w.path, w.knob, current, w.value, w.why)
            log.info("cgroup %s %s: %r -> %r%s", w.path, w.knob, current, w.value, f" ({w.why})" if w.why else "")
            self.audit.append(change)
            changes.append(change)
        return changes


def order(writes: list[CgroupWrite]) -> list[CgroupWrite]:
    """Parents before children; for the same cgroup, in the order given."""
    return sorted(writes, key=lambda w: w.path.count("/"))


def _same(current: object, wanted: object) -> bool:
    if isinstance(current, str) and isinstance(wanted, str):
        return current.strip() == wanted.strip()
    return current == wanted
