"""Promotion (DESIGN §2 step 3): a running Not in Quota job with idle mode `acceptable`, or one demoted
by preempt_within (§2b) whatever its idle mode, whose quota now fits it becomes In Quota, oldest first.
It can no longer be reclaimed. `only` jobs are never promoted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .types import Job

if TYPE_CHECKING:
    from .state import CycleState


def promote(state: CycleState) -> None:
    def oldest_first(entry: tuple[Job, dict[str, int]]) -> tuple[float, str]:
        job = entry[0]
        return (job.started_at if job.started_at is not None else job.submitted_at, job.name)

    decided = state.decisions
    for job, request in sorted(state.promotable, key=oldest_first):
        if job.name in decided.preempted:
            continue
        if state.quotas.min_shortfall(job.quota, request) is None:
            state.quotas.promote(job.quota, request)
            decided.promoted.append(job.name)
