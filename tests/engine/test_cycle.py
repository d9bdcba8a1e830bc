"""Cycle behaviour that the scenario files cannot show: queue positions, the failure memo's
exactness, purity, and inputs the live loop may produce that a scenario file refuses."""

from __future__ import annotations

import random

import pytest
from engine_checks import check_decisions

from scheduler.engine import memo
from scheduler.engine.cycle import run_cycle
from scheduler.engine.state import queue_order
from scheduler.engine.types import IDLE_ONLY, NOMINATED, RUNNING, Job, Node, Pod, Quota, Snapshot
from scheduler.engine_tools.bench import build_reclaim_heavy_snapshot, build_synthetic_snapshot

NODES = (Node("n1", "A100", 8, 96000, 786432),)
QUOTAS = (Quota("root", None), Quota("q", "root", {"gpu:A100": 8, "cpu": 96000, "memory": 786432}))


def _pending(name, priority=1, submitted_at=0.0, gpus=16):
    return Job(name=name, quota="q", pods=(Pod("w", gpus, "A100"),), priority=priority, submitted_at=submitted_at)


def test_pending_is_in_queue_order():
    jobs = [_pending("c", 1, 5), _pending("b", 1, 5), _pending("late-high", 9, 50), _pending("a", 1, 1)]
    random.Random(0).shuffle(jobs)
    decisions = run_cycle(Snapshot(NODES, QUOTAS, tuple(jobs)))
    assert decisions.pending == ["late-high", "a", "b", "c"]
    assert [queue_order(j) for j in sorted(jobs, key=queue_order)][0] == (-9, 50, "late-high")


def test_unknown_quota_and_two_models_wait_with_a_reason():
    jobs = (
        Job("lost", "gone", (Pod("w", 1, "A100"),)),
        Job("mixed", "q", (Pod("m", 1, "A100"), Pod("w", 1, "H100"))),
    )
    decisions = run_cycle(Snapshot(NODES, QUOTAS, jobs))
    assert decisions.as_contract()["reasons"] == {
        "lost": "unknown quota gone",
        "mixed": "can never run: pods ask for different GPU models (A100, H100); all pods of a job use one model",
    }


def test_snapshot_is_not_changed():
    snapshot = build_synthetic_snapshot(nodes=20, pending=200, seed=3)
    before = repr(snapshot)
    run_cycle(snapshot)
    assert repr(snapshot) == before


def test_nominated_job_whose_quota_shrank_is_withdrawn():
    """A nomination that no longer fits its quota gives its reservation back and waits like any job."""
    quotas = (Quota("root", None), Quota("q", "root", {"gpu:A100": 4}))
    jobs = (
        Job("t", "q", (Pod("w", 8, "A100"),), phase="terminating", nodes=("n1",)),
        Job("a1", "q", (Pod("w", 8, "A100"),), phase=NOMINATED, nodes=("n1",)),
        Job("i1", "q", (Pod("w", 8, "A100"),), idle=IDLE_ONLY),
    )
    decisions = run_cycle(Snapshot(NODES, quotas, jobs))
    assert decisions.nominated == {} and decisions.pending == ["a1", "i1"]
    assert str(decisions.reasons["a1"]) == "quota q full: needs 8 A100, 4 left of 4"
    assert decisions.reasons["a1"].code == "quota_full"


def test_running_pods_on_a_removed_node_are_ignored():
    jobs = (
        Job("r", "q", (Pod("w", 8, "A100"),), phase=RUNNING, in_quota=False, idle=IDLE_ONLY, nodes=("gone",)),
        Job("a", "q", (Pod("w", 8, "A100"),)),
    )
    decisions = run_cycle(Snapshot(NODES, QUOTAS, jobs))
    assert decisions.admitted["a"].nodes == ("n1",)


@pytest.mark.parametrize(
    "build",
    [
        lambda seed: build_synthetic_snapshot(nodes=60, pending=800, seed=seed),
        lambda seed: build_synthetic_snapshot(nodes=40, pending=600, seed=seed, busy=0.9),
        lambda seed: build_reclaim_heavy_snapshot(nodes=40, pending=300, seed=seed),
    ],
    ids=["half-busy", "busy", "reclaim-heavy"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_failure_memo_changes_nothing(build, seed, monkeypatch):
    """The memo skips gangs known to fail; the decisions must be those of trying every job."""
    snapshot = build(seed)
    fast = run_cycle(snapshot)
    check_decisions(snapshot, fast)
    monkeypatch.setattr(memo.FailureMemo, "known_to_fail", lambda self, demand, model: False)
    assert run_cycle(snapshot) == fast
