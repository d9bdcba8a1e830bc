"""The job timeline: every transition is an event with a time and a reason."""

from __future__ import annotations

from scheduler.models import Job, JobEvent


def job_event(job: Job, kind: str, reason: str) -> JobEvent:
    return JobEvent.objects.create(job=job, kind=kind, reason=reason[:500])
