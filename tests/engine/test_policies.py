"""DESIGN §2's safe points and §2b's policies in the engine: the indexed victim search still chooses what
the frozen reference walk does once checkpoints reorder candidates and min_runtime_s protects some;
policies left at their defaults change nothing; fair share and protection keep every invariant."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from engine_checks import apply, check_decisions
from reference_reclaim import reference_select_victims
from test_reclaim_reference import _is_taken, _names, _random_snapshot

from scheduler.engine.cycle import run_cycle
from scheduler.engine.reasons import STAFF, ProtectedVictims, preemption_text
from scheduler.engine.types import IDLE_SHARE_FAIR, PENDING, RUNNING, Job, Policy, Snapshot
from scheduler.engine.victims import selection


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
    indexed = selection.search
    asked = {"calls": 0, "chosen": 0}

    def both(state, demand, model):
        expected = reference_select_victims(state.capacity.nodes.values(), state.victims.ordered, _is_taken(state),
                                            demand, model)
        got = indexed(state, demand, model)
        assert _names(got) == _names(expected), (demand.job.name, model)
        asked["calls"] += 1
        asked["chosen"] += bool(expected)
        return got

    monkeypatch.setattr(selection, "search", both)
    for _label, snapshot in _policy_snapshots():
        check_decisions(snapshot, run_cycle(snapshot))
    for seed in range(60):  # demotions add candidates mid-cycle: the index is rebuilt, still the same answers
        run_cycle(replace(_within_snapshot(seed), now=40.0, policy=Policy(min_runtime_s=float(seed % 25))))
    assert asked["calls"] > 500 and asked["chosen"] > 100, asked


@pytest.mark.parametrize("seed", range(60))
def test_default_policies_change_nothing(seed):
    """A `now` and an explicit default Policy give exactly the decisions of a snapshot with neither; the
    `now` only adds start estimates (§2d), one per pending job."""
    snapshot = _random_snapshot(seed)
    plain = run_cycle(snapshot)
    timed = run_cycle(replace(snapshot, now=10_000.0, policy=Policy(), policies={"general": Policy()}))
    assert set(timed.estimates) == set(timed.pending)
    timed.estimates.clear()
    assert timed == plain


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


def _within_snapshot(seed: int) -> Snapshot:
    """A cycle's admissions made running (In Quota jobs of every priority), then a queue of copies of
    some of them at priority 9, in quotas that all have preempt_within."""
    base = _random_snapshot(seed)
    running = apply(base, run_cycle(base), exited=True, now=20.0)
    rng = random.Random(seed)
    newcomers = [replace(job, name=f"{job.name}-hi", priority=9, phase=PENDING, in_quota=False, nodes=(),
                         started_at=None, submitted_at=100.0 + i)
                 for i, job in enumerate(running.jobs) if job.phase == RUNNING and rng.random() < 0.5]
    within = tuple(replace(q, preempt_within=q.parent is not None) for q in base.quotas)
    return replace(_with_checkpoints(running, seed), quotas=within, jobs=_with_checkpoints(running, seed).jobs
                   + tuple(newcomers))


def test_preempt_within_demotes_and_preempts_only_lower_priority_jobs_of_the_same_quota():
    demotions = within = 0
    for seed in range(150):
        snapshot = _within_snapshot(seed)
        decisions = run_cycle(snapshot)  # (check_decisions holds §2 alone: In Quota jobs are never victims)
        jobs = {job.name: job for job in snapshot.jobs}
        for name in decisions.demoted:
            job = jobs[name]
            assert job.phase == RUNNING and job.in_quota and name not in decisions.preempted
            assert name not in decisions.promoted
            demotions += 1
        for name, preemption in decisions.preempted.items():
            victim, owner = jobs[name], jobs[preemption.for_job]
            assert preemption.within == victim.in_quota
            if victim.in_quota:
                within += 1
                assert victim.quota == owner.quota and victim.priority < owner.priority
                assert preemption.code == "preempted_within_quota"
                assert preemption_text(preemption, STAFF) == "preempted by a higher-priority job of the same quota"
        assert all(name in decisions.admitted or name in decisions.nominated or name in decisions.pending
                   for name, job in jobs.items() if job.phase == "pending")
    assert demotions > 5 and within > 5, (demotions, within)


def test_jobs_after_a_starving_job_stay_off_its_drain_set():
    from scheduler.engine.cycle import decide
    from scheduler.engine.policies import policies_for
    from scheduler.engine.state import CycleState, queue_order

    kept = 0
    for seed in range(150):
        base = _with_checkpoints(_random_snapshot(seed), seed)
        snapshot = replace(base, now=1000.0, policy=Policy(starvation_s=float(seed % 7)))
        state = CycleState(snapshot, policies_for(snapshot))
        decisions = decide(state)
        jobs = {job.name: job for job in snapshot.jobs}
        order = sorted((j for j in snapshot.jobs if j.phase == PENDING), key=queue_order)
        drained: set[str] = set()
        for job in order:
            placed = decisions.admitted[job.name].nodes if job.name in decisions.admitted else ()
            placed += decisions.nominated.get(job.name, ())
            assert not drained & set(placed), (seed, job.name)
            drained |= set(state.drain_sets.get(job.name, ()))
            kept += bool(drained)
        for name, preemption in decisions.preempted.items():
            owner = jobs[preemption.for_job]
            avoid = {n.name for n in state.keep_off.get(owner.name, ())}
            assert set(jobs[name].nodes) - avoid, (seed, name)
    assert kept > 50
