"""The benchmark builders and `measure()` (the lead's bench command reports these figures)."""

from __future__ import annotations

from collections import Counter

import pytest
from engine_checks import check_snapshot

from scheduler.engine.types import IDLE_OFF, IDLE_ONLY, PENDING, RUNNING
from scheduler.engine_tools.bench import (
    PHILLY_MIX,
    STORM_SIZES,
    TRACES_DIR,
    build_mixed_storm_snapshot,
    build_reclaim_heavy_snapshot,
    build_synthetic_snapshot,
    gpu_sizes,
    growth,
    measure,
    sweep,
)


def test_synthetic_snapshots_are_consistent():
    snapshot = build_synthetic_snapshot(nodes=50, pending=300, seed=1)
    check_snapshot(snapshot)
    assert sum(j.phase == PENDING for j in snapshot.jobs) == 300
    assert any(j.phase == RUNNING and not j.in_quota for j in snapshot.jobs)
    heavy = build_reclaim_heavy_snapshot(nodes=50, pending=200, seed=1)
    check_snapshot(heavy)
    assert all(j.in_quota is False for j in heavy.jobs if j.phase == RUNNING)


def test_wide_jobs_become_full_node_pods():
    snapshot = build_synthetic_snapshot(nodes=200, pending=3000, seed=0)
    wide = [j for j in snapshot.jobs if len(j.pods) > 1]
    assert wide and all(p.gpus == 8 for j in wide for p in j.pods)


def test_measure_reports_rates():
    figures = measure(nodes=30, pending=200, repeat=1, reclaim_pending=50)
    assert figures["queued"] == 200 and figures["decisions_per_s"] > 0
    assert figures["reclaim_cycle_s"] > 0 and figures["reclaim_nominated"] > 0
    assert figures["storm_nominated"] > 0 and figures["storm_queued"] == 50
    for prefix in ("", "reclaim_", "storm_"):
        placed = figures[prefix + "admitted"] + figures[prefix + "nominated"]
        # (the rates come from the unrounded time)
        assert figures[prefix + "placements_per_s"] == pytest.approx(placed / figures[prefix + "cycle_s"], rel=0.02)
        assert figures[prefix + "decisions_per_s"] == pytest.approx(
            figures[prefix + "queued"] / figures[prefix + "cycle_s"], rel=0.02)


def test_reclaim_queues_are_half_in_quota_and_storms_are_mixed():
    heavy = build_reclaim_heavy_snapshot(nodes=40, pending=400, seed=2)
    queued = [j for j in heavy.jobs if j.phase == PENDING]
    assert len(queued) == 400
    assert sum(j.idle == IDLE_OFF for j in queued) == 200 and sum(j.idle == IDLE_ONLY for j in queued) == 200
    storm = build_mixed_storm_snapshot(nodes=40, pending=400, seed=2)
    borrowers = [j for j in storm.jobs if j.phase == RUNNING]
    assert {sum(p.gpus for p in j.pods) for j in borrowers} == set(STORM_SIZES)
    per_node: dict[str, int] = {}
    for job in borrowers:
        for pod, node in zip(job.pods, job.nodes, strict=True):
            per_node[node] = per_node.get(node, 0) + pod.gpus
    assert set(per_node.values()) == {8} and len(per_node) == 40  # every node full
    in_quota = [j for j in storm.jobs if j.phase == PENDING and j.idle == IDLE_OFF]
    assert len(in_quota) == 80  # two per node


def test_sweep_and_growth_exponent():
    rows = sweep((20, 40), repeat=1)
    assert [row["nodes"] for row in rows] == [20, 40] and rows[1]["queued"] == 400
    assert "growth" not in rows[0] and rows[1]["storm_growth"] == growth(rows, "storm_cycle_s", 20, 40)
    assert rows[1]["storm_cpu_growth"] == growth(rows, "storm_cycle_cpu_s", 20, 40)
    assert growth([{"nodes": 1000, "t": 1.0}, {"nodes": 5000, "t": 5.0}], "t", 1000, 5000) == 1.0
    assert growth([{"nodes": 1000, "t": 1.0}, {"nodes": 4000, "t": 16.0}], "t", 1000, 4000) == 2.0
    assert growth(rows, "cycle_s", 20, 5000) is None


def test_sizes_follow_the_philly_trace():
    if not (TRACES_DIR / "philly_pollux.csv").exists():
        pytest.skip(f"needs the Philly trace at {TRACES_DIR} (shared/traces beside the project)")
    assert Counter(gpu_sizes()) == Counter(PHILLY_MIX)


def test_without_the_trace_the_built_in_mix_is_used(tmp_path, capsys):
    assert Counter(gpu_sizes(tmp_path)) == Counter(PHILLY_MIX)
    assert "using the built-in copy" in capsys.readouterr().err


def test_estimates_bench_plans_the_first_jobs_of_the_pool_and_changes_no_decision():
    from scheduler.engine.cycle import run_cycle
    from scheduler.engine.plan import EXACT_PER_POOL
    from scheduler.engine_tools.bench import _cycle_without_plan, build_synthetic_snapshot, measure_estimates

    # the first 40 of the pool exactly, the next 100 roughly (issue 26), the rest far back
    row = measure_estimates(nodes=40, pending=400, repeat=1, rough=100)
    assert row["pending"] > EXACT_PER_POOL + 100 and 50 < row["rough"] <= 100
    assert row["rough"] < row["estimated"] <= EXACT_PER_POOL + 100
    assert row["with_estimates_cpu_s"] > 0 and row["without_estimates_cpu_s"] > 0
    snapshot = build_synthetic_snapshot(40, pending=400, time_limits=True)
    assert snapshot.now is not None and all(job.time_limit_s for job in snapshot.jobs)
    with_plan, without = run_cycle(snapshot), _cycle_without_plan(snapshot)
    assert without.estimates == {} and set(with_plan.estimates) == set(with_plan.pending)
    with_plan.estimates.clear()
    assert with_plan == without
