"""Arithmetic of the simulator's figures, on numbers small enough to check by hand."""

from __future__ import annotations

import pytest

from scheduler.simulator.metrics import (
    allocation_series,
    by_quota,
    by_size,
    gang_starvation,
    held_gpu_seconds,
    jain,
    percentile,
    size_bucket,
    slowdown,
    summary,
    targets,
)
from scheduler.simulator.model import JobOutcome


def test_percentile_interpolates_between_order_statistics():
    assert percentile([0, 10], 50) == 5
    assert percentile(list(range(101)), 95) == 95
    # [0, 0, 30]: rank (3 - 1) * 0.95 = 1.9 -> 0 + 0.9 * (30 - 0) = 27.
    assert percentile([0, 0, 30], 95) == pytest.approx(27)
    assert percentile([7], 95) == 7
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summary_of_values_and_of_nothing():
    # p99: rank (3 - 1) * 0.99 = 1.98 -> 0 + 0.98 * 30 = 29.4.
    assert summary([30, 0, 0]) == {"n": 3, "mean": 10.0, "median": 0.0, "p95": 27.0, "p99": 29.4, "max": 30.0}
    assert summary([]) == {"n": 0, "mean": None, "median": None, "p95": None, "p99": None, "max": None}


# 8 GPUs from 0 to 100, 16 from 100 to 250, none after.
STEPS = [(0.0, 8), (100.0, 16), (250.0, 0)]


def test_held_gpu_seconds_integrates_the_step_function():
    assert held_gpu_seconds(STEPS, 0, 1000) == 8 * 100 + 16 * 150
    assert held_gpu_seconds(STEPS, 50, 150) == 8 * 50 + 16 * 50
    assert held_gpu_seconds(STEPS, 300, 400) == 0


def test_allocation_series_averages_each_bucket():
    # Buckets of 100 s over [0, 300): 8, 16, then 16 for 50 s and 0 for 50 s -> 8.
    assert allocation_series(STEPS, 0, 300, 100) == [8.0, 16.0, 8.0]
    # A last bucket shorter than the others averages over its own length: [200, 250) is all 16.
    assert allocation_series(STEPS, 0, 250, 100) == [8.0, 16.0, 16.0]
    # Step changes inside a bucket.
    assert allocation_series(STEPS, 0, 200, 200) == [(8 * 100 + 16 * 100) / 200]


def fig(rate, p95, lost_share=0.0):
    return {
        "allocation_rate": rate, "wait_s": {"fits_quota": {"p95": p95}}, "lost_share": lost_share,
        "grace_s": 30.0, "cycle_s": 10.0,
    }


def test_targets_compare_idle_with_strict_and_pool():
    # idle 0.49 / pool 0.50 = 98 %: just within; p95 140 <= 100 + 30 + 10; lost 0.5 % < 1 %.
    met = targets({"strict": fig(0.3, 100), "idle": fig(0.49, 140, 0.005), "pool": fig(0.5, 50)})
    assert met["allocation_within_2pct"] and met["fits_quota_p95_ok"] and met["lost_under_1pct"]
    assert met["fits_quota_p95_allowed_s"] == 140
    missed = targets({"strict": fig(0.3, 100), "idle": fig(0.48, 141, 0.01), "pool": fig(0.5, 50)})
    assert not (missed["allocation_within_2pct"] or missed["fits_quota_p95_ok"] or missed["lost_under_1pct"])
    assert targets({"idle": fig(0.5, 0)}) is None


def test_size_buckets_cover_every_job_size():
    assert [size_bucket(g) for g in (0, 1, 2, 4, 5, 8, 12, 16, 24, 31, 32, 128)] == [
        "1", "1", "2–4", "2–4", "5–8", "5–8", "9–16", "9–16", "17–31", "17–31", "32+", "32+",
    ]


def test_jain_index_of_equal_and_unequal_values():
    assert jain([2.0, 2.0, 2.0]) == 1.0
    # (1 + 3)^2 / (2 x (1 + 9)) = 16 / 20.
    assert jain([1.0, 3.0]) == 0.8
    # One quota slowed, n - 1 not at all: 1 / n.
    assert jain([5.0, 0.0, 0.0, 0.0]) == 0.25
    assert jain([]) is None


def outcome(name, team, gpus, submit, duration, end=None, queued=0.0):
    return JobOutcome(
        name=name, team=team, gpus=gpus, submit_s=submit, duration_s=duration, fits_guarantee=True,
        first_start_s=None if end is None else end - duration, end_s=end, queued_s=queued,
    )


def test_slowdown_is_bounded_below_ten_seconds_and_censored_for_jobs_never_finished():
    # 100 s of work submitted at 0, ended at 400: 4. A 5 s job that ended 15 s after submission
    # counts as 10 s long: 1.5. Never started, submitted at 100, replay ended at 1000: (900 + 50) / 50.
    assert slowdown(outcome("a", "t", 1, 0, 100, end=400), 1000) == 4
    assert slowdown(outcome("b", "t", 1, 0, 5, end=15), 1000) == 1.5
    assert slowdown(outcome("c", "t", 1, 100, 50), 1000) == 19


def test_groups_by_size_and_quota():
    jobs = [
        outcome("a1", "a", 1, 0, 100, end=100),  # slowdown 1, queued 0
        outcome("a2", "a", 32, 0, 100, end=400, queued=300),  # slowdown 4
        outcome("b1", "b", 1, 0, 100, end=200, queued=100),  # slowdown 2
    ]
    sizes = by_size(jobs, end_s=400)
    assert sizes["1"]["n"] == 2 and sizes["1"]["wait_s"]["max"] == 100 and sizes["1"]["slowdown"]["mean"] == 1.5
    assert sizes["32+"]["wait_s"]["p99"] == 300 and sizes["5–8"]["n"] == 0
    quotas = by_quota(jobs, end_s=400)
    # a: slowdowns 1 and 4 -> mean 2.5; b: 2. Jain (2.5 + 2)^2 / (2 x (6.25 + 4)) = 20.25 / 20.5.
    assert (quotas["a"]["slowdown"]["mean"], quotas["b"]["slowdown"]["mean"]) == (2.5, 2.0)
    # Per quota and size, the p95 wait: a's one 1-GPU job waited 0, its 32-GPU job 300.
    assert quotas["a"]["wait_p95_by_size_s"] == {"1": 0.0, "32+": 300.0}
    assert quotas["b"]["wait_p95_by_size_s"] == {"1": 100.0}
    assert jain([2.5, 2.0]) == pytest.approx(20.25 / 20.5)


def test_gang_starvation_compares_each_quotas_large_gangs_with_its_one_gpu_jobs():
    jobs = [
        outcome("a1", "a", 1, 0, 100, end=200, queued=100),
        outcome("a2", "a", 32, 0, 100, end=300, queued=200),  # twice a's 1-GPU p95: met
        outcome("b1", "b", 1, 0, 100, end=200, queued=100),
        outcome("b2", "b", 64, 0, 100, end=301, queued=201),  # a second more than twice: not met
        outcome("c1", "c", 32, 0, 100, end=100),  # no 1-GPU jobs to compare with: not judged
        outcome("d1", "d", 1, 0, 100, end=100),
    ]
    assert gang_starvation(by_quota(jobs, end_s=400)) == {
        "a": {"p95_32_s": 200.0, "p95_1_s": 100.0, "met": True},
        "b": {"p95_32_s": 201.0, "p95_1_s": 100.0, "met": False},
    }
