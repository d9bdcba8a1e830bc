"""Replays of tiny hand-made traces through the real engine; every figure is worked out in comments.

Unless a test says otherwise: cycle 10 s, grace 30 s, checkpoints every 600 s. A cycle runs at
an event's time, or 10 s after the previous cycle if that is later.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.engine.types import Node, Quota, gpu_key
from scheduler.simulator.metrics import figures
from scheduler.simulator.replay import ReplayConfig, replay
from scheduler.simulator.traces import Cluster, TraceJob

A100 = gpu_key("A100")


def cluster(nodes: int, **teams: int) -> Cluster:
    """`nodes` 8-GPU A100 nodes; a root quota over all of them and one quota per team (GPUs)."""
    return Cluster(
        nodes=tuple(Node(name=f"n{i}", gpu_type="A100", gpus=8, cpu_m=0, memory_mib=0) for i in range(nodes)),
        quotas=(Quota(name="root", parent=None, min={A100: 8 * nodes}),)
        + tuple(Quota(name=team, parent="root", min={A100: gpus}) for team, gpus in teams.items()),
    )


def job(name, team, submit, duration, gpus=8, priority=1):
    return TraceJob(name=name, quota=team, submit_s=submit, duration_s=duration, gpus=gpus, priority=priority)


# The tests written before checkpoint and restart costs existed: saves are free, resumed runs start
# at once, and the first checkpoint is one interval into the work (no random phase).
FREE = {"checkpoint_cost_s": 0.0, "restart_s": 0.0, "checkpoint_seed": None}


def run(policy, jobs, on, **config):
    result = replay(jobs, on, ReplayConfig(policy=policy, **(FREE | config)))
    return result, {j.name: j for j in result.jobs}, figures(result)


# Two 8-GPU nodes; teams a and b are guaranteed one node each. Team a submits two one-node jobs
# at 0 for an hour; team b one for 1000 s at 1000. The arrival window is [0, 1000].
TWO_TEAMS = cluster(2, a=8, b=8)
TWO_TEAMS_JOBS = [job("a1", "a", 0, 3600), job("a2", "a", 0, 3600), job("b1", "b", 1000, 1000)]


def test_strict_keeps_each_team_to_its_guarantee():
    result, jobs, f = run("strict", TWO_TEAMS_JOBS, TWO_TEAMS)
    # a1 runs 0-3600; a2 does not fit a's guarantee until a1 ends: 3600-7200; b1 runs 1000-2000.
    assert [(j.first_start_s, j.end_s) for j in jobs.values()] == [(0, 3600), (3600, 7200), (1000, 2000)]
    # In [0, 1000] only a1's 8 of 16 GPUs are held.
    assert f["allocation_rate"] == 0.5
    # Waits 0, 3600, 0: mean 1200, median 0, p95 = 0 + 0.9 * 3600 = 3240 (rank 1.9 of 0..2),
    # p99 = 0.98 * 3600 = 3528 (rank 1.98).
    assert f["wait_s"]["all"] == {
        "n": 3, "mean": 1200.0, "median": 0.0, "p95": 3240.0, "p99": 3528.0, "max": 3600.0,
    }
    assert f["wait_s"]["own_quota"]["n"] == 3 and f["wait_s"]["idle"]["n"] == 0
    # JCT 3600, 7200, 1000 -> 3933.333.
    assert f["mean_jct_s"] == pytest.approx(11800 / 3, abs=1e-3)
    # Delivered: 8 GPUs x (3600 + 3600 + 1000) s = 65,600 GPU-s = 18.222 GPU-h.
    assert f["gpu_hours_delivered"] == pytest.approx(65600 / 3600, abs=1e-3)
    assert (f["preemptions"], f["gpu_hours_lost"], f["reclaim_latency_s"]["n"]) == (0, 0, 0)
    # Slowdowns: a1 3600 / 3600 = 1, a2 7200 / 3600 = 2, b1 1000 / 1000 = 1. Per quota: a 1.5, b 1:
    # Jain (1.5 + 1)^2 / (2 x (2.25 + 1)) = 6.25 / 6.5 = 0.9615.
    assert f["slowdown"]["mean"] == pytest.approx(4 / 3, abs=1e-3)
    assert {q: v["slowdown"]["mean"] for q, v in f["by_quota"].items()} == {"a": 1.5, "b": 1.0}
    assert f["jain_slowdown"] == 0.9615
    # All three are 8-GPU jobs.
    assert f["by_size"]["5–8"]["n"] == 3 and f["by_size"]["5–8"]["wait_s"]["p95"] == 3240.0
    assert f["by_size"]["1"]["n"] == 0 and f["by_size"]["1"]["wait_s"]["p95"] is None


def test_idle_borrows_then_gives_back_with_one_preemption():
    result, jobs, f = run("idle", TWO_TEAMS_JOBS, TWO_TEAMS)
    # t=0: a1 In Quota on one node; a2 does not fit a's guarantee, runs Not in Quota on the other.
    # t=1000: b1 fits b's guarantee but no GPU is free: a2 is reclaimed (SIGTERM), b1 nominated.
    #   a2 ran 1000 s, last checkpoint at 600: loses 8 x (400 + 30 grace) = 3,440 GPU-s, keeps 600 s.
    # t=1030: a2's pods exit, b1 starts In Quota (reclaim latency 30 s), runs to 2030; a2 queues
    #   again with its first queue time but nothing is free.
    # t=2030: b1 ends; a2 starts again Not in Quota with 3600 - 600 = 3000 s to do: ends 5030.
    # t=3600: a1 ends; a2 is promoted (a's guarantee has room now).
    assert (jobs["a1"].first_start_s, jobs["a1"].end_s, jobs["a1"].first_in_quota) == (0, 3600, True)
    assert (jobs["a2"].first_start_s, jobs["a2"].end_s, jobs["a2"].first_in_quota) == (0, 5030, False)
    assert (jobs["b1"].first_start_s, jobs["b1"].end_s, jobs["b1"].first_in_quota) == (1030, 2030, True)
    assert (jobs["a2"].preemptions, jobs["a2"].lost_gpu_s) == (1, 3440)
    assert f["preemptions"] == 1 and f["preempted_jobs"] == 1
    assert f["gpu_hours_lost"] == pytest.approx(3440 / 3600, abs=1e-3)
    # Delivered: a1 8 x 3600 + a2 8 x (1030 + 3000) + b1 8 x 1000 = 69,040 GPU-s; lost share 3440 / 69040.
    assert f["gpu_hours_delivered"] == pytest.approx(69040 / 3600, abs=1e-3)
    assert f["lost_share"] == pytest.approx(3440 / 69040, abs=1e-6)
    # Both nodes held all through [0, 1000], but a2's last 400 s there were redone: useful work in
    # the window is a1 8 x 1000 + a2 8 x 600 = 12,800 of 16,000 GPU-s.
    assert f["held_rate"] == 1.0
    assert f["allocation_rate"] == 0.8
    # Time queued: a1 0; a2 0 before its first start and 1030 -> 2030 after its preemption; b1 30.
    # All: 0, 30, 1000: mean 343.333, median 30, p95 30 + 0.9 x 970 = 903, p99 30 + 0.98 x 970.
    assert f["wait_s"]["all"] == {
        "n": 3, "mean": 343.333, "median": 30.0, "p95": 903.0, "p99": 980.6, "max": 1000.0,
    }
    assert f["wait_s"]["own_quota"] == {"n": 2, "mean": 15.0, "median": 15.0, "p95": 28.5, "p99": 29.7, "max": 30.0}
    assert f["wait_s"]["idle"] == {"n": 1, "mean": 1000.0, "median": 1000.0, "p95": 1000.0, "p99": 1000.0, "max": 1000.0}
    assert f["wait_s"]["fits_quota"]["n"] == 3
    # The classic wait (to the first start only) would say 0 for a2.
    assert f["first_wait_s"]["max"] == 30.0 and f["first_wait_s"]["mean"] == 10.0
    assert f["requeued_s"] == {"n": 1, "mean": 1000.0, "median": 1000.0, "p95": 1000.0, "p99": 1000.0, "max": 1000.0}
    # JCT 3600, 5030, 1030 -> 3220.
    assert f["mean_jct_s"] == 3220.0
    assert f["reclaim_latency_s"] == {"n": 1, "mean": 30.0, "median": 30.0, "p95": 30.0, "p99": 30.0, "max": 30.0}
    assert f["nominated_to_start_s"]["max"] == 30.0


def test_pool_ignores_guarantees():
    result, jobs, f = run("pool", TWO_TEAMS_JOBS, TWO_TEAMS)
    # a1 and a2 take both nodes at 0; b1 waits for them to end at 3600 and runs to 4600.
    assert [(j.first_start_s, j.end_s) for j in jobs.values()] == [(0, 3600), (0, 3600), (3600, 4600)]
    assert f["allocation_rate"] == 1.0
    # Waits 0, 0, 2600: mean 866.667, p95 0.9 * 2600 = 2340. JCT 3600, 3600, 3600.
    assert f["wait_s"]["all"]["mean"] == pytest.approx(2600 / 3, abs=1e-3)
    assert f["wait_s"]["all"]["p95"] == 2340.0
    assert f["mean_jct_s"] == 3600.0
    assert f["preemptions"] == 0


def test_cycles_coalesce_events_within_the_cycle_interval():
    jobs = [job("j1", "a", 0, 100, gpus=1), job("j2", "a", 3, 100, gpus=1), job("j3", "a", 15, 100, gpus=1)]
    one_node = cluster(1, a=8)
    # Cycle at 0 (j1 starts); j2 at 3 waits for the cycle at 0 + 10 = 10; j3 at 15 for 10 + 10 = 20.
    _, by_name, _ = run("strict", jobs, one_node)
    assert [j.wait_s for j in by_name.values()] == [0, 7, 5]
    # With no interval every event has its own cycle.
    _, by_name, _ = run("strict", jobs, one_node, cycle_s=0)
    assert [j.wait_s for j in by_name.values()] == [0, 0, 0]


def test_lost_work_counts_from_the_last_checkpoint_and_a_victim_may_finish_in_its_grace():
    # One node; team a guaranteed it, team x has no guarantee (not in the cluster): idle only.
    one_node = cluster(1, a=8)
    jobs = [job("x1", "x", 0, 2000), job("a1", "a", 1500, 100), job("a2", "a", 2400, 50)]
    result, by_name, f = run("idle", jobs, one_node)
    # t=0: x1 runs on idle resources. t=1500: a1 reclaims it. x1 ran 1500 s, checkpoints at 600 and
    #   1200: it keeps 1200 s of work and loses 8 x (300 + 30) = 2,640 GPU-s; exits at 1530.
    # t=1530: a1 starts (latency 30), ends 1630. t=1630: x1 starts again with 800 s to do: ends 2430.
    # t=2400: a2 reclaims x1, but x1 ends at 2430, inside its grace period: nothing more is lost.
    # t=2430: a2 starts (latency 30), ends 2480.
    x1 = by_name["x1"]
    assert (x1.first_start_s, x1.end_s, x1.preemptions, x1.lost_gpu_s) == (0, 2430, 2, 2640)
    assert (by_name["a1"].first_start_s, by_name["a1"].end_s) == (1530, 1630)
    assert (by_name["a2"].first_start_s, by_name["a2"].end_s) == (2430, 2480)
    assert result.reclaim_latencies_s == [30, 30]
    # Delivered: x1 8 x (1530 + 800) + a1 8 x 100 + a2 8 x 50 = 19,840 GPU-s.
    assert f["gpu_hours_delivered"] == pytest.approx(19840 / 3600, abs=1e-3)
    assert f["lost_share"] == pytest.approx(2640 / 19840, abs=1e-6)
    # The node is held all through the window [0, 2400]; x1's 300 s redone and its 30 s grace are
    # not useful: 8 x (1200 + 100 + 770) = 16,560 of 19,200 GPU-s.
    assert f["held_rate"] == 1.0
    assert f["allocation_rate"] == 0.8625
    # Under strict x1 never starts (no guarantee) and the a jobs start on arrival.
    _, by_name, f = run("strict", jobs, one_node)
    assert by_name["x1"].first_start_s is None
    # x1 counts with its censored wait: queued from 0 to the end of the replay, a2's end at 2450.
    assert by_name["x1"].censored and by_name["x1"].queued_s == 2450
    assert f["never_started"] == 1 and f["wait_s"]["all"]["max"] == 2450 and f["first_wait_s"]["max"] == 0
    # Only a1 (8 GPUs, 1500-1600) in the window: 800 / (8 x 2400) GPU-s.
    assert f["allocation_rate"] == pytest.approx(800 / 19200, abs=1e-5)


def test_checkpoint_interval_is_configurable():
    one_node = cluster(1, a=8)
    jobs = [job("x1", "x", 0, 2000), job("a1", "a", 1500, 100)]
    # Checkpoints every 1000 s: x1 keeps 1000 s and loses 8 x (500 + 30) = 4,240 GPU-s.
    _, by_name, _ = run("idle", jobs, one_node, checkpoint_s=1000)
    assert by_name["x1"].lost_gpu_s == 4240
    # Restarted at 1630 with 1000 s to do: ends 2630.
    assert by_name["x1"].end_s == 2630


def test_a_promoted_job_is_no_longer_a_victim():
    # Two nodes, a and b guaranteed one each. a1 (In Quota) and a2 (Not in Quota) start at 0;
    # a1 ends at 1000 and a2 is promoted. x1 (team without a guarantee, priority 5) borrows the free
    # node at 1100. b1 arrives at 1200: before the promotion a2, of lower priority, would have been
    # the victim; now only x1 can be. x1 ran 100 s: loses 8 x (100 + 30) = 1,040 GPU-s.
    jobs = [
        job("a1", "a", 0, 1000), job("a2", "a", 0, 10000),
        job("x1", "x", 1100, 5000, priority=5), job("b1", "b", 1200, 100),
    ]
    _, by_name, f = run("idle", jobs, TWO_TEAMS)
    assert by_name["a2"].preemptions == 0 and by_name["a2"].end_s == 10000
    assert (by_name["x1"].preemptions, by_name["x1"].lost_gpu_s) == (1, 1040)
    # b1 starts when x1's pods exit (1230); x1 starts again when b1 ends (1330) and runs 5000 s.
    assert (by_name["b1"].first_start_s, by_name["x1"].end_s) == (1230, 6330)


def test_jobs_larger_than_a_node_are_gangs_and_too_large_ones_are_refused():
    jobs = [job("big", "a", 0, 100, gpus=24), job("mid", "a", 0, 100, gpus=12), job("one", "a", 0, 100, gpus=4)]
    _, by_name, f = run("pool", jobs, cluster(2, a=16))
    # 24 GPUs = three 8-GPU pods on two nodes: refused. 12 = 8 + 4 across both nodes, then the
    # 4-GPU job takes the rest.
    assert by_name["big"].rejected and by_name["big"].first_start_s is None
    assert (by_name["mid"].first_start_s, by_name["one"].first_start_s) == (0, 0)
    assert (f["rejected"], f["never_started"]) == (1, 0)


def test_a_root_stating_no_min_guarantees_its_pool():
    # DESIGN §2: a root's min is the pool's capacity; the engine reads an empty root min that way,
    # and so must the replay's own bookkeeping, or it would think the quota full.
    on = Cluster(
        nodes=(Node(name="n0", gpu_type="A100", gpus=8, cpu_m=0, memory_mib=0),),
        quotas=(Quota(name="root", parent=None), Quota(name="a", parent="root", min={A100: 8})),
    )
    _, by_name, f = run("strict", [job("a1", "a", 0, 100)], on)
    assert by_name["a1"].first_start_s == 0 and by_name["a1"].fits_guarantee


def random_trace(seed: int, count: int = 70) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        jobs.append(
            TraceJob(
                name=f"r{i:03d}",
                quota=rng.choice(["a", "a", "b", "c", "x"]),
                submit_s=float(rng.randrange(0, 6000, 7)),
                duration_s=float(rng.randrange(20, 3000)),
                gpus=rng.choice([1, 1, 1, 1, 2, 4, 8, 8, 12, 16]),
                priority=rng.choice([1, 1, 1, 3]),
            )
        )
    return jobs


@pytest.mark.parametrize("policy", ["fifo", "strict", "idle", "pool"])
@pytest.mark.parametrize(("seed", "cycle_s"), [(1, 10.0), (2, 0.0), (3, 30.0)])
def test_pruning_and_skipping_change_no_decision(policy, seed, cycle_s):
    """The fast path (pruned snapshots, skipped calls) gives exactly what the engine decides when it
    sees every pending job at every cycle."""
    on = cluster(4, a=16, b=8, c=8)
    jobs = random_trace(seed)
    fast = replay(jobs, on, ReplayConfig(policy=policy, cycle_s=cycle_s))
    exact = replay(jobs, on, ReplayConfig(policy=policy, cycle_s=cycle_s, prune=False, skip_unchanged=False))
    assert fast.jobs == exact.jobs
    assert fast.allocation == exact.allocation
    assert fast.reclaim_latencies_s == exact.reclaim_latencies_s
    assert fast.cycles == exact.cycles
    assert fast.engine_calls <= exact.engine_calls
    if policy == "idle":
        assert fast.preemptions > 0  # the traces do exercise reclaim


ENGINE_POLICIES = {
    "starvation": {"starvation_s": 900.0},
    "min-runtime": {"min_runtime_s": 600.0},
    "starved-min-runtime": {"starvation_s": 900.0, "starved_min_runtime_s": 3600.0},
    "hold": {"starvation_s": 600.0, "starvation_hold": True},
    "fair": {"idle_share": "fair"},
    "safe-point": {"safe_point": True},
    "preempt-within": {"preempt_within": True},
    "all": {"starvation_s": 600.0, "min_runtime_s": 300.0, "idle_share": "fair", "safe_point": True,
            "preempt_within": True},
}


@pytest.mark.parametrize("policy", ["fifo", "strict", "idle", "pool"])
@pytest.mark.parametrize("engine_policies", list(ENGINE_POLICIES))
@pytest.mark.parametrize(("seed", "cycle_s"), [(4, 10.0), (5, 0.0)])
def test_pruning_and_skipping_change_no_decision_under_engine_policies(policy, engine_policies, seed, cycle_s):
    """The same with DESIGN §2b's policies and safe points: with a starvation guard the replay still
    prunes, keeping every starving job in the snapshot (they alone get drain sets)."""
    on = cluster(4, a=16, b=8, c=8)
    jobs = random_trace(seed)
    config = ReplayConfig(policy=policy, cycle_s=cycle_s, **ENGINE_POLICIES[engine_policies])
    fast = replay(jobs, on, config)
    exact = replay(jobs, on, replace(config, prune=False, skip_unchanged=False))
    assert fast.jobs == exact.jobs
    assert fast.allocation == exact.allocation
    assert fast.reclaim_latencies_s == exact.reclaim_latencies_s
    assert fast.cycles == exact.cycles
    if policy != "fifo":
        assert fast.engine_calls <= exact.engine_calls
    if engine_policies in ("starvation", "all") and policy in ("strict", "idle"):
        # the guard is exercised: it changes what happens to the jobs
        assert fast.jobs != replay(jobs, on, replace(config, starvation_s=0.0)).jobs
    if engine_policies == "starved-min-runtime" and policy == "idle":
        # the protection is exercised: fewer borrowers are reclaimed than under the guard alone
        assert fast.preemptions < replay(jobs, on, replace(config, starved_min_runtime_s=0.0)).preemptions
    if engine_policies == "preempt-within" and policy != "pool":
        assert fast.jobs != replay(jobs, on, replace(config, preempt_within=False)).jobs


def test_cpu_and_memory_of_jobs_constrain_placement():
    # One node of 8 GPUs but 16 cores and 64 GiB: two 1-GPU jobs of 10 cores cannot run together,
    # nor can two of 40 GiB; without CPU or memory asked, all four would start at 0.
    on = Cluster(
        nodes=(Node(name="n0", gpu_type="A100", gpus=8, cpu_m=16000, memory_mib=64 * 1024),),
        quotas=(Quota(name="root", parent=None),),
    )
    jobs = [
        TraceJob(name="c1", quota="t", submit_s=0, duration_s=100, gpus=1, cpu_m=10000),
        TraceJob(name="c2", quota="t", submit_s=0, duration_s=100, gpus=1, cpu_m=10000),
        TraceJob(name="m1", quota="t", submit_s=0, duration_s=100, gpus=1, memory_mib=40 * 1024),
        TraceJob(name="m2", quota="t", submit_s=0, duration_s=100, gpus=1, memory_mib=40 * 1024),
    ]
    _, by_name, _ = run("pool", jobs, on)
    # c1 and m1 start at 0 (10 cores + 40 GiB fit); c2 and m2 when they end at 100.
    assert {n: j.first_start_s for n, j in by_name.items()} == {"c1": 0, "c2": 100, "m1": 0, "m2": 100}
    _, by_name, _ = run("pool", [replace(j, cpu_m=0, memory_mib=0) for j in jobs], on)
    assert {j.first_start_s for j in by_name.values()} == {0}
