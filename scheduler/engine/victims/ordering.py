"""The order of reclaim candidates (DESIGN §2), in one function: every list of candidates is sorted by it."""

from __future__ import annotations

from ..types import Job


def candidates_ordering(job: Job) -> tuple[int, float, str]:
    """Lower priority first; then the most recent safe point (least work lost: `Job.safe_point`, the last
    checkpoint reported after the start, else the start); then by name."""
    return (job.priority, -job.safe_point, job.name)
