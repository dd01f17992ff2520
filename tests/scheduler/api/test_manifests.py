"""Table-driven tests of manifest parsing (parse_object) and workload loading (load_workload)."""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime

import pytest
import yaml

from scheduler.api.loader import iter_documents, load_workload
from scheduler.api.manifests import ManifestError, parse_object
from scheduler.api.objects import (
    Node,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
)

SRC = "cluster.yaml:7"
PG_API = "scheduling.volcano.sh/v1beta1"
GIB = 2**30


def node(name="n1", status=None, spec=None, **meta):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **meta}, "spec": spec or {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}} if status is None else status}


def pod(name="web-0", namespace="default", spec=None, **meta):
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]} if spec is None else spec
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": spec}


def podgroup(name="train", namespace="team-a", spec=None):
    return {"apiVersion": PG_API, "kind": "PodGroup", "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": 1} if spec is None else spec}


def queue(name="q1", spec=None, status=None):
    return {"apiVersion": PG_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec or {}, "status": status}


def pclass(name="high", value=1000, **extra):
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **extra}


_names = itertools.count()


def containers(*resources):
    """Containers named uniquely across calls: a pod's init and app containers share one namespace of names."""
    return [{"name": f"c{next(_names)}", "resources": r} for r in resources]


def required(*exprs):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}


REQ_PATH = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"

# --- Nodes ---

NODE_CASES = [
    ("allocatable-wins-over-capacity",
     {"allocatable": {"cpu": "3500m", "memory": "6Gi", "pods": "20"}, "capacity": {"cpu": "4", "memory": "8Gi"}},
     {"cpu": 3500, "memory": 6 * GIB, "pods": 20}),
    ("falls-back-to-capacity", {"capacity": {"cpu": "4", "memory": "8Gi", "pods": 50}},
     {"cpu": 4000, "memory": 8 * GIB, "pods": 50}),
    ("empty-allocatable-falls-back", {"allocatable": {}, "capacity": {"cpu": 2}}, {"cpu": 2000, "pods": 110}),
    ("default-pods-110", {"allocatable": {"cpu": "1"}}, {"cpu": 1000, "pods": 110}),
    ("extended-resource", {"allocatable": {"cpu": 8, "nvidia.com/gpu": 4}},
     {"cpu": 8000, "nvidia.com/gpu": 4, "pods": 110}),
]


@pytest.mark.parametrize("status, expected", [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_node_allocatable(status, expected):
    assert parse_object(node(status=status), SRC).allocatable == expected


def test_node_taints_labels_unschedulable():
    spec = {"unschedulable": True, "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"},
                                              {"key": "spot", "effect": "PreferNoSchedule"},
                                              {"key": "zone", "value": 3, "effect": "NoExecute"}]}
    obj = parse_object(node(spec=spec, labels={"zone": "a", "rack": 7}), SRC)
    assert isinstance(obj, Node) and obj.name == "n1"
    assert obj.taints == (Taint("gpu", "true", "NoSchedule"), Taint("spot", "", "PreferNoSchedule"),
                          Taint("zone", "3", "NoExecute"))
    assert obj.labels == {"zone": "a", "rack": "7"}
    assert obj.unschedulable is True
    assert parse_object(node(), SRC).unschedulable is False


# --- Pods ---

def reqs(*each):
    return containers(*({"requests": r} for r in each))


REQUEST_CASES = [
    ("single-container", {"containers": reqs({"cpu": "500m", "memory": "1Gi"})}, {"cpu": 500, "memory": GIB}),
    ("summed-over-containers", {"containers": reqs({"cpu": "500m", "memory": "1Gi"},
                                                   {"cpu": 1, "nvidia.com/gpu": 1})},
     {"cpu": 1500, "memory": GIB, "nvidia.com/gpu": 1}),
    ("limits-when-requests-missing", {"containers": containers({"limits": {"cpu": "2", "memory": "2Gi"}})},
     {"cpu": 2000, "memory": 2 * GIB}),
    ("request-preferred-over-limit",
     {"containers": containers({"requests": {"cpu": 1}, "limits": {"cpu": 4, "memory": "1Gi"}})},
     {"cpu": 1000, "memory": GIB}),
    ("init-container-max-wins", {"containers": reqs({"cpu": 1, "memory": "4Gi"}),
                                 "initContainers": reqs({"cpu": 3, "memory": "1Gi"}, {"cpu": 2, "memory": "2Gi"})},
     {"cpu": 3000, "memory": 4 * GIB}),
    ("init-containers-not-summed", {"containers": reqs({"cpu": 1}), "initContainers": reqs({"cpu": 2}, {"cpu": 2})},
     {"cpu": 2000}),
    ("overhead-added", {"containers": reqs({"cpu": 1}, {"cpu": 1}), "overhead": {"cpu": "250m", "memory": "64Mi"}},
     {"cpu": 2250, "memory": 64 * 2**20}),
    ("overhead-after-init-max", {"containers": reqs({"cpu": 1}), "initContainers": reqs({"cpu": 2}),
                                 "overhead": {"cpu": "100m"}}, {"cpu": 2100}),
    ("no-resources-best-effort", {"containers": [{"name": "c"}]}, {}),
]


@pytest.mark.parametrize("spec, expected", [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES])
def test_pod_requests(spec, expected):
    assert parse_object(pod(spec=spec), SRC).requests == expected


def test_pod_fields():
    spec = {"containers": containers({"requests": {"cpu": "1"}}), "nodeSelector": {"disk": "ssd", "gen": 3},
            "affinity": required({"key": "zone", "operator": "In", "values": ["a", "b"]},
                                 {"key": "cores", "operator": "Gt", "values": [8]}),
            "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
                            {"operator": "Exists"}, {"key": "spot", "operator": "Exists"}],
            "priorityClassName": "high", "priority": 1000, "nodeName": "n1", "schedulerName": "scoria"}
    spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 5, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}}]
    doc = pod("web-0", "team-a", spec=spec, annotations={"scheduling.k8s.io/group-name": "web"},
              creationTimestamp="2024-05-01T10:00:00Z")
    doc["status"] = {"phase": "Running"}
    obj = parse_object(doc, SRC)
    assert isinstance(obj, Pod)
    assert (obj.namespace, obj.name, obj.key, obj.uid) == ("team-a", "web-0", "team-a/web-0", "team-a/web-0")
    assert obj.node_selector == {"disk": "ssd", "gen": "3"}
    assert obj.affinity_terms == (SelectorTerm((Requirement("zone", "In", ("a", "b")),
                                                Requirement("cores", "Gt", ("8",)))),)
    assert obj.preferred_terms == ((5, SelectorTerm((Requirement("metadata.name", "In", ("n2",), True),))),)
    assert obj.tolerations == (Toleration("gpu", "Equal", "true", "NoSchedule"), Toleration("", "Exists"),
                               Toleration("spot", "Exists"))
    assert (obj.priority_class_name, obj.priority, obj.node_name) == ("high", 1000, "n1")
    assert (obj.scheduler_name, obj.phase, obj.group_name) == ("scoria", "Running", "web")
    assert obj.created == datetime(2024, 5, 1, 10, tzinfo=UTC)
    plain = parse_object(pod(namespace=None), SRC)
    assert (plain.namespace, plain.phase, plain.node_name, plain.priority) == ("default", "Pending", "", None)
    assert plain.affinity_terms is None and plain.tolerations == () and plain.node_selector == {}


# --- PodGroups, queues, priority classes ---

def test_podgroup_fields_and_defaults():
    obj = parse_object(podgroup(spec={"minMember": 4, "queue": "prod", "priorityClassName": "high",
                                      "minResources": {"cpu": "8", "memory": "16Gi"}}), SRC)
    assert isinstance(obj, PodGroup)
    assert (obj.key, obj.min_member, obj.queue, obj.priority_class_name) == ("team-a/train", 4, "prod", "high")
    assert obj.min_resources == {"cpu": 8000, "memory": 16 * GIB} and obj.phase == "Pending"
    plain = parse_object(podgroup(spec={}), SRC)
    assert (plain.queue, plain.min_member, plain.min_resources) == ("default", 1, None)
    assert parse_object(podgroup(spec={"queue": ""}), SRC).queue == "default"


def test_podgroup_min_task_member_and_quota_named_min_resources():
    """Volcano's Job controller writes minResources in quota names (pkg/controllers/job/job_controller_util_test.go
    TestCalcPGMinResources: cpu beside requests.cpu, pods beside count/pods); only schedulable resources count."""
    obj = parse_object(podgroup(spec={"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2},
                                      "minResources": {"cpu": "150m", "requests.cpu": "200m", "pods": 2,
                                                       "count/pods": 2, "limits.memory": "1Gi", "requests.memory": "1Gi",
                                                       "nvidia.com/gpu": 1, "services": 1}}), SRC)
    assert obj.min_task_member == {"ps": 1, "worker": 2}
    assert obj.min_resources == {"cpu": 200, "memory": GIB, "nvidia.com/gpu": 1}
    assert parse_object(podgroup(spec={}), SRC).min_task_member == {}


def test_queue_fields_and_defaults():
    obj = parse_object(queue(spec={"weight": 3, "capability": {"cpu": "10", "memory": "20Gi"},
                                   "guarantee": {"resource": {"cpu": "2"}}, "deserved": {"cpu": "5"},
                                   "reclaimable": False, "parent": "root"}, status={"state": "Closed"}), SRC)
    assert isinstance(obj, Queue)
    assert (obj.name, obj.weight, obj.reclaimable, obj.parent, obj.state) == ("q1", 3, False, "root", "Closed")
    assert parse_object(queue(spec={"priority": -7}), SRC).priority == -7
    assert obj.capability == {"cpu": 10000, "memory": 20 * GIB}
    assert obj.guarantee == {"cpu": 2000} and obj.deserved == {"cpu": 5000}
    plain = parse_object(queue(), SRC)
    assert (plain.weight, plain.reclaimable, plain.parent, plain.state, plain.priority) == (1, True, "", "Open", 0)
    assert plain.capability == plain.guarantee == plain.deserved == {}


@pytest.mark.parametrize("api", ["scheduling.k8s.io/v1", "scheduling.k8s.io/v1beta1"], ids=["v1", "v1beta1"])
def test_priority_class(api):
    doc = pclass("high", 1000, globalDefault=True)
    doc["apiVersion"] = api
    assert parse_object(doc, SRC) == PriorityClass("high", 1000, True)
    assert parse_object(pclass("low", -5), SRC) == PriorityClass("low", -5, False)


# --- Refusals: each names the source, the object and the field ---

def _with(doc, key, value):
    return {**copy.deepcopy(doc), key: value}


def ps(**spec):
    """A pod with one container and the given spec fields."""
    return pod(spec={"containers": containers({}), **spec})


def expr(op, values=None, key="zone"):
    return ps(affinity=required({"key": key, "operator": op, **({"values": values} if values else {})}))


P, EXPR = "Pod default/web-0", f"{REQ_PATH}.matchExpressions[0]"
ERROR_CASES = [
    # (doc, object, field path, fragment of the problem)
    ("unknown-kind", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
     "Deployment web", "kind", "unknown kind 'Deployment'"),
    ("missing-kind", {"apiVersion": "v1", "metadata": {"name": "x"}}, "? x", "kind", "missing"),
    ("wrong-apiVersion", _with(pod(), "apiVersion", "apps/v1"), P, "apiVersion", "got 'apps/v1'"),
    ("missing-metadata", {"apiVersion": "v1", "kind": "Node"}, "Node <unnamed>", "metadata", "missing"),
    ("missing-name", pod(name=""), "Pod default/", "metadata.name", "missing"),
    ("request-invalid-quantity", pod(spec={"containers": containers({"requests": {"cpu": "5x"}})}),
     P, "spec.containers[0].resources.requests.cpu", "invalid quantity '5x'"),
    ("second-container-limit", pod(spec={"containers": containers({}, {"limits": {"memory": "1 Gi"}})}),
     P, "spec.containers[1].resources.limits.memory", "'1 Gi'"),
    ("init-container-request", ps(initContainers=containers({"requests": {"cpu": "x"}})),
     P, "spec.initContainers[0].resources.requests.cpu", "'x'"),
    ("negative-request", pod(spec={"containers": containers({"requests": {"memory": "-1Gi"}})}),
     P, "spec.containers[0].resources.requests.memory", "must not be negative"),
    ("overhead-invalid", ps(overhead={"cpu": True}), P, "spec.overhead.cpu", "invalid quantity True"),
    ("no-containers", pod(spec={"containers": []}), P, "spec.containers", "at least one"),
    ("container-not-mapping", pod(spec={"containers": ["nginx"]}), P, "spec.containers[0]", "expected a container"),
    ("bad-phase", _with(pod(), "status", {"phase": "Done"}), P, "status.phase", "'Done'"),
    ("bad-timestamp", pod(creationTimestamp="yesterday"), P, "metadata.creationTimestamp", "invalid timestamp"),
    ("bad-taint-effect", node(spec={"taints": [{"key": "gpu", "effect": "Sometimes"}]}), "Node n1",
     "spec.taints[0].effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute, got 'Sometimes'"),
    ("taint-without-key", node(spec={"taints": [{"value": "x"}]}), "Node n1", "spec.taints[0]", "needs a key"),
    ("node-without-resources", node(status={}), "Node n1", "status.allocatable", "missing"),
    ("node-capacity-invalid", node(status={"capacity": {"cpu": "four"}}), "Node n1", "status.capacity.cpu", "'four'"),
    ("bad-toleration-operator", ps(tolerations=[{"key": "a", "operator": "Equals"}]), P,
     "spec.tolerations[0].operator", "must be Equal or Exists, got 'Equals'"),
    ("bad-toleration-effect", ps(tolerations=[{"operator": "Exists"}, {"key": "a", "effect": "Never"}]), P,
     "spec.tolerations[1].effect", "got 'Never'"),
    ("toleration-without-key", ps(tolerations=[{"value": "x"}]), P, "spec.tolerations[0]",
     "without a key must use operator Exists"),
    ("affinity-operator", expr("Like", ["a"]), P, f"{EXPR}.operator",
     "must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, got 'Like'"),
    ("gt-not-integer", expr("Gt", ["8.5"]), P, f"{EXPR}.values", "operator Gt needs exactly one integer"),
    ("in-without-values", expr("In"), P, f"{EXPR}.values", "operator In needs at least one value"),
    ("exists-with-values", expr("Exists", ["a"]), P, f"{EXPR}.values", "operator Exists takes no values"),
    ("match-fields-label-key", ps(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
     P, f"{REQ_PATH}.matchFields[0]", "supports only key metadata.name"),
    ("empty-term", ps(affinity=required()), P, REQ_PATH, "needs matchExpressions or matchFields"),
    ("preferred-weight", ps(affinity={"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "preference": {}}]}}),
     P, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "got 101"),
    ("negative-minMember", podgroup(spec={"minMember": -1}), "PodGroup team-a/train", "spec.minMember",
     "must not be negative, got -1"),
    ("minResources-invalid", podgroup(spec={"minResources": {"memory": "lots"}}), "PodGroup team-a/train",
     "spec.minResources.memory", "'lots'"),
    ("queue-weight-zero", queue(spec={"weight": 0}), "Queue q1", "spec.weight",
     "must be an integer from 1 to 2147483647, got 0"),
    ("queue-weight-huge", queue(spec={"weight": 10**400}), "Queue q1", "spec.weight", "must be an integer from 1"),
    ("queue-weight-string", queue(spec={"weight": "2"}), "Queue q1", "spec.weight", "expected an integer"),
    ("queue-guarantee-invalid", queue(spec={"guarantee": {"resource": {"cpu": "-1"}}}), "Queue q1",
     "spec.guarantee.resource.cpu", "must not be negative"),
    ("queue-bad-state", queue(status={"state": "Paused"}), "Queue q1", "status.state", "'Paused'"),
    ("priorityclass-without-value", pclass(value=None), "PriorityClass high", "value", "missing"),
    # names, keys and identifiers as Kubernetes validates them (issue 13, items 7 and 11)
    ("name-not-dns", pod(name="Web_0"), "Pod default/Web_0", "metadata.name", "not a lowercase RFC 1123 subdomain"),
    ("name-too-long", node(name="n" * 254), f"Node {'n' * 60}…", "metadata.name", "no more than 253 characters"),
    ("queue-name-slash", queue(name="a/b"), "Queue a/b", "metadata.name", "'a/b' is not a lowercase"),
    ("namespace-with-dot", pod(namespace="team.a"), "Pod team.a/web-0", "metadata.namespace", "RFC 1123 label"),
    ("namespace-not-string", pod(namespace=["a"]), "Pod default/web-0", "metadata.namespace", "expected a string"),
    ("uid-path", pod(uid="../x"), P, "metadata.uid", "'../x' is not a valid uid"),
    ("uid-not-string", pod(uid=12), P, "metadata.uid", "expected a string"),
    ("label-key", pod(labels={"a b": "c"}), P, "metadata.labels", "key 'a b' is not a qualified name"),
    ("label-key-prefix", pod(labels={"Example.com/a": "c"}), P, "metadata.labels", "key prefix part"),
    ("label-value", pod(labels={"a": "b c"}), P, "metadata.labels.a", "'b c' is not a valid label value"),
    ("label-key-number", pod(labels={7: "c"}), P, "metadata.labels", "keys must be strings, got int 7"),
    ("label-value-long", pod(labels={"a": "b" * 64}), P, "metadata.labels.a", "no more than 63 characters"),
    ("annotations-too-large", pod(annotations={"a": "x" * (256 * 1024)}), P, "metadata.annotations",
     "may total at most 262,144"),
    ("node-selector", ps(nodeSelector={"zone": "a/b"}), P, "spec.nodeSelector.zone", "not a valid label value"),
    ("container-without-name", pod(spec={"containers": [{"resources": {}}]}), P, "spec.containers[0].name",
     "missing: every container needs a name"),
    ("container-name", pod(spec={"containers": [{"name": "Main"}]}), P, "spec.containers[0].name",
     "'Main' is not a lowercase RFC 1123 label"),
    ("container-twice", pod(spec={"containers": [{"name": "a"}], "initContainers": [{"name": "a"}]}), P,
     "spec.containers[0].name", "'a' is used twice (also spec.initContainers[0].name)"),
    ("env-equals", pod(spec={"containers": [{"name": "a", "env": [{"name": "A=B"}]}]}), P,
     "spec.containers[0].env[0].name", "printable ASCII characters other than '='"),
    ("env-nul", pod(spec={"containers": [{"name": "a", "env": [{"name": "A\x00"}]}]}), P,
     "spec.containers[0].env[0].name", "not a valid environment variable name"),
    ("env-not-mapping", pod(spec={"containers": [{"name": "a", "env": ["A=B"]}]}), P, "spec.containers[0].env[0]",
     "expected an environment variable"),
    ("env-value-number", pod(spec={"containers": [{"name": "a", "env": [{"name": "A", "value": 1}]}]}), P,
     "spec.containers[0].env[0].value", "expected a string"),
    ("init-env", ps(initContainers=[{"name": "i", "env": [{"name": ""}]}]), P, "spec.initContainers[0].env[0].name",
     "must not be empty"),
    ("envfrom-prefix", pod(spec={"containers": [{"name": "a", "envFrom": [{"prefix": "X="}]}]}), P,
     "spec.containers[0].envFrom[0].prefix", "other than '='"),
    ("resource-name", pod(spec={"containers": containers({"requests": {"my gpu": "1"}})}), P,
     "spec.containers[0].resources.requests", "invalid resource name: 'my gpu' is not a qualified name"),
    ("priority-int32", ps(priority=2**31), P, "spec.priority", "must be a 32-bit integer"),
    ("priorityclass-int32", pclass(value=-(2**31) - 1), "PriorityClass high", "value", "must be a 32-bit integer"),
    ("grace-negative", ps(terminationGracePeriodSeconds=-1), P, "spec.terminationGracePeriodSeconds",
     "must be an integer from 0"),
    ("restart-policy", ps(restartPolicy="Sometimes"), P, "spec.restartPolicy", "got 'Sometimes'"),
    ("taint-key-mapping", node(spec={"taints": [{"key": {"a": 1}, "effect": "NoSchedule"}]}), "Node n1",
     "spec.taints[0].key", "expected a string, got dict"),
    ("min-task-member-negative", podgroup(spec={"minTaskMember": {"ps": -1}}), "PodGroup team-a/train",
     "spec.minTaskMember.ps", "must be a non-negative 32-bit integer"),
    ("min-task-member-list", podgroup(spec={"minTaskMember": [1]}), "PodGroup team-a/train", "spec.minTaskMember",
     "expected a mapping"),
    ("min-resources-requests-quantity", podgroup(spec={"minResources": {"requests.cpu": "lots"}}),
     "PodGroup team-a/train", "spec.minResources.requests.cpu", "invalid quantity 'lots'"),
    ("queue-priority", queue(spec={"priority": 2**31}), "Queue q1", "spec.priority", "must be a 32-bit integer"),
    ("kind-not-string", {"apiVersion": "v1", "kind": {}, "metadata": {"name": "a"}}, "? a", "kind",
     "expected a string, got dict"),
]


@pytest.mark.parametrize("doc, obj, path, fragment", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_parse_object_refuses(doc, obj, path, fragment):
    with pytest.raises(ManifestError) as info:
        parse_object(doc, SRC)
    assert (info.value.source, info.value.obj) == (SRC, obj)
    assert str(info.value).startswith(f"{SRC}: {obj}: {path}: ")
    assert fragment in str(info.value)


@pytest.mark.parametrize("doc", [["a"], "text", None], ids=["list", "string", "null"])
def test_parse_object_refuses_non_mapping(doc):
    with pytest.raises(ManifestError, match=rf"^{SRC}: expected a Kubernetes object \(a mapping\)"):
        parse_object(doc, SRC)


# --- Loader ---

NODE_A = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: 1}}\n"
NODE_B = "apiVersion: v1\nkind: Node\nmetadata: {name: b}\nstatus: {allocatable: {cpu: 2}}\n"


def test_multi_document_file_with_empty_documents(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("---\n---\n" + NODE_A + "---\n# only a comment\n---\n" + NODE_B + "---\n")
    docs = list(iter_documents(path))
    assert [(d["metadata"]["name"], where) for d, where in docs] == [("a", f"{path}:3"), ("b", f"{path}:10")]
    work = load_workload([path])
    assert [n.name for n in work.nodes] == ["a", "b"]
    assert work.sources[("Node", "b")] == f"{path}:10"


def test_folder_read_recursively_in_name_order(tmp_path):
    (tmp_path / "sub").mkdir()  # written out of order; read back in name order, .txt skipped
    (tmp_path / "z.json").write_text('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-z"},'
                                     ' "status": {"allocatable": {"cpu": 1}}}')
    for name, text in (("sub/c.yml", "n-c"), ("b.yaml", "n-b"), ("a.yaml", "n-a"), ("notes.txt", "[bad")):
        (tmp_path / name).write_text(NODE_A.replace("name: a", f"name: {text}"))
    work = load_workload([tmp_path])
    assert [n.name for n in work.nodes] == ["n-a", "n-b", "n-c", "n-z"]


def test_list_kind_is_unpacked(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text(NODE_A + "---\napiVersion: v1\nkind: List\nitems:\n"
                    "- {apiVersion: v1, kind: Node, metadata: {name: b}, status: {capacity: {cpu: 1}}}\n"
                    "- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}\n")
    work = load_workload([path])
    assert [n.name for n in work.nodes] == ["a", "b"] and [q.name for q in work.queues] == ["q"]
    assert work.sources[("Queue", "q")] == f"{path}:10 (items[1])"  # the item's own line


def test_invalid_yaml_names_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(NODE_A + "---\nmetadata: [a\nkind: Node\n")
    with pytest.raises(ManifestError, match=rf"^{path}:7:5: invalid YAML: "):
        load_workload([path])


@pytest.mark.parametrize("second_file", [False, True], ids=["same-file", "other-file"])
def test_duplicate_object_names_both_places(tmp_path, second_file):
    first, second, dup = tmp_path / "a.yaml", tmp_path / ("b.yaml" if second_file else "a.yaml"), NODE_B
    first.write_text(NODE_A + "---\n" + NODE_B + ("" if second_file else "---\n" + dup))
    if second_file:
        second.write_text(dup)
    with pytest.raises(ManifestError) as info:
        load_workload([tmp_path])
    line = 1 if second_file else 11
    assert str(info.value) == f"{second}:{line}: Node b: defined twice (first at {first}:6)"


def test_same_name_in_other_namespace_or_kind_is_not_a_duplicate(tmp_path):
    (tmp_path / "p.yaml").write_text(yaml.safe_dump_all([pod("w", "ns1"), pod("w", "ns2"), node("w"), queue("w")]))
    work = load_workload([tmp_path])
    assert [p.key for p in work.pods] == ["ns1/w", "ns2/w"] and [n.name for n in work.nodes] == ["w"]


def _ann(group=None, queue=None):
    out = {"scheduling.k8s.io/group-name": group, "scheduling.volcano.sh/queue-name": queue}
    return {k: v for k, v in out.items() if v}


REFERENCE_CASES = [
    # (documents, first object of the message, fragment)
    ("podgroup-missing-queue", [podgroup(spec={"queue": "gpu"})], "PodGroup team-a/train",
     "spec.queue: queue 'gpu' is not defined"),
    ("podgroup-missing-priorityclass", [podgroup(spec={"priorityClassName": "vip"})], "PodGroup team-a/train",
     "spec.priorityClassName: PriorityClass 'vip' is not defined"),
    ("pod-missing-podgroup", [pod(annotations=_ann(group="train"))], P, "PodGroup default/train is not defined"),
    ("pod-podgroup-other-namespace", [podgroup(), pod(annotations=_ann(group="train"))], P,
     "PodGroup default/train is not defined"),
    ("pod-missing-queue-annotation", [pod(annotations=_ann(queue="nope"))], P, "queue 'nope' is not defined"),
    ("pod-missing-node", [ps(nodeName="ghost")], P, "spec.nodeName: node 'ghost' is not defined"),
    ("pod-missing-priorityclass", [ps(priorityClassName="vip")], P,
     "spec.priorityClassName: PriorityClass 'vip' is not defined"),
    ("queue-parent-missing", [queue("child", {"parent": "ghost"})], "Queue child",
     "spec.parent: queue 'ghost' is not defined"),
    ("queue-parent-self", [queue("a", {"parent": "a"})], "Queue a", "queues form a cycle through 'a'"),
    ("queue-parent-cycle", [queue("a", {"parent": "b"}), queue("b", {"parent": "a"})], "Queue a",
     "queues form a cycle"),
    ("two-global-defaults", [pclass("p1", 1, globalDefault=True), pclass("p2", 2, globalDefault=True)],
     "PriorityClass p2", "only one PriorityClass may be the default (also p1)"),
]


@pytest.mark.parametrize("docs, obj, fragment", [c[1:] for c in REFERENCE_CASES],
                         ids=[c[0] for c in REFERENCE_CASES])
def test_dangling_references_refused(tmp_path, docs, obj, fragment):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    with pytest.raises(ManifestError) as info:
        load_workload([path])
    assert str(info.value).startswith(f"{path}:")
    assert f": {obj}: " in str(info.value)
    assert fragment in str(info.value)


def test_valid_references_and_implicit_default_queue(tmp_path):
    docs = [node("n1"), pclass("high", 10), pclass("base", 0, globalDefault=True),
            queue("parent", {"parent": "root"}), queue("child", {"parent": "parent"}),
            podgroup("train", "team-a", {"minMember": 1, "queue": "child", "priorityClassName": "high"}),
            podgroup("dflt", "team-a", {"queue": "default"}),
            pod("w-0", "team-a", annotations=_ann(group="train")),
            _with(ps(nodeName="n1", priorityClassName="system-node-critical"), "metadata",
                  {"name": "w-1", "annotations": _ann(queue="default")})]
    (tmp_path / "w.yaml").write_text(yaml.safe_dump_all(docs))
    work = load_workload([tmp_path])
    assert [g.queue for g in work.podgroups] == ["child", "default"]
    assert [q.name for q in work.queues] == ["parent", "child"]
    assert [p.group_name for p in work.pods] == ["train", ""]


@pytest.mark.parametrize("name, fragment", [("missing.yaml", "no such file or folder"),
                                            ("", "no YAML or JSON files found")], ids=["missing-path", "empty-folder"])
def test_no_input_refused(tmp_path, name, fragment):
    with pytest.raises(ManifestError, match=fragment):
        load_workload([tmp_path / name])


# --- Bugs found by these tests, fixed ---

@pytest.mark.parametrize("value", [False, 0, None], ids=["false", "zero", "null"])
def test_toleration_matches_taint_with_same_scalar_value(value):
    n = parse_object(node(spec={"taints": [{"key": "k", "value": value, "effect": "NoSchedule"}]}), SRC)
    p = parse_object(ps(tolerations=[{"key": "k", "operator": "Equal", "value": value, "effect": "NoSchedule"}]), SRC)
    assert p.tolerations[0].tolerates(n.taints[0])


def test_preferred_term_not_mapping_is_a_manifest_error():
    doc = ps(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["zone=a"]}})
    with pytest.raises(ManifestError, match="preferredDuringSchedulingIgnoredDuringExecution\\[0\\]"):
        parse_object(doc, SRC)


@pytest.mark.parametrize("value", ["--5", "²"], ids=["double-minus", "superscript-two"])
def test_gt_value_must_be_an_integer_that_int_accepts(value):
    with pytest.raises(ManifestError, match="needs exactly one integer"):
        parse_object(expr("Gt", [value], key="cores"), SRC)
