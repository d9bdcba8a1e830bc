"""Figures of one replay, measured so that they cannot flatter a policy (docs/simulator.md).

- Allocation: GPU-seconds of *useful* work (work a job kept: redone work, checkpoint saves,
  restart overhead and grace periods left out) inside the arrival window, over GPUs x window.
  The window runs from the first to the last submission, the same for every policy, so work
  pushed past the last arrival counts against a policy. (A trace whose jobs all arrive at once
  uses first arrival to last event.) `held_rate` counts everything pods held, for comparison.
- GPU-hours: useful + redone + checkpoint + restart + grace = held by pods, exactly.
- Wait: all time a job spent queued: before its first start and after every preemption (from
  its pods' exit to its next start). A job still queued when the replay ends (never started)
  counts with its censored wait, up to that end. `first_wait_s` is the classic submission to
  first start, over started jobs only. "own quota": first run admitted In Quota; "idle": first
  run Not in Quota; "fits quota": jobs whose GPUs fit their team's guarantee (same set under
  every policy).
- Slowdown (bounded): (completion - submission) / max(duration, 10 s); for a job that never
  finished, (end of the replay - submission + duration) / max(duration, 10 s), a lower bound.
- By job size (GPUs: 1, 2-4, 5-8, 9-16, 17-31, 32+) and by quota: wait and slowdown, mean, p50,
  p95, p99 and max; per quota also the p95 wait of each job size it submitted (the starvation
  check, `gang_starvation`: in each quota with both, its 32+-GPU jobs' p95 wait against its 1-GPU
  jobs', met when at most twice as long, issue 13's criterion). Jain's fairness index of the per-quota mean slowdowns:
  (sum x)^2 / (n sum x^2), 1 when every quota's jobs are slowed alike, 1/n at worst.
- GPU-hours lost to preemption: redone work, grace periods and restart overhead. With elastic jobs
  (DESIGN §2c) what resizes cost (the same three, caused by a shrink or growth) is counted apart.
- Reclaim latency: for runs that had to reclaim (were nominated), the time from entering the queue
  (submission, or the exit that re-queued it) to starting; `nominated_to_start_s` counts from the
  first nomination instead, leaving out any time spent waiting for the quota to have room.

Percentiles interpolate linearly between order statistics (numpy's default), so the median of
[0, 10] is 5 and p95 of [0, 100] is 95.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .limits import estimate_quality
from .model import JobOutcome, ReplayResult

SLOWDOWN_FLOOR_S = 10.0  # bounded slowdown: durations under this count as this
SIZE_BUCKETS = (("1", 0, 1), ("2–4", 2, 4), ("5–8", 5, 8), ("9–16", 9, 16), ("17–31", 17, 31), ("32+", 32, None))
SPLIT_KEYS = ("useful", "redone", "checkpoint", "restart", "grace")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, by linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = (len(sorted_values) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, median, p95, p99 and max of `values`; the statistics are None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "mean": None, "median": None, "p95": None, "p99": None, "max": None}
    return {
        "n": len(ordered),
        "mean": _round(sum(ordered) / len(ordered)),
        "median": _round(percentile(ordered, 50)),
        "p95": _round(percentile(ordered, 95)),
        "p99": _round(percentile(ordered, 99)),
        "max": _round(ordered[-1]),
    }


def size_bucket(gpus: int) -> str:
    """The job-size bucket of a job of `gpus` GPUs (a GPU-less job counts with the 1-GPU ones)."""
    for label, _low, high in SIZE_BUCKETS:
        if high is None or gpus <= high:
            return label
    raise AssertionError("the last bucket is open")


def slowdown(job: JobOutcome, end_s: float) -> float:
    """Bounded slowdown; a job that never finished counts as finishing at `end_s` plus its duration."""
    finish = job.end_s if job.end_s is not None else end_s + job.duration_s
    return (finish - job.submit_s) / max(job.duration_s, SLOWDOWN_FLOOR_S)


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2); None for no values, 1 for all zeros."""
    if not values:
        return None
    squares = sum(v * v for v in values)
    return 1.0 if squares == 0 else sum(values) ** 2 / (len(values) * squares)


def gpu_seconds(result: ReplayResult, start: float = -math.inf, end: float = math.inf) -> dict[str, float]:
    """GPU-seconds of all runs inside [start, end], by where they went (useful, redone, ...)."""
    total = dict.fromkeys(SPLIT_KEYS, 0.0)
    for record in result.runs:
        if record.end <= start or record.run.start >= end:
            continue
        for key, value in record.split(start, end).items():
            total[key] += value
    return total


def group_figures(jobs: Sequence[JobOutcome], end_s: float) -> dict:
    """n, never started, wait (all time queued) and slowdown of a group of jobs."""
    return {
        "n": len(jobs),
        "never_started": sum(1 for job in jobs if job.first_start_s is None),
        "wait_s": summary([job.queued_s for job in jobs]),
        "slowdown": summary([slowdown(job, end_s) for job in jobs]),
    }


def by_size(jobs: Sequence[JobOutcome], end_s: float) -> dict[str, dict]:
    groups: dict[str, list[JobOutcome]] = {label: [] for label, _, _ in SIZE_BUCKETS}
    for job in jobs:
        groups[size_bucket(job.gpus)].append(job)
    return {label: group_figures(members, end_s) for label, members in groups.items()}


def by_quota(jobs: Sequence[JobOutcome], end_s: float) -> dict[str, dict]:
    groups: dict[str, list[JobOutcome]] = {}
    for job in jobs:
        groups.setdefault(job.team, []).append(job)
    out = {}
    for team in sorted(groups):
        members = groups[team]
        figures = group_figures(members, end_s)
        figures["useful_gpu_h"] = _round(sum(j.useful_gpu_s for j in members) / 3600)
        figures["redone_gpu_h"] = _round(sum(j.redone_gpu_s for j in members) / 3600)
        figures["preemptions"] = sum(j.preemptions for j in members)
        figures["wait_p95_by_size_s"] = {
            label: group["wait_s"]["p95"] for label, group in by_size(members, end_s).items() if group["n"]
        }
        out[team] = figures
    return out


def gang_starvation(quotas: Mapping[str, dict]) -> dict[str, dict]:
    """Issue 13's check of large gangs in each quota that has both 32+-GPU and 1-GPU jobs: the p95
    wait of its 32+ jobs against its 1-GPU jobs'; `met` when at most twice as long."""
    out = {}
    for team, figures in quotas.items():
        p95 = figures["wait_p95_by_size_s"]
        if "32+" in p95 and "1" in p95:
            out[team] = {"p95_32_s": p95["32+"], "p95_1_s": p95["1"], "met": p95["32+"] <= 2 * p95["1"]}
    return out


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
        "all": [job.queued_s for job in jobs],
        "own_quota": [job.queued_s for job in started if job.first_in_quota],
        "idle": [job.queued_s for job in started if not job.first_in_quota],
        "fits_quota": [job.queued_s for job in jobs if job.fits_guarantee],
    }
    start, end = arrival_window(result)
    in_window = gpu_seconds(result, start, end)
    whole = gpu_seconds(result)
    held = sum(whole.values())
    resize_lost = sum(job.resize_lost_gpu_s for job in jobs)
    lost = whole["redone"] + whole["restart"] + whole["grace"] - resize_lost  # preemptions' share
    capacity = result.total_gpus * (end - start)
    config = result.config
    quotas = by_quota(jobs, result.end_s)
    return {
        "policy": result.policy,
        "gpus": result.total_gpus,
        "jobs": len(result.jobs),
        "rejected": len(result.jobs) - len(jobs),
        "never_started": len(jobs) - len(started),
        "never_started_fitting_quota": sum(1 for j in jobs if j.first_start_s is None and j.fits_guarantee),
        "finished": len(finished),
        "allocation_rate": _round(in_window["useful"] / capacity if capacity > 0 else 0.0, 5),
        "held_rate": _round(sum(in_window.values()) / capacity if capacity > 0 else 0.0, 5),
        "window_h": _round((end - start) / 3600),
        "gpu_hours": {key: _round(value / 3600) for key, value in whole.items()} | {"held": _round(held / 3600)},
        "wait_s": {name: summary(values) for name, values in waits.items()},
        "first_wait_s": summary([job.wait_s for job in started]),
        "requeued_s": summary([job.queued_s - job.wait_s for job in started if job.preemptions]),
        "slowdown": summary([slowdown(job, result.end_s) for job in jobs]),
        "by_size": by_size(jobs, result.end_s),
        "by_quota": quotas,
        "jain_slowdown": _round(jain([q["slowdown"]["mean"] for q in quotas.values()]) or 0.0, 4),
        "gang_starvation": gang_starvation(quotas),
        "mean_jct_s": _round(sum(j.end_s - j.submit_s for j in finished) / len(finished)) if finished else None,
        "preemptions": result.preemptions,
        "estimate_quality": estimate_quality(jobs) if config.limits != "none" else None,
        "preempted_jobs": sum(1 for job in jobs if job.preemptions),
        "demotions": result.demotions,
        "in_quota_preemptions": result.in_quota_preemptions,
        "wait_by_priority_s": {
            str(p): summary([j.queued_s for j in jobs if j.priority == p]) for p in sorted({j.priority for j in jobs})
        },
        "gpu_hours_lost": _round(lost / 3600),
        "elastic_jobs": sum(1 for job in jobs if job.elastic),
        "shrinks": result.shrinks,
        "growths": result.growths,
        "pods_shrunk": result.pods_shrunk,
        "pods_grown": result.pods_grown,
        "gpu_hours_resize_lost": _round(resize_lost / 3600),
        "gpu_hours_growth_lost": _round(sum(job.growth_lost_gpu_s for job in jobs) / 3600),
        "gpu_hours_delivered": _round(held / 3600),
        "lost_share": _round(lost / held, 6) if held > 0 else 0.0,
        "reclaim_latency_s": summary(result.reclaim_latencies_s),
        "nominated_to_start_s": summary(result.nominated_to_start_s),
        "makespan_h": _round(result.end_s / 3600),
        "cycle_s": config.cycle_s,
        "grace_s": config.grace_s,
        "checkpoint_s": config.checkpoint_s,
        "checkpoint_cost_s": config.checkpoint_cost_s,
        "restart_s": config.restart_s,
        "elastic_share": config.elastic_share,
        "elastic_alpha": config.elastic_alpha,
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


def elastic_comparison(all_figures: Mapping[str, dict], baseline: str = "idle") -> dict[str, dict]:
    """Issue 24's figures of each column with elastic jobs against the `baseline` column (same replay without
    them): mean JCT, useful allocation, whole-job preemptions (and how many fewer), the resizes done and what
    they cost, and the owners' p95 wait (jobs whose first run was In Quota), which must not get worse."""
    base = all_figures.get(baseline)
    if base is None or base["elastic_share"]:
        return {}
    out = {}
    for name, f in all_figures.items():
        if not f["elastic_share"]:
            continue
        owners, owners_base = f["wait_s"]["own_quota"]["p95"], base["wait_s"]["own_quota"]["p95"]
        out[name] = {
            "baseline": baseline,
            "mean_jct_s": [base["mean_jct_s"], f["mean_jct_s"]],
            "allocation_rate": [base["allocation_rate"], f["allocation_rate"]],
            "preemptions": [base["preemptions"], f["preemptions"]],
            "preemptions_avoided": base["preemptions"] - f["preemptions"],
            "shrinks": f["shrinks"], "pods_shrunk": f["pods_shrunk"],
            "growths": f["growths"], "pods_grown": f["pods_grown"],
            "gpu_hours_lost": [base["gpu_hours_lost"], f["gpu_hours_lost"]],
            "gpu_hours_resize_lost": f["gpu_hours_resize_lost"],
            "gpu_hours_growth_lost": f["gpu_hours_growth_lost"],
            "owners_p95_wait_s": [owners_base, owners],
            "owners_p95_not_worse": owners is None or owners_base is None or owners <= owners_base,
        }
    return out
