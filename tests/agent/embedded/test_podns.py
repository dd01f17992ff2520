"""The pure parts of a pod's surroundings: volumes read from the manifest and its START context, the mount plan,
the hosts file, the network context."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agent.embedded.podnet import PodAddress
from agent.embedded.podns import Bind, PlanError, hosts_text, plan
from agent.embedded.spec import SpecError, parse_pod
from agent.embedded.volumes import VolumeError, parse_volumes


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_configmap_and_secret_volumes_take_items_modes_and_optional() -> None:
    spec = {"volumes": [
        {"name": "cm", "configMap": {"name": "c", "defaultMode": 0o640}},
        {"name": "some", "configMap": {"name": "c", "items": [{"key": "b", "path": "sub/b.txt", "mode": 0o600}]}},
        {"name": "sec", "secret": {"secretName": "s"}},
        {"name": "gone", "configMap": {"name": "absent", "optional": True}},
        {"name": "claim", "persistentVolumeClaim": {"claimName": "x"}},
    ]}
    volumes = parse_volumes(spec, {"c": {"data": {"a": "1", "b": "2"}, "binaryData": {"z": b64("bin")}}},
                            {"s": {"data": {"k": b64("secret")}}})
    assert volumes["cm"].files == (("a", b"1", 0o640), ("b", b"2", 0o640), ("z", b"bin", 0o640))
    assert volumes["some"].files == (("sub/b.txt", b"2", 0o600),)
    assert volumes["sec"].files == (("k", b"secret", 0o644),) and volumes["sec"].read_only
    assert volumes["gone"].files == () and not volumes["claim"].supported


@pytest.mark.parametrize("volume,words", [
    ({"name": "v", "configMap": {"name": "absent"}}, "configMap 'absent' not found"),
    ({"name": "v", "configMap": {"name": "c", "items": [{"key": "nope", "path": "x"}]}}, "key 'nope' not found"),
    ({"name": "v", "configMap": {"name": "c", "items": [{"key": "a", "path": "../x"}]}}, "relative path"),
    ({"name": "v", "configMap": {"name": "c", "defaultMode": 4096}}, "file mode"),
    ({"name": "v", "secret": {"secretName": "bad"}}, "not base64"),
    ({"name": "v", "configMap": {"name": "c"}, "secret": {"secretName": "s"}}, "exactly one source"),
], ids=["missing", "missing-key", "escaping-path", "bad-mode", "not-base64", "two-sources"])
def test_volumes_that_cannot_be_given_say_why(volume: dict, words: str) -> None:
    with pytest.raises(VolumeError) as err:
        parse_volumes({"volumes": [volume]}, {"c": {"data": {"a": "1"}}}, {"bad": {"data": {"k": "***"}}})
    assert words in err.value.message


def test_a_mount_the_host_lacks_is_made_in_an_overlay_keeping_what_is_mounted_below(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "ssl").mkdir(parents=True)
    (etc / "resolv.conf").write_text("x")
    volume = tmp_path / "vol"
    (volume / ".ssh").mkdir(parents=True)  # a subPath (mount_source makes it)
    binds = [Bind(volume, str(etc / "volcano"), read_only=True), Bind(volume / ".ssh", str(etc / "volcano" / ".ssh")),
             Bind(tmp_path / "hosts", str(etc / "hosts"))]
    (tmp_path / "hosts").write_text("")
    steps = plan(binds, scratch=tmp_path / "scratch", hostname="master-0",
                 mounts=["/", str(etc / "resolv.conf"), "/proc"])
    layer = tmp_path / "scratch" / "overlay0"
    assert steps == [
        "host", "master-0",
        "keep", str(etc / "resolv.conf"), str(layer / "kept" / "0"),
        "ovl", str(etc), str(layer / "upper"), str(layer / "work"),
        "file", str(etc / "resolv.conf"), "move", str(layer / "kept" / "0"), str(etc / "resolv.conf"),
        "file", str(etc / "hosts"), "dir", str(etc / "volcano"),
        "bind", str(tmp_path / "hosts"), str(etc / "hosts"),
        "ro", str(volume), str(etc / "volcano"),
        "bind", str(volume / ".ssh"), str(etc / "volcano" / ".ssh"),
    ]
    assert (volume / ".ssh").is_dir()  # the inner mount point: in the outer mount's source


def test_mounts_that_cannot_be_made_are_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(PlanError, match="has a file there"):
        plan([Bind(tmp_path, str(tmp_path / "f"))], scratch=tmp_path / "s", mounts=[])
    with pytest.raises(PlanError, match="cannot be overlaid"):
        plan([Bind(tmp_path, "/scoria-no-such-top-level/x")], scratch=tmp_path / "s", mounts=[])


def test_the_hosts_file_lists_the_pod_its_namespace_and_its_aliases() -> None:
    text = hosts_text(own=("10.0.0.5", ["m-0.j.ns.svc.cluster.local", "m-0.j", "m-0"]),
                      table=[("10.0.0.5", ["m-0.j", "j"]), ("10.0.0.6", ["w-0.j", "j"])],
                      aliases=[("1.2.3.4", ["x"])])
    lines = [line for line in text.splitlines() if not line.startswith(("#", "::1", "fe00", "127."))]
    assert lines == ["10.0.0.5\tm-0.j.ns.svc.cluster.local m-0.j m-0", "10.0.0.5\tj", "10.0.0.6\tw-0.j j",
                     "1.2.3.4\tx"]


def pod(**scoria: object) -> dict:
    return {"metadata": {"uid": "u1", "name": "p", "namespace": "ns"},
            "spec": {"hostname": "m-0", "subdomain": "j", "containers": [{"name": "c", "command": ["true"],
                     "env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]},
            "scoria": scoria}


def test_the_network_context_gives_the_address_names_and_status_pod_ip() -> None:
    spec = parse_pod(pod(network={"podIP": "10.9.0.7", "cidr": "10.9.0.0/16", "gateway": "10.9.0.1"},
                         hosts=[["10.9.0.7", ["m-0.j"]]]))
    assert spec.network.address == PodAddress("10.9.0.7", "10.9.0.0/16", "10.9.0.1")
    assert spec.network.hosts == (("10.9.0.7", ("m-0.j",)),) and not spec.network.host_network
    assert spec.containers[0].env["IP"] == "10.9.0.7"


@pytest.mark.parametrize("scoria,words", [
    ({"network": {"podIP": "10.8.0.7", "cidr": "10.9.0.0/16", "gateway": "10.9.0.1"}}, "is not an address of"),
    ({"network": {"podIP": "10.9.0.7", "cidr": "10.9.0.0/16", "gateway": "10.9.0.1"}, "hosts": [["1.1.1.1", ["a b"]]]},
     "cannot be written into a hosts file"),
    ({"network": {"podIP": "10.9.0.7", "cidr": "10.9.0.0/16", "gateway": "10.9.0.1"}, "hosts": {"a": 1}},
     "expected a list"),
], ids=["address-outside-range", "name-with-space", "hosts-not-a-list"])
def test_a_bad_network_context_is_refused(scoria: dict, words: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_pod(pod(**scoria))
    assert words in err.value.message
