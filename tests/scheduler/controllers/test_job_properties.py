"""Properties of the Job controller under random histories (hypothesis): whatever happens to a Job's pods,
PodGroup and spec, and whatever Commands arrive, the controller settles (its own writes are changes it sees,
as Volcano's informers do: a pod it made is a new pod the next time) within a few reconciles, after which a
reconcile writes nothing; it never creates a pod whose name is taken; and the pods it keeps are the spec's."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.controllers.host import MemoryHost
from scheduler.controllers.jobs import keys
from scheduler.controllers.kinds import JOB, POD, kind_of, name_of
from tests.support.jobcluster import JobCluster, job_manifest

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)


class StrictHost(MemoryHost):
    """A MemoryHost that fails the test if a pod is created under a name that is taken, and that remembers what
    it listed, to check that the controllers never change what they are given."""

    created: list[str]
    listed: list[tuple[dict, dict]]

    def list(self, kind):
        out = super().list(kind)
        self.listed.extend((o, copy.deepcopy(o)) for o in out)
        return out

    def unchanged(self) -> bool:
        same = all(given == snapshot for given, snapshot in self.listed)
        self.listed = []
        return same

    def create(self, obj: dict) -> dict:
        if kind_of(obj) == POD:
            assert self.get(POD, "default", name_of(obj)) is None, f"pod {name_of(obj)} created twice"
            self.created.append(name_of(obj))
        return super().create(obj)


POLICIES = st.sampled_from([
    [], [{"event": "PodFailed", "action": "RestartJob"}], [{"event": "PodEvicted", "action": "RestartTask"}],
    [{"exitCode": 3, "action": "AbortJob"}], [{"event": "PodFailed", "action": "RestartPod"}],
    [{"event": "PodPending", "action": "RestartPod", "timeout": "30s"}], [{"event": "*", "action": "CompleteJob"}],
])
OPS = st.lists(st.one_of(
    st.tuples(st.just("phase"), st.sampled_from(["Running", "Succeeded", "Failed", "Pending"]), st.integers(0, 5),
              st.sampled_from([1, 3])),
    st.tuples(st.just("evict"), st.integers(0, 5)),
    st.tuples(st.just("admit")),
    st.tuples(st.just("group"), st.sampled_from(["Running", "Unknown", "Inqueue"])),
    st.tuples(st.just("command"), st.sampled_from(["AbortJob", "ResumeJob", "RestartJob", "TerminateJob"])),
    st.tuples(st.just("scale"), st.integers(0, 4)),
    st.tuples(st.just("time"), st.integers(1, 90)),
    st.tuples(st.just("finish")),
), max_size=25)


def _apply(cluster: JobCluster, op: tuple, step: int) -> None:
    pods = cluster.pod_names()
    if op[0] == "phase" and pods:
        cluster.set_phase(op[1], pods[op[2] % len(pods)], exit_code=op[3] if op[1] == "Failed" else None)
    elif op[0] == "evict" and pods:
        name = pods[op[1] % len(pods)]
        if not cluster.pods()[name]["metadata"].get("deletionTimestamp"):
            cluster.evict(name)
    elif op[0] == "admit":
        cluster.admit()
    elif op[0] == "group" and cluster.podgroups():
        cluster.set_group_phase(op[1])
    elif op[0] == "command":
        cluster.command(op[1], name=f"cmd-{step}")
    elif op[0] == "scale":
        job = cluster.job()
        job["spec"]["tasks"][1]["replicas"] = op[1]
        cluster.host.update(job)
        cluster.host.writes -= 1
    elif op[0] == "time":
        cluster.advance(op[1])
    elif op[0] == "finish":
        cluster.host.finish_terminating()


def _check(cluster: JobCluster) -> None:
    job = cluster.job()
    phase = (job.get("status") or {}).get("state", {}).get("phase")
    assert phase in keys.PHASES
    replicas = {t["name"]: t["replicas"] for t in job["spec"]["tasks"]}
    admitted = any((g.get("status") or {}).get("phase", "Pending") != "Pending" for g in cluster.podgroups())
    for pod in cluster.host.list(POD):
        notes = pod["metadata"]["annotations"]
        task, index = notes[keys.TASK_SPEC], int(notes[keys.TASK_INDEX])
        assert pod["metadata"]["name"] == f"train-{task}-{index}"
        # a pending or running job whose group is admitted keeps exactly its spec's pods (finished ones included);
        # killing phases keep finished pods, and nothing is synced before the group is admitted (as in Volcano)
        if phase in ("Pending", "Running") and admitted and not pod["metadata"].get("deletionTimestamp"):
            assert index < replicas[task], f"{pod['metadata']['name']} beyond {replicas[task]} replicas in {phase}"


@PROPS
@given(policies=POLICIES, graceful=st.booleans(), ops=OPS)
def test_reconcile_is_idempotent_and_never_makes_a_pod_twice(policies, graceful, ops) -> None:
    cluster = JobCluster(graceful_pods=graceful)
    strict = StrictHost(clock=lambda: cluster.now, graceful_pods=graceful)
    strict.created, strict.listed = [], []
    cluster.host = strict
    strict.create(job_manifest(policies=policies, maxRetry=3))
    for step, op in enumerate(ops):
        _apply(cluster, op, step)
        for _ in range(8):
            if cluster.reconcile().writes == 0:
                break
        else:
            raise AssertionError(f"no fixpoint after {op}")
        assert strict.unchanged(), "a controller changed an object it listed"
        before_writes, before_events = strict.writes, len(strict.events)
        again = cluster.reconcile()
        assert again.writes == 0, f"a reconcile after the fixpoint wrote {again.writes} after {op}"
        cluster.loop.seen.clear()  # decide again, not trusting that unchanged objects mean an unchanged decision
        forced = cluster.reconcile()
        assert forced.writes == 0, f"a forced decision after the fixpoint wrote {forced.writes} after {op}"
        assert strict.writes == before_writes and len(strict.events) == before_events
        if strict.get(JOB, "default", "train") is None:
            return
        _check(cluster)


@PROPS
@given(ops=OPS)
def test_decisions_are_deterministic(ops) -> None:
    """Two clusters given the same history end with the same objects."""
    def run() -> list:
        cluster = JobCluster()
        cluster.host.create(job_manifest(policies=[{"event": "PodFailed", "action": "RestartJob"}]))
        for step, op in enumerate(ops):
            _apply(cluster, op, step)
            cluster.reconcile()
        return [(k.kind, sorted(cluster.host.objects[k])) for k in cluster.host.objects] + \
            [(e["reason"], e["message"]) for e in cluster.host.events]
    assert run() == run()
