"""§2d start estimates (engine/plan.py) beyond what scenario files print: why an estimate is unknown,
the cap on exact estimates per pool, and that a plan never changes a decision."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import UNKNOWN_FAR_BACK, UNKNOWN_NEVER, UNKNOWN_NO_LIMIT, Job, Pod
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


def test_jobs_past_the_exact_ones_of_their_pool_are_far_back():
    snapshot = load(SCENARIOS / "estimate_after_earlier_plan.yaml").snapshot
    assert run_cycle(snapshot, estimates=0).estimates == {}
    assert run_cycle(snapshot).estimates["p3"].start == 100  # within the default EXACT_PER_POOL
    estimates = run_cycle(snapshot, estimates=2).estimates
    assert estimates["p1"].start == 100 and estimates["p2"].start == 150
    assert estimates["p3"].start is None and estimates["p3"].text == "unknown: far back in the queue"
    assert estimates["p3"].unknown == UNKNOWN_FAR_BACK


def test_no_now_no_estimates():
    snapshot = load(SCENARIOS / "queue_order_priority.yaml").snapshot
    assert snapshot.now is None and run_cycle(snapshot).estimates == {}
