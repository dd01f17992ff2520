"""What daemonset/ ships loads, and the placement example schedules as its comments say."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from scheduler.framework.config import load_config
from scheduler.modes.simulator.simulation import simulate

ROOT = Path(__file__).resolve().parents[1]


def test_the_colocation_config_loads_with_every_placement_plugin() -> None:
    config = load_config(ROOT / "daemonset" / "config" / "scheduler-colocation.conf")
    names = set(config.plugin_names())
    assert {"numa-aware", "deviceshare", "usage", "colocation", "forecast", "tdm"} <= names
    assert "shuffle" in config.actions


def test_the_placement_example_places_as_its_comments_say() -> None:
    config = load_config(ROOT / "daemonset" / "config" / "scheduler-colocation.conf")
    sim = simulate([ROOT / "daemonset" / "examples" / "placement"], config=config,
                   at=datetime.fromisoformat("2026-11-23T10:00:00+00:00"))
    pods = {p["name"]: p for p in sim.to_dict()["pods"]}
    assert all(p["node"] for p in pods.values()), [(n, p["reason"]) for n, p in pods.items() if not p["node"]]
    train = pods["train-0"]
    quad = sorted(d["index"] for d in train["devices"])
    assert quad in ([0, 1, 2, 3], [4, 5, 6, 7]) and train["numaNodes"] == [quad[0] // 4]
    assert pods["db-0"]["numaNodes"] in ([0], [1])
    assert pods["infer-0"]["devices"][0]["uuid"] == pods["infer-1"]["devices"][0]["uuid"]  # binpacked
    assert pods["infer-0"]["devices"][0]["memoryMiB"] == 20000 and pods["infer-0"]["devices"][0]["cores"] == 30
    assert all(pods[f"etl-{i}"]["node"] != "cpu-a" for i in range(3))


def test_the_table_shows_zones_and_devices(capsys) -> None:
    from scheduler.cli import main

    assert main(["simulate", "-f", str(ROOT / "daemonset" / "examples" / "placement"), "--config",
                 str(ROOT / "daemonset" / "config" / "scheduler-colocation.conf"),
                 "--at", "2026-11-23T10:00:00+00:00"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["NAMESPACE", "POD", "NODE", "STATUS", "NUMA", "DEVICES", "REASON"]
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith(("ml ", "shop "))}
    assert "gpu4,gpu5,gpu6,gpu7" in lines["train-0"] or "gpu0,gpu1,gpu2,gpu3" in lines["train-0"]
    assert ":20000Mi/30%" in lines["infer-0"]


def test_the_readme_volcano_compatibility_table_is_current() -> None:
    """README's "Volcano compatibility" table lists every Volcano action, plugin and argument with what Scoria does
    with it; it is made by hack/volcano_compat.py from the registries, so a key that changes status changes it."""
    from hack import volcano_compat as compat

    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(compat.BEGIN), readme.index(compat.END) + len(compat.END)
    assert readme[start:end] == compat.table(), "README is stale: run python hack/volcano_compat.py --write"
    assert {"allocate", "preempt", "reclaim", "backfill", "enqueue"} <= {r[0].split("`")[1] for r in compat.rows()
                                                                          if r[0].startswith("action")}
