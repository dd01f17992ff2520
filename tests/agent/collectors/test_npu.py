"""The Ascend NPU collector against real ``npu-smi`` outputs (tests/fixtures/npu-smi/README.md says where each came from)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent.collectors.npu import NpuCollector, parse_info, parse_usages
from proto.model import DeviceProcess

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "npu-smi"
MIB = 1 << 20


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class RecordingLog:
    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def info(self, message: str, *args) -> None:
        self.records.append(("info", message % args if args else message))

    def warning(self, message: str, *args) -> None:
        self.records.append(("warning", message % args if args else message))

    def at(self, level: str) -> list[str]:
        return [message for lvl, message in self.records if lvl == level]


class FakeNpuSmi:
    """Answers ``run(args)`` from a table of outputs (or exceptions) and records every call."""

    def __init__(self, answers: dict[tuple[str, ...], str | BaseException]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str]) -> str:
        self.calls.append(list(args))
        answer = self.answers[tuple(args)]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def collector(answers, pod_of_pid=None) -> tuple[NpuCollector, FakeNpuSmi, RecordingLog]:
    run, log = FakeNpuSmi(answers), RecordingLog()
    return NpuCollector(run=run, log=log, pod_of_pid=pod_of_pid), run, log


# --- parse_info over the recorded outputs -------------------------------------------------------


def test_910b3_eight_npus_hbm_aicore_and_one_process_each() -> None:
    chips = parse_info(fixture("info-910b3-8npu-procs.txt"))
    assert [(c["npu"], c["chip"]) for c in chips] == [(n, 0) for n in range(8)]
    first = chips[0]
    assert (first["name"], first["health"], first["bus_id"]) == ("910B3", "OK", "0000:C1:00.0")
    assert (first["power_w"], first["temp_c"], first["aicore_percent"]) == (124.9, 41, 27)
    assert (first["hbm_used_mb"], first["hbm_total_mb"]) == (59718, 65536)  # printed "59718/ 65536"
    assert (first["memory_used_mb"], first["memory_total_mb"]) == (0, 0)
    assert [c["processes"] for c in chips][5] == [{"pid": 1079652, "name": "", "memory_mb": 56374}]


def test_910a_keeps_ddr_and_hbm_apart_and_has_no_process_table() -> None:
    chips = parse_info(fixture("info-910a-8npu.txt"))
    assert len(chips) == 8 and {c["name"] for c in chips} == {"910A"}
    assert (chips[2]["memory_used_mb"], chips[2]["memory_total_mb"]) == (1868, 15077)
    assert (chips[2]["hbm_used_mb"], chips[2]["hbm_total_mb"]) == (0, 32768)
    assert all(c["processes"] == [] for c in chips)


def test_310p3_two_chips_per_npu_ddr_only_and_processes_on_the_right_chip() -> None:
    chips = parse_info(fixture("info-310p3-duo-procs.txt"))
    assert [(c["npu"], c["chip"]) for c in chips] == [
        (0, 0), (0, 1), (96, 0), (96, 1), (32768, 0), (32768, 1), (32896, 0), (32896, 1)]
    assert chips[0]["power_w"] is None  # "NA"
    assert (chips[0]["memory_used_mb"], chips[0]["memory_total_mb"]) == (35552, 44278)  # "35552/ 44278"
    assert chips[0]["hbm_total_mb"] is None
    assert [p["pid"] for p in chips[0]["processes"]] == [326429, 326430]
    assert chips[1]["processes"] == [{"pid": 326430, "name": "", "memory_mb": 34086}]
    assert all(c["processes"] == [] for c in chips[2:])


def test_a3_two_dies_per_npu_with_phy_id_column() -> None:
    chips = parse_info(fixture("info-a3-910-2chip-procs.txt"))
    assert len(chips) == 16
    die1 = chips[1]
    assert (die1["npu"], die1["chip"], die1["power_w"], die1["hbm_used_mb"]) == (0, 1, None, 61625)  # power "-"
    assert len(chips[0]["processes"]) == 8 and [p["memory_mb"] for p in die1["processes"]] == [58780]
    assert [p["pid"] for p in chips[15]["processes"]] == [944268]


def test_old_310_table_without_hugepages_column() -> None:
    chips = parse_info(fixture("info-310-v20.2.0.txt"))
    assert [(c["npu"], c["chip"]) for c in chips] == [(215, 0), (215, 1), (215, 2), (215, 3)]
    assert (chips[3]["temp_c"], chips[3]["memory_used_mb"], chips[3]["memory_total_mb"]) == (55, 2703, 8192)


def test_tolerates_indentation_trailing_notes_and_unknown_columns() -> None:
    text = fixture("info-910b3-8npu-procs.txt")
    indented = "".join(f"    {line.rstrip()}   \r\n" for line in text.splitlines())
    noted = text + "[WARNING]The driver package may not be completely installed, which may cause function abnormal.\n"
    assert parse_info(indented) == parse_info(text) == parse_info(noted)
    # the newer "NPU ID | Name" layout prints "NPU Util(%)" where AICore(%) was: not an AI-core figure
    layout = text.replace("AICore(%)  ", "NPU Util(%)")
    chips = parse_info(layout)
    assert chips[0]["aicore_percent"] is None and chips[0]["npu_util_percent"] == 27


def test_no_npu_card_is_an_empty_list() -> None:
    assert parse_info("There is no NPU card on this server.\n") == []


@pytest.mark.parametrize(
    "case,edit,line",
    [
        ("missing column", lambda t: t.replace("| 0000:82:00.0  | 29 ", "| 29 ", 1), 17),
        ("bad number", lambda t: t.replace("122.5", "12x.5"), 22),
        ("bad id", lambda t: t.replace("| 6     910B3", "| six   910B3"), 25),
        ("chip row lost", lambda t: t.replace("| 0                         | 0000:42:00.0  | 29          0    / 0          "
                                              "59715/ 65536         |\n", ""), 28),
        ("bad process pid", lambda t: t.replace("1075396", "10753x6"), 40),
    ],
)
def test_malformed_info_names_the_line(case: str, edit, line: int) -> None:
    text = edit(fixture("info-910b3-8npu-procs.txt"))
    assert text != fixture("info-910b3-8npu-procs.txt"), case
    with pytest.raises(ValueError, match=rf"^line {line}: "):
        parse_info(text)


def test_output_without_a_table_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^line 2: .*dcmi module initialize failed"):
        parse_info("\ndcmi module initialize failed. ret is -8005\n")


# --- parse_usages over the recorded outputs -----------------------------------------------------


def test_usages_910_single_chip_real_key_names() -> None:
    usages = parse_usages(fixture("usages-910-i0-gpustack.txt"))
    assert list(usages) == [0]
    assert usages[0]["HBM Capacity(MB)"] == "32768" and usages[0]["DDR Capacity(MB)"] == "15171"
    assert usages[0]["Ctrlcpu Usage Rate(%)"] == "9" and "NPU ID" not in usages[0]


def test_usages_310p_blocks_end_with_their_chip_id() -> None:
    usages = parse_usages(fixture("usages-310p-2chip-gpustack.txt"))
    assert list(usages) == [0, 1]
    assert (usages[0]["DDR Capacity(MB)"], usages[0]["Ctrlcpu Usage Rate(%)"]) == ("44280", "2")
    assert (usages[1]["DDR Capacity(MB)"], usages[1]["Ctrlcpu Usage Rate(%)"]) == ("43693", "3")
    assert "HBM Capacity(MB)" not in usages[1]


def test_usages_910b_indented_with_newer_keys() -> None:
    usages = parse_usages(fixture("usages-910b-telegraf.txt"))
    assert usages[0]["HBM Usage Rate(%)"] == "5" and usages[0]["NPU Utilization(%)"] == "0"


def test_usages_without_chip_id_is_chip_zero_and_garbage_names_the_line() -> None:
    assert parse_usages("\tAicore Usage Rate(%)           : 12\n") == {0: {"Aicore Usage Rate(%)": "12"}}
    with pytest.raises(ValueError, match=r"^line 3: "):
        parse_usages("HBM Capacity(MB) : 65536\n\nThis device does not support querying usages\n")


# --- the collector -----------------------------------------------------------------------------


def test_collect_910b3_fills_the_wire_model_without_asking_usages() -> None:
    pods = {1067983: ("uid-a", "trainer"), 1079652: None}
    npu_collector, run, _ = collector({("info",): fixture("info-910b3-8npu-procs.txt")}, pod_of_pid=pods.get)
    npus = npu_collector.collect()
    assert run.calls == [["info"]]  # the table had AI-core and HBM figures
    assert [(n.id, n.chip) for n in npus] == [(i, 0) for i in range(8)]
    first = npus[0]
    assert (first.model, first.aicore_utilization_percent, first.numa_node) == ("Ascend910B3", 27.0, -1)
    assert (first.hbm_total_bytes, first.hbm_used_bytes) == (65536 * MIB, 59718 * MIB)
    assert (first.healthy, first.health_detail) == (True, "")
    assert first.processes == [DeviceProcess(pid=1067983, memory_bytes=56373 * MIB, pod_uid="uid-a", container="trainer")]
    assert npus[5].processes == [DeviceProcess(pid=1079652, memory_bytes=56374 * MIB)]


def test_collect_910a_reports_hbm_not_ddr() -> None:
    npus = collector({("info",): fixture("info-910a-8npu.txt")})[0].collect()
    assert {n.model for n in npus} == {"Ascend910A"}
    assert (npus[0].hbm_total_bytes, npus[0].hbm_used_bytes) == (32768 * MIB, 0)


def test_collect_310p3_reports_ddr_per_chip() -> None:
    npus = collector({("info",): fixture("info-310p3-duo-procs.txt")})[0].collect()
    assert [(n.id, n.chip, n.model) for n in npus[:2]] == [(0, 0, "Ascend310P3"), (0, 1, "Ascend310P3")]
    assert (npus[1].hbm_total_bytes, npus[1].hbm_used_bytes) == (43693 * MIB, 35270 * MIB)
    assert [p.pid for p in npus[0].processes] == [326429, 326430] and npus[2].processes == []


def test_collect_real_warning_health_is_unhealthy_with_detail() -> None:
    npus = collector({("info",): fixture("info-910-8npu-warning-procs.txt")})[0].collect()
    assert [(n.id, n.health_detail) for n in npus if not n.healthy] == [(3, "Warning"), (7, "Warning")]
    assert all(n.health_detail == "" for n in npus if n.healthy)
    assert npus[0].model == "xxx"  # the vendor sample hides the name; not a digit-led chip name, so kept as is


@pytest.mark.parametrize("health", ["Alarm", "Critical", "UNKNOWN"])
def test_collect_other_health_states_are_unhealthy(health: str) -> None:
    text = fixture("info-910a-8npu.txt").replace("| 4     910A           | OK     ", f"| 4     910A           | {health:<7}")
    npus = collector({("info",): text})[0].collect()
    assert [(n.id, n.healthy, n.health_detail) for n in npus if not n.healthy] == [(4, False, health)]


def _without_aicore() -> str:
    # Derived from the real 910B3 table: the header names the column "NPU Util(%)", as the newer
    # "NPU ID | Name" layout does, so the table gives no AI-core figure and usages must be asked.
    return fixture("info-910b3-8npu-procs.txt").replace("AICore(%)  ", "NPU Util(%)")


def test_collect_asks_usages_per_npu_when_the_table_lacks_aicore() -> None:
    answers = {("info",): _without_aicore()}
    answers.update({("info", "-t", "usages", "-i", str(n)): fixture("usages-910b-telegraf.txt") for n in range(8)})
    npu_collector, run, _ = collector(answers)
    npus = npu_collector.collect()
    assert run.calls == [["info"]] + [["info", "-t", "usages", "-i", str(n)] for n in range(8)]
    assert npus[0].aicore_utilization_percent == 0.0  # "Aicore Usage Rate(%)", not the NPU Util of 27
    assert npus[0].hbm_used_bytes == 59718 * MIB  # the table's HBM stays; usages only fill gaps


def test_collect_takes_memory_from_usages_when_the_table_has_none() -> None:
    text = fixture("info-310p3-duo-procs.txt").replace("35552/ 44278", "NA   / NA   ")
    answers = {("info",): text, ("info", "-t", "usages", "-i", "0"): fixture("usages-310p-2chip-gpustack.txt")}
    npu_collector, run, _ = collector(answers)
    npus = npu_collector.collect()
    assert run.calls == [["info"], ["info", "-t", "usages", "-i", "0"]]
    assert (npus[0].hbm_total_bytes, npus[0].hbm_used_bytes) == (44280 * MIB, round(44280 * 3 / 100 * MIB))
    assert npus[1].hbm_total_bytes == 43693 * MIB  # chip 1 kept its own table figures


def test_a_failing_usages_keeps_the_npu_with_the_table_figures() -> None:
    answers = {("info",): _without_aicore()}
    answers.update({("info", "-t", "usages", "-i", str(n)): fixture("usages-910b-telegraf.txt") for n in range(8)})
    answers[("info", "-t", "usages", "-i", "3")] = "This device does not support querying usages\n"
    answers[("info", "-t", "usages", "-i", "5")] = subprocess.CalledProcessError(2, "npu-smi", "", "busy")
    npu_collector, _, log = collector(answers)
    npus = npu_collector.collect()
    assert [n.id for n in npus] == list(range(8))
    assert (npus[3].hbm_used_bytes, npus[3].aicore_utilization_percent) == (59716 * MIB, 0.0)
    warnings = log.at("warning")
    assert len(warnings) == 2
    assert "usages -i 3" in warnings[0] and "line 1" in warnings[0]
    assert warnings[1] == "npu-smi info -t usages -i 5 exited with status 2: busy"


def test_tool_absent_is_no_npus_logged_once_at_info() -> None:
    npu_collector, run, log = collector({("info",): FileNotFoundError(2, "No such file", "npu-smi")})
    assert npu_collector.collect() == [] and npu_collector.collect() == []
    assert len(run.calls) == 2
    assert log.at("warning") == [] and len(log.at("info")) == 1 and "npu-smi" in log.at("info")[0]


def test_nonzero_exit_warns_once_per_distinct_message() -> None:
    failure = subprocess.CalledProcessError(255, ["npu-smi", "info"], "", "dcmi module initialize failed. ret is -8005\n")
    answers = {("info",): failure}
    npu_collector, _, log = collector(answers)
    assert npu_collector.collect() == [] and npu_collector.collect() == []
    answers[("info",)] = subprocess.CalledProcessError(1, ["npu-smi", "info"], "", "")
    assert npu_collector.collect() == []
    assert log.at("warning") == [
        "npu-smi info exited with status 255: dcmi module initialize failed. ret is -8005",
        "npu-smi info exited with status 1",
    ]


def test_timeout_is_no_npus_and_a_warning() -> None:
    npu_collector, _, log = collector({("info",): subprocess.TimeoutExpired(["npu-smi", "info"], 10)})
    assert npu_collector.collect() == []
    assert log.at("warning") == ["npu-smi info timed out"]


def test_malformed_info_is_no_npus_and_a_warning_naming_the_line() -> None:
    text = fixture("info-910b3-8npu-procs.txt").replace("122.5", "12x.5")
    npu_collector, _, log = collector({("info",): text})
    assert npu_collector.collect() == [] and npu_collector.collect() == []
    assert len(log.at("warning")) == 1 and "line 22" in log.at("warning")[0]


@pytest.mark.skipif(shutil.which("npu-smi") is not None, reason="this host has npu-smi")
def test_default_runner_on_a_host_without_npu_smi() -> None:
    log = RecordingLog()
    assert NpuCollector(log=log).collect() == []
    assert len(log.at("info")) == 1 and log.at("warning") == []
