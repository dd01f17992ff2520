"""``python -m scheduler simulate`` as users run it: a real process, its output and its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.builders import node, pod, podgroup, queue

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "daemonset" / "examples" / "simulator"


def simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scheduler", "simulate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def write(tmp_path: Path, name: str, docs: list) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_bundled_example_as_json() -> None:
    out = simulate("-f", str(EXAMPLES), "-o", "json", "--at", "2026-06-01T10:00:00+02:00")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    pods = {f"{p['namespace']}/{p['name']}": p for p in result["pods"]}
    assert set(result) >= {"pods", "podGroups", "queues", "stats"}
    assert all(set(p) >= {"namespace", "name", "node", "reason", "evicted"} for p in result["pods"])
    assert pods["prod/finetune-llm-0"]["node"] == "gpu-1"
    assert pods["team-a/giant-0"]["node"] is None and "required members fit" in pods["team-a/giant-0"]["reason"]
    assert pods["team-a/lost-in-zone-9"]["reason"].startswith("0/5 nodes are available:")
    queues = {q["name"]: q["allocated"] for q in result["queues"]}
    assert isinstance(queues["production"]["cpu"], float) and isinstance(queues["production"]["memory"], int)
    assert queues["production"]["nvidia.com/gpu"] == 8
    assert result["stats"]["pods_scheduled"] == sum(1 for p in result["pods"] if p["node"])
    assert {g["name"]: g["phase"] for g in result["podGroups"]}["giant"] == "Inqueue"


def test_table_output() -> None:
    out = simulate("-f", str(EXAMPLES))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].split() == ["NAMESPACE", "POD", "NODE", "STATUS", "REASON"]
    assert "train-resnet-0" in out.stdout and "pod(s) scheduled in" in out.stdout


def test_cycles_runs_exactly_n(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", [node("n1"), pod("p")])
    result = json.loads(simulate("-f", str(path), "-o", "json", "--cycles", "3").stdout)
    assert result["stats"]["cycles"] == 3 and result["stats"]["pods_scheduled"] == 1


BAD = [
    ("unparsable YAML", "bad.yaml", "kind: Pod\nmetadata: {name: [unclosed\n", ["bad.yaml:", "invalid YAML"]),
    ("unknown kind", "kind.yaml", [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}],
     ["kind.yaml:1", "Service web", "unknown kind 'Service'"]),
    ("invalid quantity", "q.yaml", [node("n1"), pod("web", cpu="5x")],
     ["q.yaml:", "Pod default/web", "spec.containers[0].resources.requests.cpu", "invalid quantity '5x'"]),
    ("missing queue", "mq.yaml", [podgroup("job", queue="nope")],
     ["mq.yaml:1", "PodGroup default/job", "queue 'nope' is not defined"]),
    ("duplicate", "dup.yaml", [node("n1"), queue("a"), node("n1")], ["dup.yaml:", "Node n1", "defined twice"]),
    ("pod naming a missing group", "g.yaml", [pod("p", group="ghost")], ["PodGroup default/ghost is not defined"]),
    ("bound to a missing node", "n.yaml", [pod("p", nodeName="ghost")], ["node 'ghost' is not defined"]),
    ("duplicate uid", "u.yaml", [{**pod("a"), "metadata": {"name": "a", "uid": "1234"}},
                                 {**pod("b"), "metadata": {"name": "b", "uid": "1234"}}],
     ["Pod default/b", "metadata.uid: '1234' is already the uid of Pod default/a"]),
]


@pytest.mark.parametrize("filename,content,needles", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_exits_2_and_names_the_problem(tmp_path: Path, filename: str, content, needles) -> None:
    path = tmp_path / filename
    if isinstance(content, str):
        path.write_text(content)
    else:
        write(tmp_path, filename, content)
    out = simulate("-f", str(path), "-o", "json")
    assert out.returncode == 2
    assert out.stdout == ""  # nothing is printed as if it had been scheduled
    message = out.stderr.strip()
    assert message.startswith("error: ") and "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_bad_config_exits_2(tmp_path: Path) -> None:
    objs = write(tmp_path, "o.yaml", [node("n1")])
    conf = tmp_path / "scheduler.conf"
    conf.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments: {binpack.wieght: 1}\n')
    out = simulate("-f", str(objs), "--config", str(conf))
    assert out.returncode == 2 and out.stdout == ""
    assert "tiers[0].plugins[0] (binpack)" in out.stderr and "unknown argument 'binpack.wieght'" in out.stderr


@pytest.mark.parametrize("args,needle", [
    (["--at", "yesterday"], "--at: invalid time"),
    (["--cycles", "0"], "--cycles: must be at least 1"),
    (["-f", "/no/such/file.yaml"], "no such file or folder"),
])
def test_bad_arguments(tmp_path: Path, args: list[str], needle: str) -> None:
    path = write(tmp_path, "o.yaml", [node("n1")])
    out = simulate("-f", str(path), *args)
    assert out.returncode == 2 and needle in out.stderr and out.stdout == ""


def test_pods_for_other_schedulers_are_left_alone(tmp_path: Path) -> None:
    other = pod("kube", cpu="1")
    other["spec"]["schedulerName"] = "default-scheduler"
    volcano = pod("vc", cpu="1")
    volcano["spec"]["schedulerName"] = "volcano"
    unset = pod("plain", cpu="1")
    del unset["spec"]["schedulerName"]
    running = pod("bound", cpu="3", nodeName="n1")
    running["spec"]["schedulerName"] = "default-scheduler"
    path = write(tmp_path, "s.yaml", [node("n1", cpu=8), other, volcano, unset, running])
    result = json.loads(simulate("-f", str(path), "-o", "json").stdout)
    pods = {p["name"]: p for p in result["pods"]}
    assert pods["kube"]["node"] is None and "left to scheduler 'default-scheduler'" in pods["kube"]["reason"]
    assert pods["vc"]["node"] is None and pods["plain"]["node"] == "n1"
    assert {q["name"]: q["allocated"]["cpu"] for q in result["queues"]}["default"] == 4.0  # the bound one counts
    result = json.loads(simulate("-f", str(path), "-o", "json", "--scheduler-name", "volcano").stdout)
    assert {p["name"]: p["node"] for p in result["pods"]}["vc"] == "n1"


POD = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n"
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
# inputs that crashed the simulator with a traceback (issue 13, item 6) and names Kubernetes refuses (item 7):
# each is one line naming the file, the line (and column) or the object, and the field
CRASHED = [
    ("nesting 600 deep", "a: " + "[" * 600 + "]" * 600 + "\n", ["x.yaml:1:103:", "nested deeper than 100 levels"]),
    ("control character", "apiVersion: v1\nkind: Pod\nmetadata: {name: \"a\x07b\"}\n",
     ["x.yaml:3:20:", "character U+0007 is not allowed"]),
    ("bad timestamp", POD.replace("name: web\n", "name: web\n  creationTimestamp: !!timestamp bogus\n"),
     ["x.yaml:5:22:", "tag !!timestamp is not allowed"]),
    ("kind is a mapping", "apiVersion: v1\nkind: {}\nmetadata: {name: a}\n", ["x.yaml:1:", "kind: expected a string"]),
    ("binary label", POD.replace("name: web\n", "name: web\n  labels: {a: !!binary aGVsbG8=}\n"),
     ["x.yaml:5:15:", "tag !!binary is not allowed"]),
    ("a set", POD.replace("name: web\n", "name: web\n  annotations: !!set {a, b}\n"),
     ["x.yaml:5:16:", "tag !!set is not allowed"]),
    ("self-referencing alias", "a: &x\n  b: *x\n", ["x.yaml:2:6:", "alias *x refers to the node that contains it"]),
    ("int 12x", POD.replace("name: web\n", "name: web\n  labels: {a: !!int 12x}\n"),
     ["x.yaml:5:15:", "'12x' is not a valid !!int"]),
    ("metadata a string", "apiVersion: v1\nkind: Pod\nmetadata: \"x\"\n", ["x.yaml:1:", "metadata: expected a mapping"]),
    ("billion laughs", BOMB, ["x.yaml:1:1:", "aliases expand this document by"]),
    ("non-ASCII name", POD.replace("name: web\n", "name: ünï\n", 1), ["x.yaml:1:", "metadata.name:", "RFC 1123"]),
    ("slash in name", POD.replace("name: web\n", "name: a/b\n", 1), ["x.yaml:1:", "metadata.name:", "'a/b'"]),
    ("space in name", POD.replace("name: web\n", "name: a b\n", 1), ["x.yaml:1:", "metadata.name:", "'a b'"]),
    ("hash in name", POD.replace("name: web\n", "name: 'a#b'\n", 1), ["x.yaml:1:", "metadata.name:", "'a#b'"]),
    ("10 MB name", POD.replace("name: web\n", f"name: {'a' * 10_000_000}\n", 1),
     ["x.yaml:1:", "metadata.name: must be no more than 253 characters, got 10,000,000"]),
    ("bad namespace", POD.replace("name: web\n", "name: web\n  namespace: Team_A\n"),
     ["x.yaml:1:", "metadata.namespace:", "RFC 1123 label"]),
    ("env name with =", POD + "    env: [{name: A=B, value: x}]\n",
     ["x.yaml:1:", "spec.containers[0].env[0].name:", "other than '='"]),
]


@pytest.mark.parametrize("text,needles", [c[1:] for c in CRASHED], ids=[c[0] for c in CRASHED])
def test_inputs_that_crashed_are_refused_in_one_line(tmp_path: Path, capsys, text: str, needles: list[str]) -> None:
    import scheduler.cli

    path = tmp_path / "x.yaml"
    path.write_text(text)
    assert scheduler.cli.main(["simulate", "-f", str(path), "-o", "json"]) == 2
    out = capsys.readouterr()
    message = out.err.strip()
    assert out.out == "" and message.startswith(f"error: {path}") and "\n" not in message and len(message) < 500
    for needle in needles:
        assert needle in message, message


def test_a_refused_bomb_costs_little(tmp_path: Path) -> None:
    """A 342-byte alias bomb that expands to half a billion values is refused in a subprocess well within a
    second of its start-up cost, not expanded."""
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 400
    start = time.monotonic()
    out = simulate("-f", str(path))
    assert out.returncode == 2 and "aliases expand this document" in out.stderr
    assert time.monotonic() - start < 20  # the interpreter's start-up dominates; expanding it would not end


# Issue 14's bad inputs, as a user meets them: one line naming the file and the place, exit 2, nothing scheduled.
ACTION_TYPE = ('actions: "allocate, preempt"\ntiers:\n- plugins: [{name: priority}, {name: gang}]\n'
               "configurations:\n- name: preempt\n  arguments: {minCandidateNodesAbsolute: many}\n")
EXTENDER_URL = ('actions: "allocate"\ntiers:\n- plugins:\n  - name: extender\n'
                "    arguments: {extender.urlPrefix: 'localhost 8080', extender.predicateVerb: predicate}\n")
NODEGROUP_QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
                   "spec": {"weight": 1, "affinity": {"nodeGroupAffinity": {"requiredDuringScheduling": ["g1"]}}}}


@pytest.mark.parametrize("conf,objects,needles", [
    (ACTION_TYPE, [], ["sched.conf: configurations[0] (preempt): argument 'minCandidateNodesAbsolute'"]),
    (EXTENDER_URL, [], ["sched.conf: tiers[0].plugins[0] (extender): argument 'extender.urlPrefix'", "'localhost 8080'"]),
    (None, [NODEGROUP_QUEUE], ["o.yaml:", "Queue q: spec.affinity.nodeGroupAffinity.requiredDuringScheduling: "
                                          "unknown field"]),
], ids=["action argument of the wrong type", "extender URL that is not a URL", "nodegroup affinity unknown field"])
def test_issue_14_bad_inputs_are_one_located_line(tmp_path: Path, capsys, conf, objects, needles) -> None:
    import scheduler.cli

    args = ["simulate", "-f", str(write(tmp_path, "o.yaml", [node("n1"), *objects])), "-o", "json"]
    if conf is not None:
        (tmp_path / "sched.conf").write_text(conf)
        args += ["--config", str(tmp_path / "sched.conf")]
    assert scheduler.cli.main(args) == 2
    out = capsys.readouterr()
    message = out.err.strip()
    assert out.out == "" and message.startswith("error: ") and "\n" not in message, out
    for needle in needles:
        assert needle in message, message
