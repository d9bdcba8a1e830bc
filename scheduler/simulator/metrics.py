"""Figures of one replay: allocation, queueing delay, JCT, preemption cost, reclaim latency.

Definitions (also in docs/simulator.md):

- GPU allocation rate: GPU-seconds held by pods (running or still exiting after a preemption)
  inside the arrival window, over GPUs x window length. The window runs from the first to the
  last submission, the same for every policy, so work pushed past the last arrival by queueing
  counts against a policy. (A trace whose jobs all arrive at once uses first arrival to last event.)
- Queueing delay (wait): first start minus submission. "own quota": jobs whose first run was
  admitted In Quota; "idle": jobs whose first run was Not in Quota; "fits quota": jobs whose GPUs
  fit their team's guarantee, the same set of jobs under every policy. Jobs that never started
  are counted apart (`never_started`), not in the waits. `wait_by_team_s` splits waits by team.
- JCT: completion minus submission, over finished jobs.
- GPU-hours lost to preemption: per preemption, GPUs x (time since the last checkpoint + grace).
  Delivered: all GPU-hours held by pods over the whole replay (lost ones included).
- Reclaim latency: for runs that had to reclaim (were nominated), the time from entering the queue
  (submission, or the exit that re-queued it) to starting; `nominated_to_start_s` counts from the
  first nomination instead, leaving out any time spent waiting for the quota to have room.

Percentiles interpolate linearly between order statistics (numpy's default), so the median of
[0, 10] is 5 and p95 of [0, 100] is 95.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .replay import ReplayResult


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, by linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = (len(sorted_values) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, median, p95 (and max) of `values`; the statistics are None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "mean": None, "median": None, "p95": None, "max": None}
    return {
        "n": len(ordered),
        "mean": _round(sum(ordered) / len(ordered)),
        "median": _round(percentile(ordered, 50)),
        "p95": _round(percentile(ordered, 95)),
        "max": _round(ordered[-1]),
    }


def held_gpu_seconds(allocation: Sequence[tuple[float, int]], start: float, end: float) -> float:
    """Integral of the allocated-GPUs step function over [start, end]."""
    total = 0.0
    for (t, gpus), (t_next, _) in zip(allocation, [*allocation[1:], (math.inf, 0)], strict=True):
        low, high = max(t, start), min(t_next, end)
        if high > low:
            total += gpus * (high - low)
    return total


def allocation_series(
    allocation: Sequence[tuple[float, int]], start: float, end: float, bucket: float
) -> list[float]:
    """Average GPUs held in each `bucket`-second interval of [start, end) (the last may be shorter)."""
    count = max(1, math.ceil((end - start) / bucket))
    series = [0.0] * count
    for (t, gpus), (t_next, _) in zip(allocation, [*allocation[1:], (math.inf, 0)], strict=True):
        low, high = max(t, start), min(t_next, end)
        if high <= low or not gpus:
            continue
        first = min(int((low - start) // bucket), count - 1)
        last = min(int((high - start) // bucket), count - 1)
        for index in range(max(first - 1, 0), last + 1):
            left = start + index * bucket
            right = start + (index + 1) * bucket if index < count - 1 else math.inf
            overlap = min(high, right) - max(low, left)
            if overlap > 0:
                series[index] += gpus * overlap
    lengths = [min(bucket, end - (start + i * bucket)) for i in range(count)]
    return [area / length if length > 0 else 0.0 for area, length in zip(series, lengths, strict=True)]


def arrival_window(result: ReplayResult) -> tuple[float, float]:
    submits = [job.submit_s for job in result.jobs if not job.rejected]
    if not submits:
        return (0.0, 0.0)
    start, end = min(submits), max(submits)
    if end <= start:
        end = max(start, result.end_s)
    return (start, end)


def figures(result: ReplayResult) -> dict:
    """The figures of one replay, as printed and written to JSON (times in seconds)."""
    jobs = [job for job in result.jobs if not job.rejected]
    started = [job for job in jobs if job.first_start_s is not None]
    finished = [job for job in jobs if job.end_s is not None]
    waits = {
        "all": [job.wait_s for job in started],
        "own_quota": [job.wait_s for job in started if job.first_in_quota],
        "idle": [job.wait_s for job in started if not job.first_in_quota],
        "fits_quota": [job.wait_s for job in started if job.fits_guarantee],
    }
    by_team: dict[str, list[float]] = {}
    for job in started:
        by_team.setdefault(job.team, []).append(job.wait_s)
    start, end = arrival_window(result)
    in_window = held_gpu_seconds(result.allocation, start, end)
    delivered = held_gpu_seconds(result.allocation, 0.0, result.end_s)
    lost = sum(job.lost_gpu_s for job in jobs)
    capacity = result.total_gpus * (end - start)
    config = result.config
    return {
        "policy": result.policy,
        "gpus": result.total_gpus,
        "jobs": len(result.jobs),
        "rejected": len(result.jobs) - len(jobs),
        "never_started": len(jobs) - len(started),
        "never_started_fitting_quota": sum(1 for j in jobs if j.first_start_s is None and j.fits_guarantee),
        "finished": len(finished),
        "allocation_rate": _round(in_window / capacity if capacity > 0 else 0.0, 5),
        "window_h": _round((end - start) / 3600),
        "wait_s": {name: summary(values) for name, values in waits.items()},
        "wait_by_team_s": {team: summary(by_team.get(team, [])) for team in sorted({job.team for job in jobs})},
        "mean_jct_s": _round(sum(j.end_s - j.submit_s for j in finished) / len(finished)) if finished else None,
        "preemptions": result.preemptions,
        "preempted_jobs": sum(1 for job in jobs if job.preemptions),
        "gpu_hours_lost": _round(lost / 3600),
        "gpu_hours_delivered": _round(delivered / 3600),
        "lost_share": _round(lost / delivered, 6) if delivered > 0 else 0.0,
        "reclaim_latency_s": summary(result.reclaim_latencies_s),
        "nominated_to_start_s": summary(result.nominated_to_start_s),
        "makespan_h": _round(result.end_s / 3600),
        "cycle_s": config.cycle_s,
        "grace_s": config.grace_s,
        "checkpoint_s": config.checkpoint_s,
        "cycles": result.cycles,
        "engine_calls": result.engine_calls,
        "engine_s": _round(result.engine_s, 1),
        "wall_s": _round(result.wall_s, 1),
    }


def _round(value: float, digits: int = 3) -> float:
    return round(value, digits)


def targets(all_figures: dict[str, dict]) -> dict | None:
    """The issue's three checks of `idle` against `strict` and `pool`; None unless all three ran.

    - allocation within 2 % (relative) of pool's;
    - p95 wait of jobs that fit their quota at most strict's plus one grace period plus one cycle;
    - GPU-hours lost to preemption under 1 % of GPU-hours delivered.
    """
    if not {"strict", "idle", "pool"} <= set(all_figures):
        return None
    strict, idle, pool = all_figures["strict"], all_figures["idle"], all_figures["pool"]
    allowed_p95 = (strict["wait_s"]["fits_quota"]["p95"] or 0.0) + idle["grace_s"] + idle["cycle_s"]
    idle_p95 = idle["wait_s"]["fits_quota"]["p95"] or 0.0
    ratio = idle["allocation_rate"] / pool["allocation_rate"] if pool["allocation_rate"] else 1.0
    return {
        "allocation_vs_pool": _round(ratio, 4),
        "allocation_within_2pct": ratio >= 0.98,
        "fits_quota_p95_s": idle_p95,
        "fits_quota_p95_allowed_s": _round(allowed_p95),
        "fits_quota_p95_ok": idle_p95 <= allowed_p95,
        "lost_share": idle["lost_share"],
        "lost_under_1pct": idle["lost_share"] < 0.01,
    }
