"""DESIGN §2's safe points and §2b's policies in the engine: the indexed victim search still chooses what
the frozen reference walk does once checkpoints reorder candidates and min_runtime_s protects some;
policies left at their defaults change nothing; fair share and protection keep every invariant."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from engine_checks import check_decisions
from reference_reclaim import reference_select_victims
from test_reclaim_reference import _names, _random_snapshot

from scheduler.engine import cycle as cycle_module
from scheduler.engine.cycle import run_cycle
from scheduler.engine.reasons import ProtectedVictims
from scheduler.engine.types import IDLE_SHARE_FAIR, RUNNING, Job, Policy, Snapshot


def _with_checkpoints(snapshot: Snapshot, seed: int) -> Snapshot:
    """Running jobs get a last checkpoint: some before their start (not a safe point), most after."""
    rng = random.Random(seed)
    jobs: list[Job] = []
    for job in snapshot.jobs:
        if job.phase == RUNNING and rng.random() < 0.7:
            started = job.started_at or 0.0
            job = replace(job, checkpointed_at=started + rng.choice((-5.0, 0.0, 3.0, 17.0, 40.0)))
        jobs.append(job)
    return replace(snapshot, jobs=tuple(jobs), now=40.0)


def _policy_snapshots():
    for seed in range(120):
        base = _with_checkpoints(_random_snapshot(seed), seed)
        yield f"checkpoints-{seed}", base
        yield f"min-runtime-{seed}", replace(base, policy=Policy(min_runtime_s=float(seed % 30 + 1)))
        yield f"fair-{seed}", replace(base, policy=Policy(idle_share=IDLE_SHARE_FAIR, min_runtime_s=15.0))


def test_indexed_search_matches_the_reference_with_safe_points_and_protection(monkeypatch):
    indexed = cycle_module._Cycle._search_victims
    asked = {"calls": 0, "chosen": 0}

    def both(self, demand, model):
        expected = reference_select_victims(self.capacity.nodes.values(), self.victims.ordered, self.victims.is_taken,
                                            demand, model)
        got = indexed(self, demand, model)
        assert _names(got) == _names(expected), (demand.job.name, model)
        asked["calls"] += 1
        asked["chosen"] += bool(expected)
        return got

    monkeypatch.setattr(cycle_module._Cycle, "_search_victims", both)
    for _label, snapshot in _policy_snapshots():
        check_decisions(snapshot, run_cycle(snapshot))
    assert asked["calls"] > 500 and asked["chosen"] > 100, asked


@pytest.mark.parametrize("seed", range(60))
def test_default_policies_change_nothing(seed):
    """A `now` and an explicit default Policy give exactly the decisions of a snapshot with neither."""
    snapshot = _random_snapshot(seed)
    plain = run_cycle(snapshot)
    assert run_cycle(replace(snapshot, now=10_000.0, policy=Policy(), policies={"general": Policy()})) == plain


def test_protected_jobs_are_never_preempted_and_the_reason_names_when():
    seen_reason = 0
    for label, snapshot in _policy_snapshots():
        policy = snapshot.policy
        if policy.min_runtime_s <= 0:
            continue
        decisions = run_cycle(snapshot)
        running = {job.name: job for job in snapshot.jobs if job.phase == RUNNING}
        for name in decisions.preempted:
            job = running[name]
            assert (job.started_at or 0.0) + policy.min_runtime_s <= snapshot.now, (label, name)
        for reason in decisions.reasons.values():
            if isinstance(reason, ProtectedVictims):
                seen_reason += 1
                assert reason.until > snapshot.now
                assert any((j.started_at or 0.0) + policy.min_runtime_s == reason.until for j in running.values())
    assert seen_reason > 5
