"""The job timeline: every transition is an event with a time and a reason."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.models import Job, JobEvent


def _event(job: Job, kind: str, reason: str, staff_reason: str = "", code: str = "") -> JobEvent:
    """`reason` is what members read: it names no other job. `staff_reason` (optional) may name them."""
    staff = staff_reason[:500] if staff_reason and staff_reason != reason else ""
    return JobEvent(job=job, kind=kind, reason=reason[:500], staff_reason=staff, code=code)


def job_event(job: Job, kind: str, reason: str, *, staff_reason: str = "", code: str = "") -> JobEvent:
    event = _event(job, kind, reason, staff_reason, code)
    event.save(force_insert=True)
    return event


def job_events(job: Job, entries: Sequence[tuple[str, str]]) -> list[JobEvent]:
    """Several events of one job at once, (kind, member reason) each, in order: one INSERT."""
    return JobEvent.objects.bulk_create([_event(job, kind, reason) for kind, reason in entries])
