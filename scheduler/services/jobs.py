"""Job writes users make: submit, stop, restart."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduler.engine.placement import unplaceable_reason
from scheduler.engine.quota import effective_min
from scheduler.engine.resources import amount_in_units, unit_name, vector
from scheduler.engine_rows import engine_nodes_of_pool, engine_quota, role_pods
from scheduler.models import GRACE_SECONDS_MAX, IdleMode, Job, JobRole, JobType, ResourceQuota, Workspace
from scheduler.paths import clean_user_path, default_checkpoint_dir
from scheduler.publish import publish_jobs_changed_on_commit, wake_scheduler_on_commit
from scheduler.selectors import user_can_use_workspace
from scheduler.services.events import job_event
from scheduler.services.lifecycle import job_terminate
from scheduler.states import FINAL_JOB_STATUSES, LIVE_POD_STATUSES, EventKind, JobStatus, PodOutcome

NAME_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,98}[a-z0-9])?$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _number(value: Any, field: str, *, whole: bool = False) -> Decimal:
    try:
        number = Decimal(str(value if value not in (None, "") else 0))
    except (InvalidOperation, ValueError):
        raise ValidationError({field: f"{field} must be a number, got {value!r}."}) from None
    if number < 0:
        raise ValidationError({field: f"{field} cannot be negative (got {number})."})
    if whole and number != number.to_integral_value():
        raise ValidationError({field: f"{field} must be a whole number (got {number})."})
    return number


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() in {"1", "true", "on", "yes"}


def _role_gpus(role: Mapping[str, Any], prefix: str, name: str, cpu_only: bool) -> int:
    """GPUs per instance: at least 1, unless the role is explicitly CPU-only (then none). Left out: 1
    (0 for a CPU-only role)."""
    raw = role.get("gpus")
    gpus = int(_number(raw if raw not in (None, "") else (0 if cpu_only else 1), f"{prefix}.gpus", whole=True))
    if cpu_only and gpus:
        raise ValidationError({f"{prefix}.gpus": f"Role {name} is CPU-only but asks {gpus} GPU(s): "
                               "set GPUs to 0, or clear CPU-only."})
    if cpu_only and str(role.get("gpu_type") or "").strip():
        raise ValidationError({f"{prefix}.gpu_type": f"Role {name} is CPU-only: it names no GPU model."})
    if not cpu_only and gpus < 1:
        raise ValidationError({f"{prefix}.gpus": f"Role {name} needs at least 1 GPU per instance; "
                               "mark it CPU-only to run it without GPUs."})
    return gpus


def clean_roles(roles: Sequence[Mapping[str, Any]]) -> list[JobRole]:
    """Validate role dicts into unsaved JobRole rows. Field names in errors: roles[i].field."""
    if not roles:
        raise ValidationError({"roles": "A job needs at least one role (e.g. worker × 1)."})
    cleaned: list[JobRole] = []
    seen: set[str] = set()
    for i, role in enumerate(roles):
        prefix = f"roles[{i}]"
        name = str(role.get("name") or "").strip()
        if not NAME_PATTERN.match(name) or len(name) > 32:
            raise ValidationError({f"{prefix}.name": "A role name is 1–32 lowercase letters, digits or dashes."})
        if name in seen:
            raise ValidationError({f"{prefix}.name": f"Role {name} appears twice."})
        seen.add(name)
        count = _number(role.get("pod_count", 1), f"{prefix}.pod_count", whole=True)
        if count < 1:
            raise ValidationError({f"{prefix}.pod_count": f"Role {name} needs at least 1 instance (got {count})."})
        cpu_only = _flag(role.get("cpu_only"))
        cleaned.append(
            JobRole(
                order=i,
                name=name,
                pod_count=int(count),
                gpu_type=str(role.get("gpu_type") or "").strip(),
                gpus=_role_gpus(role, prefix, name, cpu_only),
                cpu_only=cpu_only,
                cpu=_number(role.get("cpu", 0), f"{prefix}.cpu"),
                memory_gib=_number(role.get("memory_gib", 0), f"{prefix}.memory_gib"),
                shared_memory_gib=_number(role.get("shared_memory_gib", 0), f"{prefix}.shared_memory_gib"),
            )
        )
    return cleaned


def check_fits_pool(*, quota: ResourceQuota, roles: Sequence[JobRole]) -> None:
    """Refuse a job its pool could never run, even empty (e.g. 16 GPUs per pod, nodes have 8)."""
    reason = unplaceable_reason(role_pods(roles), engine_nodes_of_pool(quota.resource_type), quota.resource_type)
    if reason:
        raise ValidationError({"roles": reason})


def check_pool(*, quota: ResourceQuota, resource_type: str | None) -> None:
    """DESIGN §2: a job belongs to its quota's pool. Stating it again is allowed; another is an error."""
    if resource_type not in (None, "") and resource_type != quota.resource_type:
        raise ValidationError({"resource_type": f"Quota {quota.name} is in the {quota.resource_type} pool, so the job "
                               f"is too: leave the resource type out, or state {quota.resource_type}."})


def check_fits_quota(*, quota: ResourceQuota, roles: Sequence[JobRole], idle_mode: str) -> None:
    """With idle resources off a job only ever runs In Quota: refuse one larger than its quota's `min`
    (or a `max`) of the quota or any ancestor, even with the quota empty. A job naming no GPU model
    is refused only when no model of the pool would do."""
    if idle_mode != IdleMode.OFF:
        return
    pods = role_pods(roles)
    gpus = sum(pod.gpus for pod in pods)
    named = sorted({pod.gpu_type for pod in pods if pod.gpus and pod.gpu_type})
    nodes = engine_nodes_of_pool(quota.resource_type)
    models: list[str | None] = named or (sorted({n.gpu_type for n in nodes if n.gpus}) if gpus else [None])
    chain = [quota]
    while chain[-1].parent_id is not None:
        chain.append(chain[-1].parent)
    names = {row.pk: row.name for row in chain}
    problems = []
    for model in models or [None]:
        request = vector(gpus, model, sum(p.cpu_m for p in pods), sum(p.memory_mib for p in pods))
        problem = _over_quota(request, chain, names, nodes)
        if problem is None:
            return
        problems.append(problem)
    raise ValidationError({"quota": f"{problems[0]}: with Idle Resources off it can never run. Ask for less, "
                           "or allow idle resources."})


def _over_quota(request: Mapping[str, int], chain: Sequence[ResourceQuota], names: Mapping[int, str],
                nodes: Sequence[Any]) -> str | None:
    for row in chain:
        quota = engine_quota(row, names)
        guaranteed = effective_min(quota, nodes)
        for key, need in request.items():
            if need and need > guaranteed.get(key, 0):
                return (f"the job needs {amount_in_units(key, need)} {unit_name(key)} in all; quota {row.name} "
                        f"guarantees {amount_in_units(key, guaranteed.get(key, 0))}")
            if quota.max is not None and key in quota.max and need > quota.max[key]:
                return (f"the job needs {amount_in_units(key, need)} {unit_name(key)} in all; quota {row.name} "
                        f"has a max of {amount_in_units(key, quota.max[key])}")
    return None


def _check_settings(
    *, name: str, command: str, job_type: str, priority: Any, idle_mode: str,
    environment: Mapping[str, str] | None, max_running_minutes: int | None, max_restarts: int,
    grace_seconds: float | None,
) -> tuple[int, dict[str, str]]:
    """Validate a submission's own settings; returns the priority and environment, cleaned."""
    if not NAME_PATTERN.match(name):
        raise ValidationError(
            {"name": "A job name is 1–100 lowercase letters, digits or dashes, starting and ending with a letter or digit."}
        )
    if not (command or "").strip():
        raise ValidationError({"command": "A job needs a command to run."})
    if job_type not in JobType.values:
        raise ValidationError({"job_type": f"Job type {job_type!r} is unknown: use one of {', '.join(JobType.values)}."})
    try:
        priority = int(priority)
    except (TypeError, ValueError):
        raise ValidationError({"priority": f"Priority must be a whole number from 1 to 9, got {priority!r}."}) from None
    if not 1 <= priority <= 9:
        raise ValidationError({"priority": f"Priority must be from 1 to 9 (got {priority})."})
    if idle_mode not in IdleMode.values:
        raise ValidationError({"idle_mode": f"Idle mode {idle_mode!r} is unknown: use off, acceptable or only."})
    env = dict(environment or {})
    for key, value in env.items():
        if not ENV_NAME_PATTERN.match(str(key)):
            raise ValidationError({"environment": f"{key!r} is not a valid environment variable name."})
        env[key] = str(value)
    if max_running_minutes is not None and int(max_running_minutes) < 1:
        raise ValidationError({"max_running_minutes": "The maximum running time is at least 1 minute (or empty)."})
    if int(max_restarts) < 0:
        raise ValidationError({"max_restarts": f"Max restarts cannot be negative (got {max_restarts})."})
    if grace_seconds is not None:
        try:
            grace = float(grace_seconds)
        except (TypeError, ValueError):
            raise ValidationError({"grace_seconds": f"The grace period is a number of seconds, got {grace_seconds!r}."}) from None
        if not 0 <= grace <= GRACE_SECONDS_MAX:
            raise ValidationError({"grace_seconds": f"The grace period is 0–{GRACE_SECONDS_MAX:,} seconds "
                                   f"(got {grace_seconds}); empty: the cluster default."})
    return priority, env


@transaction.atomic
def job_submit(
    *,
    user: AbstractBaseUser | None,
    workspace: Workspace,
    quota: ResourceQuota,
    name: str,
    command: str,
    roles: Sequence[Mapping[str, Any]],
    job_type: str = JobType.PYTORCH,
    image: str = "",
    environment: Mapping[str, str] | None = None,
    data_mount: str = "",
    code_mount: str = "",
    priority: int = 1,
    idle_mode: str = IdleMode.OFF,
    max_running_minutes: int | None = None,
    fault_tolerance: bool = False,
    max_restarts: int = 3,
    checkpoint_dir: str = "",
    grace_seconds: float | None = None,
    resource_type: str | None = None,
) -> Job:
    if user is not None and not user_can_use_workspace(user=user, workspace=workspace):
        raise ValidationError({"workspace": f"You are not a member of workspace {workspace.name}."})
    if not quota.workspaces.filter(pk=workspace.pk).exists():
        raise ValidationError(
            {"quota": f"Quota {quota.name} is not associated with workspace {workspace.name}; pick one of its quotas."}
        )
    name = (name or "").strip()
    priority, env = _check_settings(
        name=name, command=command, job_type=job_type, priority=priority, idle_mode=idle_mode,
        environment=environment, max_running_minutes=max_running_minutes, max_restarts=max_restarts,
        grace_seconds=grace_seconds,
    )
    check_pool(quota=quota, resource_type=resource_type)
    role_rows = clean_roles(roles)
    check_fits_pool(quota=quota, roles=role_rows)
    check_fits_quota(quota=quota, roles=role_rows, idle_mode=idle_mode)
    # Path rules (scheduler/paths.py): a job's own directories lie in its workspace's data root.
    data_mount = clean_user_path(data_mount, workspace_name=workspace.name, field="data_mount")
    code_mount = clean_user_path(code_mount, workspace_name=workspace.name, field="code_mount")
    checkpoint_dir = clean_user_path(checkpoint_dir, workspace_name=workspace.name, field="checkpoint_dir")

    now = timezone.now()
    job = Job.objects.create(
        name=name,
        workspace=workspace,
        quota=quota,
        owner=user if user is not None and user.is_authenticated else None,
        job_type=job_type,
        image=image,
        command=command,
        environment=env,
        data_mount=data_mount,
        code_mount=code_mount,
        priority=priority,
        idle_mode=idle_mode,
        max_running_minutes=max_running_minutes,
        fault_tolerance=bool(fault_tolerance),
        max_restarts=int(max_restarts),
        checkpoint_dir=checkpoint_dir,
        grace_seconds=float(grace_seconds) if grace_seconds is not None else None,
        status=JobStatus.QUEUING,
        queue_time=now,
    )
    if not job.checkpoint_dir:
        job.checkpoint_dir = str(default_checkpoint_dir(job))
        job.save(update_fields=["checkpoint_dir"])
    for role in role_rows:
        role.job = job
    JobRole.objects.bulk_create(role_rows)
    job_event(job, EventKind.SUBMITTED, f"submitted by {getattr(user, 'username', 'system')} to quota {quota.name}")
    job_event(job, EventKind.QUEUED, "queuing")
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    wake_scheduler_on_commit()
    return job


def job_can_stop(job: Job) -> bool:
    """A user may stop a job that has not finished and is not already stopping. A job that stays
    Preempted (fault tolerance off) is over until restarted: it offers Restart, not Stop."""
    return job.status not in (*FINAL_JOB_STATUSES, JobStatus.STOPPING) and not job.stays_preempted


def job_can_restart(job: Job, *, has_live_pods: bool) -> bool:
    """A finished job, or one that stays Preempted, whose pods have all exited may run again."""
    return (job.status in FINAL_JOB_STATUSES or job.stays_preempted) and not has_live_pods


@transaction.atomic
def job_stop(*, job: Job, user: AbstractBaseUser | None, reason: str = "") -> Job:
    """A user's stop: live pods get SIGTERM and the grace period; a pending job stops at once."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if not job_can_stop(job):
        raise ValidationError({"status": f"Job {job.name} is {job.status}; there is nothing to stop."})
    who = getattr(user, "username", None) or "system"
    job_terminate(job=job, outcome=PodOutcome.STOPPED, reason=reason or f"stopped by {who}")
    return job


@transaction.atomic
def job_restart(*, job: Job, user: AbstractBaseUser | None) -> Job:
    """Run a finished job again, keeping its checkpoint directory (a fresh queue time)."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    if not job_can_restart(job, has_live_pods=job.pods.filter(status__in=LIVE_POD_STATUSES).exists()):
        raise ValidationError({"status": f"Job {job.name} is {job.status}; stop it before restarting."})
    job.status = JobStatus.QUEUING
    job.queue_time = timezone.now()
    job.in_quota = None
    job.finished_at = None
    job.started_at = None
    job.restart_after = None
    job.stop_outcome = ""
    job.waiting_reason = job.waiting_reason_staff = job.waiting_reason_code = ""
    job.save()
    job_event(job, EventKind.QUEUED, f"restarted by {getattr(user, 'username', 'system')}")
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    wake_scheduler_on_commit()
    return job
