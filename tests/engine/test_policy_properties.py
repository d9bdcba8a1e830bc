"""Hypothesis properties of DESIGN §2b's policies over the same random snapshots as test_properties:
with every policy at its default a `now` and explicit defaults change no decision; with policies on,
§2's invariants still hold where §2b keeps them (fair share, min_runtime_s and starvation_s never
make an In Quota victim nor break a quota), and protected jobs are never preempted."""

from __future__ import annotations

from dataclasses import replace

from engine_checks import check_decisions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import snapshots

from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import IDLE_SHARE_FAIR, IDLE_SHARE_FIFO, RUNNING, Policy

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(snapshots(), st.floats(0, 1e6))
def test_policies_off_change_nothing(snapshot, now):
    plain = run_cycle(snapshot)
    timed = run_cycle(replace(snapshot, now=now, policy=Policy()))
    # a `now` only adds the §2d start estimates: one per pending job, never before now
    assert set(timed.estimates) == set(timed.pending)
    assert all(e.start is None or e.start >= now for e in timed.estimates.values())
    timed.estimates.clear()
    assert timed == plain
    assert plain.demoted == []


@SETTINGS
@given(snapshots(), st.sampled_from((IDLE_SHARE_FIFO, IDLE_SHARE_FAIR)), st.sampled_from((0.0, 10.0, 30.0, 60.0)),
       st.sampled_from((0.0, 5.0, 50.0)))
def test_policies_keep_the_invariants(snapshot, idle_share, min_runtime_s, starvation_s):
    snapshot = replace(snapshot, now=50.0, policy=Policy(idle_share, min_runtime_s, starvation_s))
    decisions = run_cycle(snapshot)
    check_decisions(snapshot, decisions)
    for name in decisions.preempted:
        job = next(j for j in snapshot.jobs if j.name == name)
        assert job.phase == RUNNING and (job.started_at or 0.0) + min_runtime_s <= 50.0
