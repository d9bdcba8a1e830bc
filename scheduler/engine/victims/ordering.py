"""The order of reclaim candidates (DESIGN §2), in one function: every list of candidates is sorted by it
(`unit_ordering` adds §2c's extra pods to it)."""

from __future__ import annotations

from ..types import Job


def candidates_ordering(job: Job) -> tuple[int, float, str]:
    """Lower priority first; then the most recent safe point (least work lost: `Job.safe_point`, the last
    checkpoint reported after the start, else the start); then by name."""
    return (job.priority, -job.safe_point, job.name)


def unit_ordering(job: Job, extra: int | None) -> tuple[int, int, float, str, int]:
    """A unit's place among the candidates (§2c): a whole job (`extra` None) or one extra pod of an elastic
    job (its role index). By the job's order, except that at equal priority extra pods come before whole
    jobs (a shrink keeps its job running), and among one job's extra pods the highest index first."""
    priority, recent, name = candidates_ordering(job)
    return (priority, 1 if extra is None else 0, recent, name, 0 if extra is None else -extra)
