"""Who may see what: the one permission rule that pages, the API and websocket consumers share."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf

from scheduler.models import Job, ResourceQuota, Workspace


def reason_for(*, user: AbstractBaseUser, field: str = "reason", staff_field: str = "staff_reason") -> object:
    """The reason text this user reads: staff read the one with job names (when there is one);
    members the one that names no other job and no internal key."""
    if user.is_staff:
        return Coalesce(NullIf(F(staff_field), Value("")), F(field))
    return F(field)


def shown_text(*, user: AbstractBaseUser, text: str, staff_text: str = "") -> str:
    """`reason_for` on values in hand (rows just written, not read back): the same rule."""
    return staff_text or text if user.is_staff else text


def user_workspaces(*, user: AbstractBaseUser) -> QuerySet[Workspace]:
    if not user.is_authenticated:
        return Workspace.objects.none()
    if user.is_staff:
        return Workspace.objects.all()
    return Workspace.objects.filter(members=user)


def user_can_use_workspace(*, user: AbstractBaseUser, workspace: Workspace) -> bool:
    return user_workspaces(user=user).filter(pk=workspace.pk).exists()


def visible_jobs(*, user: AbstractBaseUser) -> QuerySet[Job]:
    """Jobs of the user's workspaces (staff: all), each with `shown_reason`: its waiting or
    preemption reason as this user may read it (see `reason_for`)."""
    if not user.is_authenticated:
        return Job.objects.none()
    jobs = Job.objects.select_related("workspace", "quota", "owner").annotate(
        shown_reason=reason_for(user=user, field="waiting_reason", staff_field="waiting_reason_staff")
    )
    if user.is_staff:
        return jobs
    return jobs.filter(workspace__members=user)


def job_for_user(*, user: AbstractBaseUser, job_id: int) -> Job | None:
    return visible_jobs(user=user).filter(pk=job_id).first()


def user_quotas(*, user: AbstractBaseUser) -> QuerySet[ResourceQuota]:
    """Quotas the user may submit to: those associated with the user's workspaces (staff: all)."""
    if not user.is_authenticated:
        return ResourceQuota.objects.none()
    quotas = ResourceQuota.objects.all()
    if not user.is_staff:
        quotas = quotas.filter(workspaces__members=user).distinct()
    return quotas.order_by("resource_type", "name")
