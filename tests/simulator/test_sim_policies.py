"""What the engine sees under strict, idle and pool."""

from __future__ import annotations

import pytest

from scheduler.engine.types import IDLE_ACCEPTABLE, IDLE_OFF, IDLE_ONLY, Node, Quota, gpu_key
from scheduler.simulator.policies import build_policy, fits_guarantee
from scheduler.simulator.traces import Cluster, TraceJob

A100 = gpu_key("A100")
CLUSTER = Cluster(
    nodes=tuple(Node(name=f"n{i}", gpu_type="A100", gpus=8, cpu_m=0, memory_mib=0) for i in range(2)),
    quotas=(
        Quota(name="root", parent=None, min={A100: 16}),
        Quota(name="a", parent="root", min={A100: 8}),
        Quota(name="b", parent="root", min={A100: 8}),
        Quota(name="c", parent="root", min={}),
    ),
)


def job(name, quota, gpus=1, idle=None, gpu_type=None):
    return TraceJob(name=name, quota=quota, submit_s=0, duration_s=10, gpus=gpus, idle=idle, gpu_type=gpu_type)


JOBS = [job("a1", "a"), job("c1", "c"), job("x1", "unknown"), job("b1", "b", idle="only")]


def test_strict_keeps_the_tree_and_turns_idle_off():
    setup = build_policy("strict", CLUSTER, JOBS)
    assert [q.name for q in setup.quotas] == ["root", "a", "b", "c", "unknown"]
    assert setup.quotas[-1] == Quota(name="unknown", parent="root", min={})
    assert {j.name: setup.idle_mode(j) for j in JOBS} == dict.fromkeys(["a1", "c1", "x1", "b1"], IDLE_OFF)
    assert setup.unguaranteed == ("c", "unknown")


def test_idle_borrows_for_guaranteed_teams_and_only_idle_for_the_others():
    setup = build_policy("idle", CLUSTER, JOBS)
    assert setup.quota_of_team == {"a": "a", "b": "b", "c": "c", "unknown": "unknown"}
    # A job's own idle column wins (b1 asked for `only`).
    assert {j.name: setup.idle_mode(j) for j in JOBS} == {
        "a1": IDLE_ACCEPTABLE, "c1": IDLE_ONLY, "x1": IDLE_ONLY, "b1": IDLE_ONLY,
    }


def test_pool_is_one_quota_holding_the_whole_cluster():
    setup = build_policy("pool", CLUSTER, JOBS)
    assert setup.quotas == (Quota(name="pool", parent=None, min={A100: 16, "cpu": 0, "memory": 0}),)
    assert set(setup.quota_of_team.values()) == {"pool"}
    assert {setup.idle_mode(j) for j in JOBS} == {IDLE_OFF}


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown policy"):
        build_policy("lifo", CLUSTER, JOBS)


def test_fits_guarantee_checks_the_team_and_its_ancestors():
    quotas, nodes = CLUSTER.quotas, CLUSTER.nodes
    assert fits_guarantee(job("j", "a", gpus=8), quotas, nodes)
    assert not fits_guarantee(job("j", "a", gpus=9), quotas, nodes)
    assert not fits_guarantee(job("j", "c", gpus=1), quotas, nodes)
    assert not fits_guarantee(job("j", "unknown", gpus=1), quotas, nodes)
    assert not fits_guarantee(job("j", "a", gpus=1, gpu_type="T4"), quotas, nodes)
