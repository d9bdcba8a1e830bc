"""Job reads for the console and the API; every one goes through `visible_jobs`."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Prefetch, Q, QuerySet

from scheduler.models import REQUEUED_PREEMPTED, Job, JobEvent, JobPreemption, JobResize, JobRole, Pod
from scheduler.selectors.access import reason_for, shown_text, visible_jobs
from scheduler.states import (
    ACTIVE_JOB_STATUSES,
    FINAL_JOB_STATUSES,
    JOB_STATUS_VALUES,
    PENDING_JOB_STATUSES,
)

STATUS_GROUPS: dict[str, tuple[str, ...]] = {
    "active": ACTIVE_JOB_STATUSES,
    "pending": PENDING_JOB_STATUSES,
    "finished": FINAL_JOB_STATUSES,
}

# Sort keys offered by the job list; each ends with a unique column so pages never overlap.
JOB_SORTS: dict[str, tuple[str, ...]] = {
    "-submitted": ("-created_at", "-id"),
    "submitted": ("created_at", "id"),
    "name": ("name", "id"),
    "-name": ("-name", "-id"),
    "status": ("status", "-id"),
    "-priority": ("-priority", "queue_time", "id"),
    "priority": ("priority", "queue_time", "id"),
    "quota": ("quota__name", "-id"),
}
DEFAULT_JOB_SORT = "-submitted"


@dataclass(frozen=True)
class JobFilters:
    """The job list's filters; empty values filter nothing."""
    status: str = ""  # a JobStatus value or a key of STATUS_GROUPS
    quota_id: int | None = None
    workspace_id: int | None = None
    idle_mode: str = ""
    mine: bool = False
    name: str = ""  # substring of the job name


def job_list(
    *, user: AbstractBaseUser, filters: JobFilters | None = None, sort: str = DEFAULT_JOB_SORT
) -> QuerySet[Job]:
    """Visible jobs, filtered and ordered; rows need `with_row_data` before rendering."""
    jobs = visible_jobs(user=user)
    f = filters or JobFilters()
    if f.status == "pending":  # Preempted jobs queued again to resume wait too (DESIGN §3)
        jobs = jobs.filter(Q(status__in=PENDING_JOB_STATUSES) | REQUEUED_PREEMPTED)
    elif f.status in STATUS_GROUPS:
        jobs = jobs.filter(status__in=STATUS_GROUPS[f.status])
    elif f.status in JOB_STATUS_VALUES:
        jobs = jobs.filter(status=f.status)
    if f.quota_id is not None:
        jobs = jobs.filter(quota_id=f.quota_id)
    if f.workspace_id is not None:
        jobs = jobs.filter(workspace_id=f.workspace_id)
    if f.idle_mode:
        jobs = jobs.filter(idle_mode=f.idle_mode)
    if f.mine and user.is_authenticated:
        jobs = jobs.filter(owner_id=user.pk)
    if f.name:
        jobs = jobs.filter(name__icontains=f.name)
    return jobs.order_by(*JOB_SORTS.get(sort, JOB_SORTS[DEFAULT_JOB_SORT]))


def with_row_data(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Everything a job row shows, in a fixed number of queries whatever the page size.

    `job.current_pods`: the pods of the job's latest attempt, with their nodes; `job.resizes`: its latest
    attempt's resizes, which an elastic job's GPU time is counted by (models/gpu_time.py).
    """
    return jobs.select_related("workspace", "quota", "owner").prefetch_related(
        Prefetch("roles", queryset=JobRole.objects.order_by("order", "id")),
        Prefetch("resizes", queryset=JobResize.objects.filter(attempt=F("job__attempt")).order_by("time", "id")),
        Prefetch(
            "pods",
            queryset=Pod.objects.filter(attempt=F("job__attempt")).select_related("node").order_by("rank"),
            to_attr="current_pods",
        ),
    )


def submitted_job_detail(*, user: AbstractBaseUser, job: Job) -> Job:
    """What `job_detail` gives for a job `job_submit` has just written, from the rows it returned
    (roles and events in hand, no pods or preemptions yet): no read back, the same texts."""
    job.shown_reason = shown_text(user=user, text=job.waiting_reason, staff_text=job.waiting_reason_staff)
    for event in job.events.all():
        event.shown_reason = shown_text(user=user, text=event.reason, staff_text=event.staff_reason)
    return job


def job_detail(*, user: AbstractBaseUser, job_id: int) -> Job | None:
    """One visible job with roles, every attempt's pods (newest first), its preemptions and the event
    timeline; events and preemptions carry `shown_reason`, the text this user may read."""
    shown = reason_for(user=user)
    return (
        visible_jobs(user=user)
        .prefetch_related(
            Prefetch("roles", queryset=JobRole.objects.order_by("order", "id")),
            Prefetch("pods", queryset=Pod.objects.select_related("node").order_by("-attempt", "rank")),
            Prefetch("events", queryset=JobEvent.objects.annotate(shown_reason=shown).order_by("time", "id")),
            Prefetch("preemptions", queryset=JobPreemption.objects.annotate(shown_reason=shown).order_by("time", "id")),
        )
        .filter(pk=job_id)
        .first()
    )
