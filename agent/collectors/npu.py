"""Huawei Ascend NPUs, read from the text that ``npu-smi`` prints.

``npu-smi info`` prints a ``+----``-bordered table with ``|``-separated
columns.  Two header rows name the fields of the two rows every chip takes
(first: NPU id, name, health, power, temperature, hugepages; second: chip,
bus id, AI-core %, memory used/total, and HBM used/total on HBM cards).
Columns are found by their header names, so the layouts that add, drop or
reorder columns (310 without hugepages, 310P with two chips per NPU, 910,
910B, the two-die A3 910 with ``Phy-ID``, the ``NPU ID | Name`` layout of
newer tools) share one parser.  A process table may follow.
``npu-smi info -t usages -i N`` prints ``Key : Value`` lines, each chip's
block closed by ``Chip ID : n``; it is asked only when the table lacks the
AI-core or memory figures.  npu-smi does not tell NUMA placement.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Callable
from typing import NoReturn

from proto.errors import InputError
from proto.model import DeviceProcess, Npu

MIB = 1 << 20
TIMEOUT_S = 10
_TOKEN = re.compile(r"[^\s/|]+\s*/\s*[^\s/|]+|\S+")  # "35552/ 44278" and "0    / 0" are one value
_NAME_SPLIT = re.compile(r"\s{2,}|(?<=\))\s+")  # "NPU ID" is one name; "NPU Util(%) Memory-Usage(MB)" two
_FIELDS = {
    "NPU": "npu", "NPU ID": "npu", "Name": "name", "Health": "health", "Power(W)": "power_w",
    "Temp(C)": "temp_c", "Chip": "chip", "Bus-Id": "bus_id", "AICore(%)": "aicore_percent",
    "NPU Util(%)": "npu_util_percent", "Memory-Usage(MB)": "memory", "HBM-Usage(MB)": "hbm",
}
_MISSING = {"", "NA", "N/A", "-"}
Cell = tuple[str, int, str]  # (text, line number, line): every value remembers where it came from


def _cells(line: str) -> list[str]:
    body = line.strip()[1:]
    return [cell.strip() for cell in (body[:-1] if body.endswith("|") else body).split("|")]


def _fail(cell: Cell, why: str) -> NoReturn:
    raise InputError(f"line {cell[1]}: {why}: {cell[2].strip()!r}")


def _row(header: list[list[str]], line: str, lineno: int) -> dict[str, Cell]:
    """One table row as {header name: cell}; a row that does not fit its header is an error."""
    cells, whole = _cells(line), ("", lineno, line)
    if len(cells) != len(header):
        _fail(whole, f"expected {len(header)} columns, found {len(cells)}")
    values: dict[str, Cell] = {}
    for names, cell in zip(header, cells, strict=True):  # as many as the header: checked above
        tokens = [cell] if len(names) == 1 else _TOKEN.findall(cell)  # a lone name takes the whole cell
        if names and len(tokens) != len(names):
            _fail(whole, f"expected {' / '.join(names)} in {cell!r}")
        # a cell under no name (names empty) gives no value
        values.update((name, (token, lineno, line)) for name, token in zip(names, tokens, strict=False))
    return values


def _num(cell: Cell | None) -> float | None:
    if cell is None or cell[0] in _MISSING:
        return None
    try:
        return float(cell[0])
    except ValueError:
        _fail(cell, f"{cell[0]!r} is not a number")


def _id(cell: Cell | None) -> int:
    if cell is None:
        return 0
    try:
        return int(cell[0])
    except ValueError:
        _fail(cell, f"{cell[0]!r} is not an id")


def _pair(cell: Cell | None) -> tuple[float | None, float | None]:
    if cell is None:
        return None, None
    used, _, total = cell[0].partition("/")
    return _num((used.strip(), *cell[1:])), _num((total.strip(), *cell[1:]))


def _chip(values: dict[str, Cell]) -> dict:
    row = {_FIELDS[name]: cell for name, cell in values.items() if name in _FIELDS}
    if not {"npu", "name", "health"} <= row.keys():
        _fail(next(iter(values.values())), "no NPU id, name or health")
    (memory_used, memory_total), (hbm_used, hbm_total) = _pair(row.get("memory")), _pair(row.get("hbm"))
    return {
        "npu": _id(row["npu"]), "chip": _id(row.get("chip")), "name": row["name"][0],
        "health": row["health"][0], "bus_id": row["bus_id"][0] if "bus_id" in row else None,
        "power_w": _num(row.get("power_w")), "temp_c": _num(row.get("temp_c")),
        "aicore_percent": _num(row.get("aicore_percent")), "npu_util_percent": _num(row.get("npu_util_percent")),
        "memory_used_mb": memory_used, "memory_total_mb": memory_total,
        "hbm_used_mb": hbm_used, "hbm_total_mb": hbm_total, "processes": [],
    }


def parse_info(text: str) -> list[dict]:
    """The chips of an ``npu-smi info`` table, one dict per chip, each with its processes.

    Lines outside the table (version banner, ``[WARNING]`` notes) are skipped;
    a row that does not fit its header raises ``ValueError`` naming the line.
    """
    chips: dict[tuple[int, int], dict] = {}
    first: list[list[str]] | None = None    # the two device header rows
    second: list[list[str]] | None = None
    process: list[list[str]] | None = None  # the process header row
    pending: dict[str, Cell] | None = None  # a chip's first row, waiting for its second
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip().startswith("|"):
            continue
        cells = _cells(line)
        names = [[n for n in _NAME_SPLIT.split(cell) if n] for cell in cells]
        flat = {name for group in names for name in group}
        if "Health" in flat:
            first, second = names, None
        elif first is not None and second is None:
            second = names
        elif "Process id" in flat:
            if pending is not None:
                _fail(next(iter(pending.values())), "NPU row without its chip row")
            process = names
        elif len(cells) == 1 and cells[0].startswith("No running processes"):
            continue
        elif process is not None:
            row = _row(process, line, lineno)
            chip = chips.get((_id(row.get("NPU", row.get("NPU ID"))), _id(row.get("Chip"))))
            if chip is not None:
                chip["processes"].append({"pid": _id(row.get("Process id")), "name": row.get("Process name", ("",))[0],
                                          "memory_mb": _num(row.get("Process memory(MB)"))})
        elif first is not None and second is not None:  # (a second header row always follows a first)
            if pending is None:
                pending = _row(first, line, lineno)
            else:
                chip = _chip({**pending, **_row(second, line, lineno)})
                chips[(chip["npu"], chip["chip"])], pending = chip, None
    if pending is not None:
        _fail(next(iter(pending.values())), "NPU row without its chip row")
    if second is None:
        if "There is no NPU card" in text:
            return []
        lineno, line = next(((n, text_line) for n, text_line in enumerate(text.splitlines(), 1) if text_line.strip()),
                            (1, ""))
        _fail(("", lineno, line), "no npu-smi table header (NPU, Name, Health)")
    return list(chips.values())


def parse_usages(text: str) -> dict[int, dict[str, str]]:
    """``npu-smi info -t usages`` as {chip id: {key as printed: value}}, e.g. "HBM Capacity(MB)".

    Each block ends with ``Chip ID : n``; output with no ``Chip ID`` at all
    (the ``-c`` form) is chip 0; a trailing block without one is dropped.
    """
    chips: dict[int, dict[str, str]] = {}
    block: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.strip().startswith("["):  # blank, or a "[WARNING]..." note
            continue
        key, sep, value = (part.strip() for part in line.partition(":"))
        if not sep or not key:
            _fail(("", lineno, line), "expected 'key : value'")
        if key == "Chip ID":
            chips[_id((value, lineno, line))], block = block, {}
        elif key not in ("NPU ID", "Chip Count"):
            block[key] = value
    if block and not chips:
        chips[0] = block
    return chips


def _run_npu_smi(args: list[str]) -> str:
    """npu-smi's stdout; a non-zero exit raises CalledProcessError, a slow run TimeoutExpired."""
    done = subprocess.run(["npu-smi", *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["npu-smi", *args], done.stdout, done.stderr)
    return done.stdout


def _rate(usage: dict[str, str], key: str) -> float | None:
    try:
        return float(usage[key.lower()])  # keys were lower-cased: matched regardless of case
    except (KeyError, ValueError):
        return None


def _usage_memory(usage: dict[str, str]) -> tuple[float | None, float | None]:
    for kind in ("HBM", "DDR", "Memory"):  # 910 cards report HBM, 310P DDR, Atlas 200I A2 "Memory"
        total, rate = _rate(usage, f"{kind} Capacity(MB)"), _rate(usage, f"{kind} Usage Rate(%)")
        if total:
            return total, (total * rate / 100 if rate is not None else None)
    return None, None


class NpuCollector:
    """Ascend NPUs as ``proto.model.Npu``, one per chip, from ``run(args) -> npu-smi stdout``."""

    def __init__(self, run: Callable[[list[str]], str] | None = None, log: logging.Logger | None = None,
                 pod_of_pid: Callable[[int], tuple[str, str] | None] | None = None) -> None:
        self._run = run or _run_npu_smi
        self._log = log or logging.getLogger(__name__)
        self._pod_of_pid = pod_of_pid  # pid -> (pod_uid, container) or None
        self._absent_logged = False
        self._warned: set[str] = set()

    def collect(self) -> list[Npu]:
        text = self._call(["info"])
        if text is None:
            return []
        try:
            chips = parse_info(text)
        except ValueError as exc:
            self._warn(f"npu-smi info output not understood: {exc}")
            return []
        usages: dict[int, dict[int, dict[str, str]]] = {}  # asked once per NPU, only if a chip needs it
        for chip in chips:
            needs_usages = chip["aicore_percent"] is None or not (chip["hbm_total_mb"] or chip["memory_total_mb"])
            if needs_usages and chip["npu"] not in usages:
                usages[chip["npu"]] = self._usages(chip["npu"])
        return [self._npu(chip, {k.lower(): v for k, v in usages.get(chip["npu"], {}).get(chip["chip"], {}).items()})
                for chip in chips]

    def _usages(self, npu_id: int) -> dict[int, dict[str, str]]:
        args = ["info", "-t", "usages", "-i", str(npu_id)]
        text = self._call(args)
        try:
            return parse_usages(text) if text is not None else {}
        except ValueError as exc:
            self._warn(f"npu-smi {' '.join(args)} output not understood: {exc}")
            return {}

    def _npu(self, chip: dict, usage: dict[str, str]) -> Npu:
        total, used = chip["hbm_total_mb"], chip["hbm_used_mb"]
        if not total:  # cards without HBM (310, 310P) report their DDR as Memory-Usage
            total, used = chip["memory_total_mb"], chip["memory_used_mb"]
        if not total:
            total, used = _usage_memory(usage)
        aicore = chip["aicore_percent"]
        if aicore is None:
            aicore = _rate(usage, "Aicore Usage Rate(%)")
        name, health = chip["name"], chip["health"]
        return Npu(
            id=chip["npu"], chip=chip["chip"], model=f"Ascend{name}" if name[:1].isdigit() else name,
            hbm_total_bytes=round((total or 0) * MIB), hbm_used_bytes=round((used or 0) * MIB),
            aicore_utilization_percent=aicore or 0.0, healthy=health == "OK",
            health_detail="" if health == "OK" else health, numa_node=-1,
            processes=[DeviceProcess(p["pid"], round((p["memory_mb"] or 0) * MIB), *self._pod(p["pid"]))
                       for p in chip["processes"]],
        )

    def _pod(self, pid: int) -> tuple[str, str]:
        return (self._pod_of_pid(pid) if self._pod_of_pid else None) or ("", "")

    def _call(self, args: list[str]) -> str | None:
        command = "npu-smi " + " ".join(args)
        try:
            return self._run(args)
        except FileNotFoundError:
            if not self._absent_logged:
                self._absent_logged = True
                self._log.info("npu-smi not found; reporting no Ascend NPUs")
        except subprocess.TimeoutExpired:
            self._warn(f"{command} timed out")
        except subprocess.CalledProcessError as exc:
            said = next((out.strip() for out in f"{exc.stderr or ''}\n{exc.output or ''}".splitlines() if out.strip()), "")
            self._warn(f"{command} exited with status {exc.returncode}" + (f": {said}" if said else ""))
        except OSError as exc:
            self._warn(f"{command} could not run: {exc}")
        return None

    def _warn(self, message: str) -> None:
        if message not in self._warned:  # once per distinct message, not once per collect
            self._warned.add(message)
            self._log.warning(message)
