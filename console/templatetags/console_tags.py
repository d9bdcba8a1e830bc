"""Display helpers shared by the pages and the partials the websocket consumers render."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from scheduler.models import Job
from scheduler.states import RESUMES_AUTOMATICALLY, STARTED_JOB_STATUSES, JobStatus, PodStatus

register = template.Library()

STATUS_CLASSES = {
    JobStatus.CREATING: "pending",
    JobStatus.QUEUING: "pending",
    JobStatus.RESTARTING: "restarting",
    JobStatus.ENV_PREPARING: "preparing",
    JobStatus.RUNNING: "running",
    JobStatus.SUCCEEDED: "succeeded",
    JobStatus.FAILED: "failed",
    JobStatus.STOPPING: "stopping",
    JobStatus.STOPPED: "stopped",
    JobStatus.PREEMPTED: "preempted",
    PodStatus.PENDING: "pending",
}


@register.simple_tag
def status_badge(status: str) -> str:
    css = STATUS_CLASSES.get(status, "pending")
    return format_html('<span class="badge status status-{}" data-status="{}">{}</span>', css, status, status)


@register.simple_tag
def quota_badge(in_quota: bool | None) -> str:
    """In Quota (green) / Not in Quota (amber); nothing for a job that is not admitted."""
    if in_quota is None:
        return ""
    if in_quota:
        return mark_safe('<span class="badge inq" data-in-quota="true">In Quota</span>')
    return mark_safe('<span class="badge niq" data-in-quota="false">Not in Quota</span>')


@register.filter
def num(value: Any) -> str:
    """The one way numbers of steps and counts are written: "1,346" (and "—" for none)."""
    if value is None or value == "":
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number == int(number):
        return f"{int(number):,}"
    return f"{number:,.1f}"


@register.filter
def gpu_hours(seconds: float | None) -> str:
    """GPU time in GPU-hours, one decimal ("12.3"); "0" for none."""
    if not seconds:
        return "0"
    hours = seconds / 3600
    return f"{hours:,.2f}" if hours < 1 else f"{hours:,.1f}"


@register.filter
def admission(job: Job) -> bool | None:
    """How the current attempt was admitted; None once it is over (a finished job's last admission is
    history, on its page's events), while it waits, and from the moment it is Preempted (its pods
    may still be exiting, but the attempt no longer runs In or Not in Quota)."""
    return job.in_quota if job.attempt_open and job.status != JobStatus.PREEMPTED else None


@register.filter
def resumed_step(job: Job) -> int | None:
    """The step the current attempt resumed from (its own progress report), else None."""
    progress = job.progress or {}
    if progress.get("attempt") != job.attempt or job.is_waiting:
        return None
    return progress.get("resumed_from_step")


@register.filter
def job_gpus(job: Job) -> str:
    """Total GPUs and model, from the prefetched roles: "16 × A100", "8 GPUs", "CPU only"."""
    total = job.total_gpus
    if not total:
        return "CPU only"
    model = job.gpu_type or next((role.gpu_type for role in job.roles.all() if role.gpu_type), "")
    return f"{total} × {model}" if model else f"{total} GPUs"


@register.filter
def job_nodes(job: Job) -> list[str]:
    """Distinct nodes of the job's latest attempt (`current_pods` from `with_row_data`); none while
    it waits in the queue (those were the previous attempt's) or is Preempted (its pods are leaving
    them; the job page lists them per attempt)."""
    pods = getattr(job, "current_pods", None)
    if pods is None or job.is_waiting or job.status == JobStatus.PREEMPTED:
        return []
    return sorted({pod.node.name for pod in pods if pod.node is not None})


@register.filter
def elastic_pods(job: Job) -> str:
    """An elastic job's size (DESIGN §2c): "3 of 2–8 pods" (pods running now, of its minimum–maximum); "" for a
    plain job. Pods a shrink is taking away no longer count."""
    roles = list(job.roles.all())
    elastic = next((role for role in roles if role.min_pod_count is not None), None)
    if elastic is None:
        return ""
    most = sum(role.pod_count for role in roles)
    least = most - elastic.pod_count + elastic.min_pod_count
    pods = getattr(job, "current_pods", None)
    if pods is None:
        pods = list(job.pods.filter(attempt=job.attempt))
    running = 0 if job.is_waiting else sum(
        1 for pod in pods if pod.attempt == job.attempt and pod.is_live and not pod.terminate_requested)
    return f"{running} of {least}–{most} pods"


@register.filter
def gpu_counts(value: Mapping[str, int] | None) -> str:
    if not value:
        return "—"
    return ", ".join(f"{count} × {model}" for model, count in sorted(value.items()))


@register.filter
def job_color(job_id: int | None) -> str:
    """A stable colour per job, so one job's GPUs read as one block on the node grid."""
    if job_id is None or job_id < 0:
        return "#94a3b8"
    hue = (job_id * 137) % 360  # the golden angle spreads consecutive ids apart
    return f"hsl({hue} 55% 52%)"


@register.filter
def since(value: datetime | None) -> str:
    """A compact age: "12s", "5m", "3h 4m", "2d 1h"."""
    if value is None:
        return ""
    return duration_text((timezone.now() - value).total_seconds())


@register.filter
def duration_text(seconds: float | int | None) -> str:
    if seconds is None:
        return ""
    if 0 < seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s" if minutes < 10 and seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


@register.filter
def run_time(job: Job) -> str:
    """How long the job ran, all attempts together ("" if it never ran)."""
    seconds = job.total_run_seconds()
    if not seconds and job.started_at is None:
        return ""
    return duration_text(seconds)


@register.filter
def job_gpu_hours(job: Job) -> str:
    """GPU-hours the job used, all attempts together."""
    return gpu_hours(job.total_gpu_seconds())


@register.filter
def epoch_time(value: float | int | None) -> datetime | None:
    """Epoch seconds (the checkpoint helper's progress report) as an aware datetime."""
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(float(value), tz=timezone.get_current_timezone())
    except (TypeError, ValueError, OverflowError):
        return None


RUNNING_STATUSES = (*STARTED_JOB_STATUSES, JobStatus.SUCCEEDED)


@register.filter
def is_waiting(job: Job) -> bool:
    """In the queue: pending, or Preempted and queued again to resume automatically."""
    return job.is_waiting


@register.simple_tag
def resumes_automatically_text() -> str:
    """What members read next to a Preempted job queued again (written once: scheduler/states.py)."""
    return RESUMES_AUTOMATICALLY


@register.filter
def shows_reason(job: Job) -> bool:
    """Waiting, preempted, stopping or failed jobs show why; a running job's last reason is history."""
    return job.status not in RUNNING_STATUSES


@register.filter
def page_url(page: Any, number: int) -> str:
    return page.page_url(number)


@register.simple_tag
def plotly_js_url() -> str:
    from console.assets import plotly_version

    return reverse("console:plotly_js", kwargs={"version": plotly_version()})


@register.filter
def percent(part: float | int, whole: float | int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


@register.filter
def is_job_status(status: str, names: str) -> bool:
    """`{% if job.status|is_job_status:"PREEMPTED,FAILED" %}`: states named as in scheduler/states.py, so
    a template never spells a status itself (an unknown name raises)."""
    return status in {JobStatus[name.strip()] for name in names.split(",")}


@register.filter
def is_pod_status(status: str, names: str) -> bool:
    """As `is_job_status`, for pods: `{% if pod.status|is_pod_status:"RUNNING" %}`."""
    return status in {PodStatus[name.strip()] for name in names.split(",")}
