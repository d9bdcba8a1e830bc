"""Time limits and planned ends (DESIGN §2d).

A job's time limit is its own `time_limit_s`, else its pool's `default_time_limit_s` (0: none); a
running job's planned end is its current run's start plus its limit. The start-estimate plan
(`plan`) and backfill onto drain sets (`policies/starvation`) read them here.
"""

from __future__ import annotations

from .types import Job, Policy


def time_limit(job: Job, policy: Policy) -> float | None:
    """The job's maximum running time in seconds; None: it has none."""
    if job.time_limit_s is not None and job.time_limit_s > 0:
        return job.time_limit_s
    return policy.default_time_limit_s if policy.default_time_limit_s > 0 else None


def planned_end(job: Job, policy: Policy) -> float | None:
    """A running job's planned end (its run's start + its limit); None without a limit."""
    limit = time_limit(job, policy)
    return job.run_started_at + limit if limit is not None else None
