"""DESIGN §2 in the simulator: a quota with child quotas guarantees its own jobs only what it keeps
beside their guarantees (`ownmin`). "Fits its guarantee" (the figures' fitting set, fifo's skip),
the idle policy's unguaranteed teams and the replay's pruning bound all say so, and a replay of a
job submitted to such a root shows it borrowing, then reclaimed for a team.
"""

from __future__ import annotations

import pytest

from scheduler.engine.types import (
    DEFAULT_POOL,
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    Node,
    Pod,
    Quota,
    gpu_key,
)
from scheduler.simulator.ledger import JobClass, Ledger
from scheduler.simulator.policies import build_policy, fits_guarantee
from scheduler.simulator.replay import ReplayConfig, replay
from scheduler.simulator.traces import Cluster, TraceJob

A100 = gpu_key("A100")
NODES = tuple(Node(name=f"n{i}", gpu_type="A100", gpus=8, cpu_m=0, memory_mib=0) for i in range(2))
# root gives all 16 to a and b; mid (8 under root2) gives 4 of its 8 to its child.
GIVEN_AWAY = Cluster(nodes=NODES, quotas=(
    Quota(name="root", parent=None, min={A100: 16}),
    Quota(name="a", parent="root", min={A100: 8}),
    Quota(name="b", parent="root", min={A100: 8}),
))
REMAINDER = Cluster(nodes=NODES, quotas=(
    Quota(name="root", parent=None, min={A100: 16}),
    Quota(name="mid", parent="root", min={A100: 8}),
    Quota(name="leaf", parent="mid", min={A100: 4}),
))


def job(name: str, quota: str, gpus: int, submit: float = 0.0, duration: float = 3600.0) -> TraceJob:
    return TraceJob(name=name, quota=quota, submit_s=submit, duration_s=duration, gpus=gpus)


def test_a_job_of_a_root_that_gave_its_min_away_fits_no_guarantee() -> None:
    assert not fits_guarantee(job("r", "root", 1), GIVEN_AWAY.quotas, GIVEN_AWAY.nodes)
    assert fits_guarantee(job("a", "a", 8), GIVEN_AWAY.quotas, GIVEN_AWAY.nodes)


def test_a_parent_fits_its_own_jobs_within_what_it_keeps() -> None:
    quotas, nodes = REMAINDER.quotas, REMAINDER.nodes
    assert fits_guarantee(job("m", "mid", 4), quotas, nodes)
    assert not fits_guarantee(job("m", "mid", 5), quotas, nodes)  # under mid's min of 8, over its own 4
    assert fits_guarantee(job("r", "root", 8), quotas, nodes)  # root keeps 16 - 8
    assert not fits_guarantee(job("r", "root", 9), quotas, nodes)


def test_the_idle_policy_runs_a_root_that_keeps_nothing_on_idle_resources_only() -> None:
    setup = build_policy("idle", GIVEN_AWAY, [job("r", "root", 1), job("a", "a", 1)])
    assert setup.unguaranteed == ("root",)
    assert (setup.idle_mode(job("r", "root", 1)), setup.idle_mode(job("a", "a", 1))) == (IDLE_ONLY, IDLE_ACCEPTABLE)


def test_the_pruning_bound_counts_the_parent_s_own_level() -> None:
    paths = {"root": ("root",), "mid": ("mid", "root"), "leaf": ("leaf", "mid", "root")}
    ledger = Ledger(REMAINDER.nodes, REMAINDER.quotas, paths)
    pods = (Pod(role="worker", gpus=4, gpu_type="A100", cpu_m=0, memory_mib=0),)
    mid_jobs = JobClass("mid", pods, paths["mid"], ((DEFAULT_POOL, "A100"),), IDLE_OFF, 1, True)
    mid_jobs.queue = [(0.0, f"m{i}", i) for i in range(3)]
    assert ledger.bound(mid_jobs) == 1  # mid keeps 4 for its own jobs, though 8 are free in its subtree
    ledger.count_inq("leaf", "A100", 4)  # the child's job uses the child's guarantee, not mid's own
    assert ledger.bound(mid_jobs) == 1
    ledger.count_inq("mid", "A100", 4)
    assert ledger.bound(mid_jobs) == 0 and not ledger.may_fit_in_quota(mid_jobs)


@pytest.mark.parametrize("prune", [True, False])
def test_a_root_job_borrows_and_is_reclaimed_for_a_team(prune: bool) -> None:
    # r (16 GPUs of root) can only borrow: under idle it starts at 0 on both nodes, Not in Quota;
    # b's 8-GPU job at 100 reclaims it (its owner's guarantee) and starts within the grace period.
    jobs = [job("r", "root", 16), job("b1", "b", 8, submit=100.0, duration=100.0)]
    result = replay(jobs, GIVEN_AWAY, ReplayConfig(policy="idle", prune=prune, skip_unchanged=prune))
    by_name = {j.name: j for j in result.jobs}
    assert (by_name["r"].first_start_s, by_name["r"].first_in_quota) == (0.0, False)
    assert not by_name["r"].fits_guarantee and by_name["r"].preemptions >= 1
    assert by_name["b1"].first_in_quota is True and 100.0 <= by_name["b1"].first_start_s <= 140.0
    # Under strict (idle resources off) the root's job never starts; b's does at once.
    strict = {j.name: j for j in replay(jobs, GIVEN_AWAY, ReplayConfig(policy="strict")).jobs}
    assert strict["r"].first_start_s is None and strict["b1"].first_start_s == 100.0
