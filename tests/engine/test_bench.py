"""The benchmark builders and `measure()` (the lead's bench command reports these figures)."""

from __future__ import annotations

from collections import Counter

import pytest
from engine_checks import check_snapshot

from scheduler.engine.bench import (
    PHILLY_MIX,
    TRACES_DIR,
    build_reclaim_heavy_snapshot,
    build_synthetic_snapshot,
    gpu_sizes,
    measure,
)
from scheduler.engine.types import PENDING, RUNNING


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


def test_sizes_follow_the_philly_trace():
    if not (TRACES_DIR / "philly_pollux.csv").exists():
        pytest.skip(f"needs the Philly trace at {TRACES_DIR} (shared/traces beside the project)")
    assert Counter(gpu_sizes()) == Counter(PHILLY_MIX)


def test_without_the_trace_the_built_in_mix_is_used(tmp_path, capsys):
    assert Counter(gpu_sizes(tmp_path)) == Counter(PHILLY_MIX)
    assert "using the built-in copy" in capsys.readouterr().err
