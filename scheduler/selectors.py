"""Reads, with the permission rules in one place: pages, the API and websocket consumers all call these."""

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


def workspace_quotas(*, workspace: Workspace) -> QuerySet[ResourceQuota]:
    return workspace.quotas.all().order_by("resource_type", "name")


def allocation_by_quota(*, now) -> list:
    """GPU allocation samples at `now`: one per quota (its own jobs) and one per pool (quota=None)."""
    from collections import defaultdict

    from scheduler.models import LIVE_POD_STATUSES, AllocationSample, Node, Pod

    in_quota: dict[int, int] = defaultdict(int)
    not_in_quota: dict[int, int] = defaultdict(int)
    pool_in: dict[str, int] = defaultdict(int)
    pool_out: dict[str, int] = defaultdict(int)
    rows = Pod.objects.filter(status__in=LIVE_POD_STATUSES).values_list(
        "job__quota_id", "job__quota__resource_type", "job__in_quota", "gpu_indices"
    )
    for quota_id, pool, job_in_quota, indices in rows:
        gpus = len(indices or [])
        if job_in_quota:
            in_quota[quota_id] += gpus
            pool_in[pool] += gpus
        else:
            not_in_quota[quota_id] += gpus
            pool_out[pool] += gpus
    totals: dict[str, int] = defaultdict(int)
    for pool, count in Node.objects.filter(lost=False).values_list("resource_type", "gpu_count"):
        totals[pool] += count
    samples = [
        AllocationSample(
            time=now,
            resource_type=quota.resource_type,
            quota=quota,
            in_quota_gpus=in_quota[quota.pk],
            not_in_quota_gpus=not_in_quota[quota.pk],
            total_gpus=quota.min_gpu_total,
        )
        for quota in ResourceQuota.objects.all()
    ]
    samples += [
        AllocationSample(
            time=now, resource_type=pool, quota=None,
            in_quota_gpus=pool_in[pool], not_in_quota_gpus=pool_out[pool], total_gpus=total,
        )
        for pool, total in totals.items()
    ]
    return samples
