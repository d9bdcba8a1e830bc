"""§2d in the simulator: the limits models, the first estimate each job gets, and the estimate-quality
figure (simulator/limits.py)."""

from __future__ import annotations

import pytest
from test_sim_replay import FREE, TWO_TEAMS, TWO_TEAMS_JOBS

from scheduler.simulator.limits import estimate_quality, time_limit
from scheduler.simulator.metrics import figures
from scheduler.simulator.model import JobOutcome
from scheduler.simulator.replay import ReplayConfig, replay


def test_limit_models():
    assert time_limit("none", 3000) is None
    assert time_limit("exact", 3000) == 3000 and time_limit("x2", 3000) == 6000
    assert time_limit("round", 3000) == 3600 and time_limit("round", 3600) == 3600
    assert time_limit("round", 10 * 86400) == 10 * 86400  # past a week: the run time itself
    with pytest.raises(ValueError):
        time_limit("x3", 10)
    with pytest.raises(ValueError):
        ReplayConfig(policy="strict", limits="x3")


def test_exact_limits_give_the_real_start_as_the_first_estimate():
    # strict: a2 waits for a1 (0-3600): with exact limits its first estimate, made at 0, is 3600.
    result = replay(TWO_TEAMS_JOBS, TWO_TEAMS, ReplayConfig(policy="strict", limits="exact", **FREE))
    jobs = {j.name: j for j in result.jobs}
    assert (jobs["a2"].estimate_made_s, jobs["a2"].estimated_start_s, jobs["a2"].first_start_s) == (0, 3600, 3600)
    assert jobs["a1"].estimate_made_s is None  # it started at once: never pending after a cycle
    assert figures(result)["estimate_quality"] == {
        "judged": 1, "within": 1, "within_share": 1.0, "unknown": 0, "median_error_s": 0.0, "rough": 0,
        "rough_within": 0}
    # Without limits the engine plans nothing and the figure is left out.
    plain = replay(TWO_TEAMS_JOBS, TWO_TEAMS, ReplayConfig(policy="strict", **FREE))
    assert figures(plain)["estimate_quality"] is None
    assert all(j.estimate_made_s is None for j in plain.jobs)


def _outcome(name, wait, estimate, made=0.0, rough=False):
    return JobOutcome(name=name, team="a", gpus=1, submit_s=0.0, duration_s=10.0, fits_guarantee=True,
                      first_start_s=wait, estimated_start_s=estimate, estimate_made_s=made, estimate_rough=rough)


def test_quality_counts_jobs_that_waited_ten_minutes_within_a_quarter_or_fifteen_minutes():
    outcomes = [
        _outcome("short", 599, 5000),  # waited under 10 min: not judged
        _outcome("close", 4000, 4000 + 999),  # 999 s off, within 25 % of 4000 s = 1000 s
        _outcome("far", 4000, 4000 + 1001, rough=True),
        _outcome("near", 1000, 1000 - 900, rough=True),  # 900 s off: within 15 min
        _outcome("unknown", 2000, None),
        _outcome("unseen", 2000, None, made=None),  # never estimated (not pending at a cycle): not judged
    ]
    assert estimate_quality(outcomes) == {
        "judged": 4, "within": 2, "within_share": 0.5, "unknown": 1, "median_error_s": 999.0, "rough": 2,
        "rough_within": 1}
