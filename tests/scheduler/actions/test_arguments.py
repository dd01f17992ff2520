"""Action arguments (``configurations[].arguments``): every key Volcano's actions read is accepted and typed
(issue 14, difference 3)."""

from __future__ import annotations

import logging

import pytest
import yaml

from scheduler.framework.args import ArgError
from scheduler.framework.config import ConfigError, parse_config
from scheduler.framework.plugin import ACTIONS

# What Volcano's actions read (GetArgOfActionFromConf in pkg/scheduler/actions/*/*.go, with their defaults);
# enqueue's overcommit-factor is from before v1.3 (docs/design/job-resource-reservation-design.md).
VOLCANO_KEYS = {
    "allocate": {"predicateErrorCacheEnable": True},
    "backfill": {"predicateErrorCacheEnable": True},
    "reclaim": {"predicateErrorCacheEnable": True},
    "preempt": {"predicateErrorCacheEnable": True, "enableTopologyAwarePreemption": False,
                "topologyAwarePreemptWorkerNum": 16, "minCandidateNodesPercentage": 10,
                "minCandidateNodesAbsolute": 1, "maxCandidateNodesAbsolute": 100},
    "enqueue": {"overcommit-factor": 1.2},
}


def configured(action: str, arguments: str) -> str:
    return f"""
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}]
configurations:
- name: {action}
  arguments: {arguments}
"""


@pytest.mark.parametrize("action", sorted(VOLCANO_KEYS))
def test_volcanos_keys_are_accepted_with_volcanos_defaults(action: str) -> None:
    spec = ACTIONS[action].arguments
    by_key = {arg.key: arg for arg in spec.values()}
    assert {k: by_key[k].default for k in VOLCANO_KEYS[action]} == VOLCANO_KEYS[action]
    args = ACTIONS[action].parse(dict(VOLCANO_KEYS[action]))
    assert not args.warnings  # the defaults say nothing


def test_values_are_typed_as_volcano_reads_them() -> None:
    config = parse_config(configured("preempt", '{enableTopologyAwarePreemption: "true", '
                                                 'minCandidateNodesAbsolute: 3, predicateErrorCacheEnable: false}'))
    args = config.action_args["preempt"]
    assert args.topology_aware is True and args.min_absolute == 3 and args.predicate_error_cache is False


@pytest.mark.parametrize("action,arguments,key", [
    ("preempt", "{enableTopologyAwarePreemption: sometimes}", "enableTopologyAwarePreemption"),
    ("preempt", "{minCandidateNodesPercentage: 150}", "minCandidateNodesPercentage"),
    ("preempt", "{maxCandidateNodesAbsolute: many}", "maxCandidateNodesAbsolute"),
    ("allocate", "{predicateErrorCacheEnable: [1]}", "predicateErrorCacheEnable"),
    ("enqueue", "{overcommit-factor: lots}", "overcommit-factor"),
])
def test_a_wrong_type_is_refused_naming_the_key_and_where(action: str, arguments: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"sched.conf: configurations\[0\] \({action}\): argument '{key}'"):
        parse_config(configured(action, arguments), "sched.conf")
    with pytest.raises(ArgError, match=key):
        ACTIONS[action].parse(yaml.safe_load(arguments))


def test_a_misspelt_key_is_refused_with_the_closest_known_one() -> None:
    with pytest.raises(ConfigError, match="unknown argument 'enableTopologyAwarePreempt'; did you mean "
                                          "'enableTopologyAwarePreemption'"):
        parse_config(configured("preempt", "{enableTopologyAwarePreempt: true}"))


@pytest.mark.parametrize("action,arguments,key", [
    ("preempt", "{topologyAwarePreemptWorkerNum: 4}", "topologyAwarePreemptWorkerNum"),
    ("allocate", "{predicateErrorCacheEnable: false}", "predicateErrorCacheEnable"),
    ("enqueue", "{overcommit-factor: 1.5}", "overcommit-factor"),
])
def test_a_key_without_effect_is_warned_about_at_load(action: str, arguments: str, key: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_config(configured(action, arguments), "sched.conf")
    assert any(f"configurations[0] ({action}): argument '{key}' has no effect" in r.getMessage()
               for r in caplog.records)
