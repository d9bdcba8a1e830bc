"""Who may see what: the one permission rule that pages, the API and websocket consumers share."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from scheduler.models import Job, ResourceQuota, Workspace


def user_workspaces(*, user: AbstractBaseUser) -> QuerySet[Workspace]:
    if not user.is_authenticated:
        return Workspace.objects.none()
    if user.is_staff:
        return Workspace.objects.all()
    return Workspace.objects.filter(members=user)


def user_can_use_workspace(*, user: AbstractBaseUser, workspace: Workspace) -> bool:
    return user_workspaces(user=user).filter(pk=workspace.pk).exists()


def visible_jobs(*, user: AbstractBaseUser) -> QuerySet[Job]:
    """Jobs of the user's workspaces (staff: all)."""
    if not user.is_authenticated:
        return Job.objects.none()
    jobs = Job.objects.select_related("workspace", "quota", "owner")
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
