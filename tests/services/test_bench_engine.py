"""The benchmark command runs end to end on a small cluster and reports its figures as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_engine_prints_figures(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.sqlite3'}"}
    env.pop("REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "bench_engine", "--nodes", "20", "--pending", "300", "--quotas", "4",
         "--reclaim-pending", "40", "--repeat", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["queued"] == 300 and figures["decisions_per_s"] > 0
    assert figures["reclaim_preempted"] > 0 and figures["reclaim_nominated"] > 0
    # The database cycle is sized to hold every queued job: all of them are admitted in one cycle.
    assert figures["db_admitted"] == figures["db_queued"] == 300
    assert figures["db_pods_started"] >= 300


def test_bench_engine_sweep_prints_growth(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "bench_engine", "--sweep", "--sizes", "20,40", "--quotas", "4", "--repeat", "1"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.sqlite3'}"},
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "placements/s" in result.stdout and "growth from 20 to 40 nodes" in result.stdout
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert [row["nodes"] for row in figures["sweep"]] == [20, 40]
    assert set(figures["growth"]) == set(figures["cpu_growth"]) == {"quiet", "reclaim_", "storm_"}
