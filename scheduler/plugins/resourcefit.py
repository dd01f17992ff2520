"""resource-strategy-fit: per-resource LeastAllocated / MostAllocated scores, with weights.

Volcano's arguments::

    - name: resource-strategy-fit
      arguments:
        resourceStrategyFitWeight: 10        # default 10; 0 turns the per-resource score off
        resources:                           # default: cpu and memory, LeastAllocated, weight 1
          nvidia.com/gpu: {type: MostAllocated, weight: 2}
          cpu: {type: LeastAllocated, weight: 1}
          example.com/*: {type: MostAllocated}   # one trailing '*': a prefix (the longest one wins)
        sra:                                 # scarce resources: keep nodes that have them for pods that need them
          enable: true
          resources: nvidia.com/t4, nvidia.com/a10
          weight: 10
          resourceWeight: {nvidia.com/t4: 1}
        proportional:                        # per idle GPU, hold back cpu cores and memory GB for GPU pods
          enable: true
          resources: nvidia.com/gpu
          resourceProportion: {nvidia.com/gpu.cpu: 4, nvidia.com/gpu.memory: 8}

Score of a node, for each resource the pod requests that a ``resources`` entry
matches (exactly, else the longest wildcard prefix): LeastAllocated
``(allocatable - used - request) / allocatable``, MostAllocated
``(used + request) / allocatable``, times the entry's weight (a node without
the resource adds 0 but its weight still counts); the sum over the weights,
× 100 × ``resourceStrategyFitWeight``.  A node the pod would overfill in a
scored resource scores 0.  A pod can choose its own strategy with the
annotations ``volcano.sh/resource-strategy-scoring-type`` (the type) and
``volcano.sh/resource-strategy-weight`` (JSON ``{"cpu": 2}``: the resources
scored and their weights); with the first and an unreadable or missing second
it scores 0 everywhere, as in Volcano.

``sra`` adds ``(1 - (weights of the sra resources the node has) / (sum of sra
weights)) × 100 × sra.weight`` on nodes that have every resource the pod
requests (0 elsewhere): pods that need no scarce resource go elsewhere.
``proportional`` refuses, for a pod that requests none of its resources, a
node whose idle cpu and memory after placing it would fall below what its
idle GPUs (each listed resource) are owed: ``cpu`` cores and ``memory`` GB
(10^9 bytes) per device.

Where Volcano quietly fixes a value Scoria says so: a weight below 1 counts as
1 and a malformed wildcard pattern is dropped, each with a warning; an unknown
type or key is refused.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from scheduler.framework.args import Arg, ArgError, Args, parse_args
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import CPU, EPS, MEMORY
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

SCORING_TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
SCORING_WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"
LEAST, MOST = "LeastAllocated", "MostAllocated"
TYPES = (LEAST, MOST)
DEFAULT_WEIGHT = 10
MAX_NODE_SCORE = 100.0
GB = 1e9  # proportional memory is counted in 10^9 bytes per device, as in Volcano


@dataclass(frozen=True)
class Strategy:
    type: str
    weight: int


def _valid_pattern(pattern: str) -> bool:
    return "*" not in pattern or (pattern != "*" and pattern.endswith("*") and pattern.count("*") == 1)


def match(name: str, resources: Mapping[str, Strategy]) -> Strategy | None:
    """The entry for resource ``name``: an exact key, else the longest matching ``prefix*``."""
    exact = resources.get(name)
    if exact is not None:
        return exact
    best, found = "", None
    for key, strategy in resources.items():
        if key.endswith("*"):
            prefix = key[:-1]
            if name.startswith(prefix) and len(prefix) > len(best):
                best, found = prefix, strategy
    return found


def _typed(key: str, kind: str, value: Any) -> Any:
    """``value`` read as the argument kind ``kind`` (int, float, bool, list); ArgError naming ``key``."""
    return parse_args({"value": Arg(key, kind, None)}, {key: value}).value


def _mapping(key: str, value: Any, fields: tuple[str, ...] | None = None) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgError(f"argument {key!r}: expected a mapping, got {value!r}")
    if fields is not None:
        for field in value:
            if field not in fields:
                raise ArgError(f"argument '{key}.{field}': unknown key; known: {', '.join(fields)}")
    return value


def _weight(key: str, value: Any, warnings: list[str], *, default: int = 1) -> int:
    weight = _typed(key, "int", value) if value is not None else 0
    if weight <= 0:
        if value is not None:
            warnings.append(f"argument {key!r}: {weight} counts as {default} (as in Volcano)")
        return default
    return weight


class ResourceStrategyFit(Plugin):
    name = "resource-strategy-fit"
    hooks = ("predicate", "predicate_reasons", "node_order")
    arguments = {
        "weight": Arg("resourceStrategyFitWeight", "int", DEFAULT_WEIGHT, minimum=0,
                      help="multiplies the per-resource score (0: off)"),
        "log_level": Arg("logLevel", "int", 0, ignored="Scoria's log level is set on the command line"),
    }
    NESTED: ClassVar[tuple[str, ...]] = ("resources", "sra", "proportional")  # mappings, read by ``parse``

    @classmethod
    def implements(cls, key: str) -> bool:
        return key in cls.NESTED or super().implements(key)

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        if raw is not None and not isinstance(raw, Mapping):
            raise ArgError(f"arguments must be a mapping, got {type(raw).__name__}")
        raw = dict(raw or {})
        known = [arg.key for arg in cls.arguments.values()] + list(cls.NESTED)
        for key in raw:
            if key not in known:
                raise ArgError(f"unknown argument {key!r}; known: {', '.join(sorted(known))}")
        simple = parse_args(cls.arguments, {k: v for k, v in raw.items() if k not in cls.NESTED})
        warnings: list[str] = []
        values = simple.as_dict()
        values["resources"] = cls._resources(raw.get("resources"), warnings)
        values["sra"] = cls._sra(raw.get("sra"), warnings)
        values["proportional"] = cls._proportional(raw.get("proportional"))
        return Args(values, simple.unimplemented, simple.notes + tuple(warnings))

    @staticmethod
    def _resources(value: Any, warnings: list[str]) -> Mapping[str, Strategy]:
        given = _mapping("resources", value)
        out: dict[str, Strategy] = {}
        for name, entry in given.items():
            key = f"resources.{name}"
            entry = _mapping(key, entry, ("type", "weight"))
            kind = entry.get("type") or LEAST
            if kind not in TYPES:
                raise ArgError(f"argument '{key}.type': must be one of {', '.join(TYPES)}, got {kind!r}")
            weight = _weight(f"{key}.weight", entry.get("weight"), warnings)
            if not _valid_pattern(str(name)):
                warnings.append(f"argument {key!r}: a wildcard must be one trailing '*' after a prefix "
                                "(e.g. nvidia.com/*); the entry is ignored (as in Volcano)")
                continue
            out[str(name)] = Strategy(kind, weight)
        if not given:
            out = {"cpu": Strategy(LEAST, 1), "memory": Strategy(LEAST, 1)}
        return out

    @staticmethod
    def _sra(value: Any, warnings: list[str]) -> tuple[int, dict[str, int]] | None:
        """(sra.weight, {resource: weight}) when enabled."""
        cfg = _mapping("sra", value, ("enable", "resources", "weight", "resourceWeight"))
        enabled = _typed("sra.enable", "bool", cfg.get("enable", False))
        weight = _typed("sra.weight", "int", cfg.get("weight", 0))
        if weight < 0:
            raise ArgError(f"argument 'sra.weight': must be at least 0, got {weight}")
        names = _typed("sra.resources", "list", cfg.get("resources", ""))
        given = _mapping("sra.resourceWeight", cfg.get("resourceWeight"))
        for name in given:
            if name not in names:
                raise ArgError(f"argument 'sra.resourceWeight.{name}': resource is not listed in sra.resources")
        weights = {}
        for name in names:
            w = _typed(f"sra.resourceWeight.{name}", "int", given.get(name, 1))
            if w < 0:
                warnings.append(f"argument 'sra.resourceWeight.{name}': {w} counts as 1 (as in Volcano)")
                w = 1
            weights[name] = w
        return (weight, weights) if enabled else None

    @staticmethod
    def _proportional(value: Any) -> dict[str, tuple[float, float]] | None:
        """{resource: (cpu cores, memory GB) per device} when enabled."""
        cfg = _mapping("proportional", value, ("enable", "resources", "resourceProportion"))
        enabled = _typed("proportional.enable", "bool", cfg.get("enable", False))
        names = _typed("proportional.resources", "list", cfg.get("resources", ""))
        given = _mapping("proportional.resourceProportion", cfg.get("resourceProportion"))
        for key in given:
            base, _, kind = str(key).rpartition(".")
            if kind not in ("cpu", "memory") or base not in names:
                raise ArgError(f"argument 'proportional.resourceProportion.{key}': expected <resource>.cpu or "
                               f"<resource>.memory for a resource listed in proportional.resources")
        out = {}
        for name in names:
            rates = []
            for kind in ("cpu", "memory"):
                key = f"{name}.{kind}"
                rate = _typed(f"proportional.resourceProportion.{key}", "float", given.get(key, 1.0))
                if rate < 0:
                    raise ArgError(f"argument 'proportional.resourceProportion.{key}': must be at least 0, got {rate}")
                rates.append(rate)
            out[name] = (rates[0], rates[1])
        return out if enabled else None

    # -- session ----------------------------------------------------------------------------
    def open(self, ssn: Session) -> None:
        self.nodes = ssn.nodes
        self.names = ssn.index.names
        self.column = ssn.index.column
        a = self.args
        # the configured strategy of each resource column (None: not scored)
        self.strategy = [match(name, a.resources) for name in self.names]
        self.sra = None
        if a.sra is not None and a.sra[0] > 0:
            weight, weights = a.sra
            cols = [(self.column[n], w) for n, w in weights.items() if n in self.column]
            self.sra = (weight, cols, sum(weights.values()))
        self.proportional = [(self.column[n], cpu, mem) for n, (cpu, mem) in (a.proportional or {}).items()
                             if n in self.column]
        self._pod_strategy: dict[tuple[str, str], dict[str, int] | None] = {}
        self._everywhere = np.ones(self.nodes.count, dtype=bool)
        self._everywhere.flags.writeable = False

    # -- proportional ------------------------------------------------------------------------
    def _short(self, task: TaskInfo, avail: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """For each proportional resource: the nodes whose idle cpu or memory would fall below its share."""
        if any(task.req[col] > 0 for col, _, _ in self.proportional):
            return []  # a pod that asks for the device itself is not held back
        out = []
        left_cpu = avail[CPU] - task.req[CPU]
        left_mem = avail[MEMORY] - task.req[MEMORY]
        for col, cpu, mem in self.proportional:
            devices = np.nan_to_num(avail[col])
            short = (left_cpu + EPS < devices * cpu * 1000) | (left_mem + EPS < devices * mem * GB)
            out.append((self.names[col], short & (devices > 0)))
        return out

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        if avail is None or not self.proportional:
            return self._everywhere
        mask = self._everywhere.copy()
        for _, short in self._short(task, avail):
            mask &= ~short
        return mask

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        if avail is not None and self.proportional:
            left = among.copy()
            for name, short in self._short(task, avail):
                count_reason(reasons, f"proportional of resource {name} check failed", left & short)
                left &= ~short
        return reasons

    # -- scores ------------------------------------------------------------------------------
    def score_key(self, task: TaskInfo) -> tuple:
        ann = task.pod.annotations
        return (id(task.req), ann.get(SCORING_TYPE_ANNOTATION), ann.get(SCORING_WEIGHT_ANNOTATION))

    def _strategies(self, task: TaskInfo) -> list[tuple[int, str, int]] | None:
        """(column, type, weight) of each requested resource scored; None: the pod scores 0 everywhere."""
        ann = task.pod.annotations
        kind = ann.get(SCORING_TYPE_ANNOTATION)
        if not kind:
            out = []
            for col in task.cols:
                strategy = self.strategy[col]
                if strategy is not None:
                    out.append((int(col), strategy.type, strategy.weight))
            return out
        key = (kind, ann.get(SCORING_WEIGHT_ANNOTATION) or "")
        if key not in self._pod_strategy:
            self._pod_strategy[key] = self._read_pod_weights(key[1])
        weights = self._pod_strategy[key]
        if weights is None:
            return None
        return [(int(col), kind, weights[name]) for col in task.cols if (name := self.names[col]) in weights]

    @staticmethod
    def _read_pod_weights(text: str) -> dict[str, int] | None:
        if not text:
            return None
        try:
            raw = json.loads(text)
        except ValueError:
            return None
        if not isinstance(raw, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw.values()):
            return None
        return raw

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        if self.args.weight <= 0 and self.sra is None:
            return None  # both scores are off (Volcano registers no node order then)
        sel: slice | np.ndarray = slice(None) if nodes is None else nodes
        size = self.nodes.count if nodes is None else nodes.size
        score = np.zeros(size)
        if self.args.weight > 0:
            score += self._strategy_score(task, sel, size)
        if self.sra is not None:
            score += self._sra_score(task, sel, size)
        return score

    def _strategy_score(self, task: TaskInfo, sel: slice | np.ndarray, size: int) -> np.ndarray:
        strategies = self._strategies(task)
        if not strategies:
            return np.zeros(size)
        nodes = self.nodes
        total = np.zeros(size)
        overfull = np.zeros(size, dtype=bool)
        weight_sum = 0
        for col, kind, weight in strategies:
            weight_sum += weight
            if weight == 0 or kind not in TYPES:
                continue
            alloc = nodes.alloc[col, sel]
            has = (alloc > 0) & np.isfinite(alloc)  # a node without it (or with no known amount) adds 0
            used = nodes.used[col, sel] + task.req[col]  # once the pod is placed
            overfull |= has & (used > alloc + EPS)
            frac = np.where(has, used * nodes.inv_alloc[col, sel], 0.0)
            total += weight * (frac if kind == MOST else np.where(has, 1.0 - frac, 0.0))
        if weight_sum > 0:
            total /= weight_sum
        total *= MAX_NODE_SCORE * self.args.weight
        total[overfull] = 0.0
        return total

    def _sra_score(self, task: TaskInfo, sel: slice | np.ndarray, size: int) -> np.ndarray:
        assert self.sra is not None
        weight, cols, weight_sum = self.sra
        alloc = self.nodes.alloc
        has_all = np.ones(size, dtype=bool)
        for col in task.cols:
            has_all &= alloc[col, sel] != 0
        held = np.zeros(size)
        for col, w in cols:
            held += np.where(alloc[col, sel] > 0, float(w), 0.0)
        if weight_sum > 0:
            held = 1.0 - held / weight_sum
        return np.where(has_all, held * MAX_NODE_SCORE * weight, 0.0)
