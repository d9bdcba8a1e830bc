"""§2d start estimates (engine/plan.py) beyond what scenario files print: why an estimate is unknown,
the cap on exact estimates per pool, and that a plan never changes a decision."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import (
    IDLE_OFF,
    IDLE_ONLY,
    RUNNING,
    UNKNOWN_FAR_BACK,
    UNKNOWN_NEVER,
    UNKNOWN_NO_LIMIT,
    Job,
    Node,
    Pod,
    Quota,
    Snapshot,
)
from scheduler.engine_tools.scenario import load

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def test_unknown_estimates_say_why():
    snapshot = load(SCENARIOS / "estimate_unknown_without_limit.yaml").snapshot
    never = Job(name="huge", quota="team-a", pods=(Pod("worker", gpus=16, gpu_type="A100"),), submitted_at=9)
    estimates = run_cycle(replace(snapshot, jobs=(*snapshot.jobs, never))).estimates
    assert estimates["wide"].unknown == UNKNOWN_NO_LIMIT
    assert estimates["wide"].text == "unknown: depends on jobs with no time limit"
    assert estimates["huge"].unknown == UNKNOWN_NEVER
    assert estimates["small"].start == 2000 and estimates["small"].unknown is None


def test_jobs_past_the_exact_and_rough_ones_of_their_pool_are_far_back():
    snapshot = load(SCENARIOS / "estimate_after_earlier_plan.yaml").snapshot
    assert run_cycle(snapshot, estimates=0).estimates == {}
    assert run_cycle(snapshot).estimates["p3"].start == 100  # within the default EXACT_PER_POOL
    estimates = run_cycle(snapshot, estimates=2, rough=0).estimates
    assert estimates["p1"].start == 100 and estimates["p2"].start == 150
    assert estimates["p3"].start is None and estimates["p3"].text == "unknown: far back in the queue"
    assert estimates["p3"].unknown == UNKNOWN_FAR_BACK
    # with a rough budget, p3 is planned on the pool's aggregate: 2 GPUs are free beside p1 from 100
    estimates = run_cycle(snapshot, estimates=2, rough=1).estimates
    assert estimates["p3"].rough and estimates["p3"].unknown is None
    assert estimates["p3"].text == f"at about {estimates['p3'].start:g} (rough)"
    assert 100 <= estimates["p3"].start <= 175  # the grid's step is 75 s this close to now
    assert not estimates["p1"].rough and not estimates["p2"].rough


def _one_node_queue(jobs: int, limit: float, idle: str = IDLE_ONLY) -> Snapshot:
    """One 8-GPU node busy until `limit`, and `jobs` pending jobs of 8 GPUs and `limit` each behind it."""
    running = Job(name="r0", quota="team-a", pods=(Pod("worker", gpus=8, gpu_type="A100"),), phase=RUNNING,
                  in_quota=True, started_at=0.0, nodes=("n1",), time_limit_s=limit)
    queue = tuple(Job(name=f"p{k:03d}", quota="team-a", pods=(Pod("worker", gpus=8, gpu_type="A100"),), idle=idle,
                      submitted_at=float(k), time_limit_s=limit) for k in range(1, jobs + 1))
    return Snapshot(nodes=(Node("n1", "A100", 8, 96_000, 768 * 1024),),
                    quotas=(Quota("root", None), Quota("team-a", "root", min={"gpu:A100": 8})),
                    jobs=(running, *queue), now=0.0)


def test_a_job_far_back_in_a_long_queue_gets_a_rough_estimate_near_its_turn():
    """Issue 26: past the exact jobs of a pool, the k-th of N identical jobs of limit L queued on one node
    starts at about k × L (it was "unknown: far back in the queue")."""
    limit = 1000.0
    estimates = run_cycle(_one_node_queue(120, limit), estimates=40, rough=2000).estimates
    for k in range(1, 121):
        estimate = estimates[f"p{k:03d}"]
        assert estimate.unknown is None and estimate.rough == (k > 40)
        if k <= 40:
            assert estimate.start == k * limit
        else:  # the aggregate starts on the grid (16 steps per doubling): within a tenth of the wait
            assert abs(estimate.start - k * limit) <= 0.1 * k * limit, (k, estimate.start)
            assert estimate.start > estimates[f"p{k - 1:03d}"].start  # each waits for the one before
    # the budget: the jobs past it are far back
    capped = run_cycle(_one_node_queue(60, limit), estimates=40, rough=10).estimates
    assert capped["p050"].rough and capped["p051"].unknown == UNKNOWN_FAR_BACK


def test_rough_estimates_of_off_jobs_wait_for_their_quota():
    """An `off` job's rough plan needs its quota's room as well (team-a is guaranteed the node's 8 GPUs,
    all held In Quota until r0 ends): the jobs queue one after another, as on the node."""
    limit = 1000.0
    estimates = run_cycle(_one_node_queue(50, limit, idle=IDLE_OFF), estimates=40, rough=100).estimates
    for k in range(41, 51):
        estimate = estimates[f"p{k:03d}"]
        assert estimate.rough and abs(estimate.start - k * limit) <= 0.1 * k * limit, (k, estimate.start)


def test_rough_estimates_change_no_decision():
    snapshot = _one_node_queue(60, 1000.0)
    with_rough, without = run_cycle(snapshot, estimates=5, rough=100), run_cycle(snapshot, estimates=0)
    with_rough.estimates.clear()
    assert with_rough == without


def test_no_now_no_estimates():
    snapshot = load(SCENARIOS / "queue_order_priority.yaml").snapshot
    assert snapshot.now is None and run_cycle(snapshot).estimates == {}
