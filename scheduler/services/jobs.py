"""Job writes users make: submit, stop, restart."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduler import validation
from scheduler.engine.placement import unplaceable_reason
from scheduler.engine.quota import QuotaTree
from scheduler.engine.resources import amount_in_units, unit_name, vector
from scheduler.engine_rows import engine_nodes_of_pool, engine_quotas_of_pool, role_pods
from scheduler.image_names import image_reference_problem
from scheduler.models import IdleMode, Job, JobRole, JobType, ResourceQuota, Workspace
from scheduler.paths import clean_user_path, default_checkpoint_dir
from scheduler.publish import publish_jobs_changed_on_commit, wake_scheduler_on_commit
from scheduler.selectors import user_can_use_workspace, user_workspaces
from scheduler.services.events import job_event, job_events
from scheduler.services.lifecycle import job_terminate
from scheduler.states import LIVE_POD_STATUSES, EventKind, JobStatus, PodOutcome, can_restart, can_stop


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() in {"1", "true", "on", "yes"}


def _role_gpus(role: Mapping[str, Any], prefix: str, name: str, cpu_only: bool) -> int:
    """GPUs per instance: at least 1, unless the role is explicitly CPU-only (then none). Left out: 1
    (0 for a CPU-only role)."""
    raw = role.get("gpus")
    gpus = validation.whole_number(raw if raw not in (None, "") else (0 if cpu_only else 1), f"{prefix}.gpus",
                                   low=0, high=validation.MAX_GPUS_PER_POD, label="GPUs per instance")
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
    """Validate role dicts into unsaved JobRole rows. Field names in errors: roles[i].field.

    Counts and sizes are bounded before anything is built from them (scheduler.validation), so a
    pod count of 2³¹ is refused at once instead of expanding into 2³¹ pods.
    """
    if not roles:
        raise ValidationError({"roles": "A job needs at least one role (e.g. worker × 1)."})
    if isinstance(roles, Mapping | str) or not isinstance(roles, Sequence):
        raise ValidationError({"roles": "Roles are a list, e.g. [{\"name\": \"worker\", \"pod_count\": 1}]."})
    if len(roles) > validation.MAX_ROLES:
        raise ValidationError({"roles": f"A job has at most {validation.MAX_ROLES} roles (got {len(roles)})."})
    cleaned: list[JobRole] = []
    seen: set[str] = set()
    total_pods = 0
    for i, role in enumerate(roles):
        prefix = f"roles[{i}]"
        if not isinstance(role, Mapping):
            raise ValidationError({prefix: "A role is a mapping of its fields."})
        name = validation.check_name(str(role.get("name") or "").strip(), f"{prefix}.name", "role")
        if name in seen:
            raise ValidationError({f"{prefix}.name": f"Role {name} appears twice."})
        seen.add(name)
        count = validation.whole_number(
            role.get("pod_count", 1), f"{prefix}.pod_count", low=0, high=validation.MAX_PODS_PER_JOB,
            label="The instance count",
        )
        if count < 1:
            raise ValidationError({f"{prefix}.pod_count": f"Role {name} needs at least 1 instance (got {count})."})
        cpu_only = _flag(role.get("cpu_only"))
        total_pods += count
        if total_pods > validation.MAX_PODS_PER_JOB:
            raise ValidationError(
                {f"{prefix}.pod_count": f"A job has at most {validation.MAX_PODS_PER_JOB} instances in all roles."}
            )
        low = role.get("min_pod_count")
        if low not in (None, ""):  # §2c: an elastic role, `pod_count` its maximum
            low = validation.whole_number(low, f"{prefix}.min_pod_count", low=1, high=count,
                                          label="The minimum instance count")
            if any(done.min_pod_count is not None for done in cleaned):
                raise ValidationError({f"{prefix}.min_pod_count": "A job makes at most one role elastic."})
        else:
            low = None
        gpu_type = str(role.get("gpu_type") or "").strip()
        if gpu_type and validation.gpu_model_problem(gpu_type):
            raise ValidationError({f"{prefix}.gpu_type": validation.gpu_model_problem(gpu_type)})
        cleaned.append(
            JobRole(
                order=i,
                name=name,
                pod_count=count,
                min_pod_count=low,
                gpu_type=gpu_type,
                gpus=_role_gpus(role, prefix, name, cpu_only),
                cpu_only=cpu_only,
                cpu=validation.amount(role.get("cpu"), f"{prefix}.cpu", high=validation.MAX_CPU_PER_POD,
                                      label="CPU cores per instance"),
                memory_gib=validation.amount(role.get("memory_gib"), f"{prefix}.memory_gib",
                                             high=validation.MAX_MEMORY_GIB_PER_POD, label="Memory per instance"),
                shared_memory_gib=validation.amount(role.get("shared_memory_gib"), f"{prefix}.shared_memory_gib",
                                                    high=validation.MAX_MEMORY_GIB_PER_POD,
                                                    label="Shared memory per instance"),
            )
        )
    return cleaned


def check_fits_pool(*, quota: ResourceQuota, roles: Sequence[JobRole], nodes: Sequence[Any] | None = None) -> None:
    """Refuse a job its pool could never run, even empty (e.g. 16 GPUs per pod, nodes have 8): the
    cluster's bound on every instance's GPUs, CPU and memory. The roles are bounded first (clean_roles),
    so the pods built here are at most MAX_PODS_PER_JOB. `nodes`: the pool's, if the caller has them.

    The refusal names the role's field that cannot fit (`roles[1].gpus`, `.cpu`, `.memory_gib`,
    `.gpu_type`, `.pod_count`), one per role that cannot, so a form shows it in that role's row;
    only what no single role causes (roles that fit alone but not together, mixed GPU models) is
    keyed `roles`."""
    if nodes is None:
        nodes = engine_nodes_of_pool(quota.resource_type)
    reason = unplaceable_reason(role_pods(roles), nodes, quota.resource_type)
    if not reason:
        return
    errors: dict[str, str] = {}
    for index, role in enumerate(roles):
        found = _role_field_never_fits(role, nodes, quota.resource_type)
        if found is not None:
            errors[f"roles[{index}].{found[0]}"] = found[1]
    raise ValidationError(errors or {"roles": reason})


def _role_field_never_fits(role: JobRole, nodes: Sequence[Any], pool: str) -> tuple[str, str] | None:
    """(field, why) for the first of the role's own asks that no node of the pool could hold: probed
    one resource at a time with the engine's own test, so the field is found without reading the
    reason's text. None when the role alone fits, or when the pool itself fails (no nodes)."""

    def never(pod_count: int = 1, **asks: Any) -> str | None:
        probe = JobRole(name=role.name, pod_count=pod_count, gpu_type=role.gpu_type, gpus=role.gpus,
                        cpu_only=role.cpu_only, cpu=role.cpu, memory_gib=role.memory_gib)
        for name, value in asks.items():
            setattr(probe, name, value)
        return unplaceable_reason(role_pods([probe]), nodes, pool)

    if never(gpu_type="", gpus=0, cpu=0, memory_gib=0):
        return None  # nothing would fit: the pool's problem, not this role's
    probes: list[tuple[str, dict[str, Any]]] = [
        ("gpu_type", {"gpus": 1, "cpu": 0, "memory_gib": 0}) if role.gpu_type else ("", {}),
        ("gpus", {"cpu": 0, "memory_gib": 0}),
        ("cpu", {"memory_gib": 0}),
        ("memory_gib", {}),
    ]
    for field, asks in probes:
        why = never(**asks) if field else None
        if why:
            return field, why
    why = never(pod_count=role.pod_count)
    return ("pod_count", why) if why else None


def check_pool(*, quota: ResourceQuota, resource_type: str | None) -> None:
    """DESIGN §2: a job belongs to its quota's pool. Stating it again is allowed; another is an error."""
    if resource_type not in (None, "") and resource_type != quota.resource_type:
        raise ValidationError({"resource_type": f"Quota {quota.name} is in the {quota.resource_type} pool, so the job "
                               f"is too: leave the resource type out, or state {quota.resource_type}."})


def check_fits_quota(*, quota: ResourceQuota, roles: Sequence[JobRole], idle_mode: str,
                     nodes: Sequence[Any] | None = None) -> None:
    """Refuse a job its quota could never run, even with the pool empty — the engine's own quota fit
    (QuotaTree) on a tree that holds nothing:

    - any idle mode: over a `max` of the quota or an ancestor (`max` caps use in and out of quota);
    - idle resources off (the job only ever runs In Quota): over the `min` of the quota or an
      ancestor, or over what the quota keeps for its own jobs (`ownmin`, DESIGN §2: a guarantee
      given to a child quota is the child's).

    A job naming no GPU model is refused only when no model of the pool would do. `nodes`: the
    pool's, if the caller has them."""
    pods = role_pods(roles)
    gpus = sum(pod.gpus for pod in pods)
    named = sorted({pod.gpu_type for pod in pods if pod.gpus and pod.gpu_type})
    if nodes is None:
        nodes = engine_nodes_of_pool(quota.resource_type)
    models: list[str | None] = named or (sorted({n.gpu_type for n in nodes if n.gpus}) if gpus else [None])
    tree = QuotaTree(engine_quotas_of_pool(quota.resource_type), nodes)
    problems = []
    for model in models or [None]:
        request = vector(gpus, model, sum(p.cpu_m for p in pods), sum(p.memory_mib for p in pods))
        problem = _never_fits(tree, quota, request, idle_mode)
        if problem is None:
            return
        problems.append(problem)
    raise ValidationError({"quota": problems[0]})


def _never_fits(tree: QuotaTree, quota: ResourceQuota, request: Mapping[str, int], idle_mode: str) -> str | None:
    """Why `request` can never run in `quota` (the tree holds nothing), or None when it can."""
    over_max = tree.max_shortfall(quota.name, request)
    if over_max is not None:
        return (f"the job needs {amount_in_units(over_max.key, over_max.need)} {unit_name(over_max.key)} in all; "
                f"quota {over_max.quota} has a max of {amount_in_units(over_max.key, over_max.limit)} (in and out "
                "of quota), so it can never run. Ask for less.")
    if idle_mode != IdleMode.OFF or tree.could_fit(quota.name, request):
        return None
    full = tree.min_shortfall(quota.name, request)  # on an empty tree: the level could_fit refused
    if full is None:
        return None
    key = full.key
    needs = f"the job needs {amount_in_units(key, full.need)} {unit_name(key)} in all"
    if not full.own:
        return (f"{needs}; quota {full.quota} guarantees {amount_in_units(key, full.limit)}: with Idle Resources "
                "off it can never run. Ask for less, or allow idle resources.")
    children = ", ".join(sorted(quota.children.values_list("name", flat=True)))
    if full.limit <= 0:
        kept = (f"quota {full.quota} keeps no {unit_name(key)} for its own jobs: its whole min is its child "
                f"quotas' guarantee ({children}), so its jobs run on idle resources only")
    else:
        kept = (f"{needs}; quota {full.quota} keeps only {amount_in_units(key, full.limit)} {unit_name(key)} "
                f"for its own jobs, beside its child quotas' guarantees ({children})")
    return (f"{kept}. With Idle Resources off it can never run: submit it to a child quota, ask for less, "
            "or allow idle resources (it then borrows, and the child quotas' owners can reclaim it).")


def _check_settings(
    *, name: str, command: str, job_type: str, priority: Any, idle_mode: str,
    environment: Mapping[str, str] | None, max_running_minutes: Any, max_restarts: Any,
    grace_seconds: Any,
) -> dict[str, Any]:
    """Validate a submission's own settings (scheduler.validation's bounds); returns them cleaned."""
    validation.check_name(name, "name", "job")
    command = validation.check_text(command, "command", validation.MAX_COMMAND_CHARS)
    if not command.strip():
        raise ValidationError({"command": "A job needs a command to run."})
    if job_type not in JobType.values:
        raise ValidationError({"job_type": f"Job type {job_type!r} is unknown: use one of {', '.join(JobType.values)}."})
    if idle_mode not in IdleMode.values:
        raise ValidationError({"idle_mode": f"Idle mode {idle_mode!r} is unknown: use off, acceptable or only."})
    minutes = None
    if max_running_minutes not in (None, ""):
        minutes = validation.whole_number(max_running_minutes, "max_running_minutes", low=1,
                                          high=validation.MAX_RUNNING_MINUTES, label="The maximum running time")
    return {
        "priority": validation.whole_number(priority, "priority", low=validation.MIN_PRIORITY,
                                            high=validation.MAX_PRIORITY, label="Priority"),
        "environment": validation.check_environment(environment),
        "max_running_minutes": minutes,
        "max_restarts": validation.whole_number(max_restarts, "max_restarts", low=0,
                                                high=validation.MAX_RESTARTS, label="Max restarts"),
        "grace_seconds": validation.grace_seconds_value(grace_seconds),
    }


@contextmanager
def _collected(found: dict[str, list[ValidationError]]) -> Iterator[None]:
    """Run one check; a refusal is added to `found` (by field) instead of stopping the others."""
    try:
        yield
    except ValidationError as error:
        error.update_error_dict(found)


def check_roles_fit(*, quota: ResourceQuota, roles: Sequence[Mapping[str, Any]], idle_mode: str) -> list[JobRole]:
    """The roles cleaned (clean_roles), then checked against the quota's pool (check_fits_pool: every
    role that cannot fit, at its field) and, if they fit it, the quota (check_fits_quota). Returns the
    unsaved role rows.

    The console's form calls it also when other fields are wrong, so a pod larger than any node
    shows at its role's field beside them."""
    role_rows = clean_roles(roles)
    for i, role in enumerate(role_rows):
        if role.min_pod_count is not None and idle_mode == IdleMode.OFF:
            raise ValidationError({f"roles[{i}].min_pod_count": (
                "An elastic role (instances: min … max) needs Idle Resources acceptable or only: its instances "
                "beyond the minimum always run on idle resources.")})
    nodes = engine_nodes_of_pool(quota.resource_type)
    check_fits_pool(quota=quota, roles=role_rows, nodes=nodes)  # first: a job no node holds needs no quota text
    check_fits_quota(quota=quota, roles=role_rows, idle_mode=idle_mode, nodes=nodes)
    return role_rows


def _check_roles_and_paths(
    found: dict[str, list[ValidationError]], *, workspace: Workspace, quota: ResourceQuota,
    resource_type: str | None, roles: Sequence[Mapping[str, Any]], idle_mode: str, image: str, **paths: str,
) -> tuple[list[JobRole], dict[str, str]]:
    """The submission's pool, roles, image and paths, each checked; refusals are added to `found`.
    Returns the role rows and the cleaned paths (empty where refused)."""
    with _collected(found):
        check_pool(quota=quota, resource_type=resource_type)
    for field, value in {"image": image, **paths}.items():
        with _collected(found):
            validation.check_text(value, field, validation.MAX_PATH_CHARS)
    if image and "image" not in found and (problem := image_reference_problem(image)):
        found["image"] = [ValidationError(problem)]
    role_rows: list[JobRole] = []
    with _collected(found):
        role_rows = check_roles_fit(quota=quota, roles=roles, idle_mode=idle_mode)
    cleaned: dict[str, str] = {}
    if not any(field in found for field in paths):  # the path rules read only text that passed check_text
        with _collected(found):
            cleaned = _clean_paths(workspace, **paths)
    return role_rows, cleaned


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
    _check_access(user=user, workspace=workspace, quota=quota)
    name = (name or "").strip() if isinstance(name, str) else name
    found: dict[str, list[ValidationError]] = {}
    cleaned: dict[str, Any] = {}
    with _collected(found):
        cleaned = _check_settings(
            name=name, command=command, job_type=job_type, priority=priority, idle_mode=idle_mode,
            environment=environment, max_running_minutes=max_running_minutes, max_restarts=max_restarts,
            grace_seconds=grace_seconds,
        )
    # Every independent check runs and all refusals are raised together, so a form shows each
    # error at its field at once (a pod too large for any node beside a bad path, say).
    role_rows, paths = _check_roles_and_paths(
        found, workspace=workspace, quota=quota, resource_type=resource_type, roles=roles, idle_mode=idle_mode,
        image=image, data_mount=data_mount, code_mount=code_mount, checkpoint_dir=checkpoint_dir,
    )
    if found:
        raise ValidationError(found)

    now = timezone.now()
    job = Job(
        name=name,
        workspace=workspace,
        quota=quota,
        owner=user if user is not None and user.is_authenticated else None,
        job_type=job_type,
        image=image,
        command=command,
        environment=cleaned["environment"],
        data_mount=paths["data_mount"],
        code_mount=paths["code_mount"],
        priority=cleaned["priority"],
        idle_mode=idle_mode,
        max_running_minutes=cleaned["max_running_minutes"],
        fault_tolerance=bool(fault_tolerance),
        max_restarts=cleaned["max_restarts"],
        checkpoint_dir=paths["checkpoint_dir"],
        grace_seconds=cleaned["grace_seconds"],
        status=JobStatus.QUEUING,
        queue_time=now,
    )
    if not job.checkpoint_dir:  # keyed by the uid, known before the row is written: one INSERT
        job.checkpoint_dir = str(default_checkpoint_dir(job))
    job.save(force_insert=True)
    for role in role_rows:
        role.job = job
    JobRole.objects.bulk_create(role_rows)
    events = job_events(job, [
        (EventKind.SUBMITTED, f"submitted by {getattr(user, 'username', 'system')} to quota {quota.name}"),
        (EventKind.QUEUED, "queuing"),
    ])
    # What a caller shows next is in hand (selectors.submitted_job_detail): a new job has these roles
    # and events, and no pods or preemptions yet.
    _hold(job, roles=role_rows, pods=[], events=events, preemptions=[])
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    wake_scheduler_on_commit()
    return job


def _hold(job: Job, **related: Sequence[Any]) -> None:
    """Give `job.<name>.all()` these rows without a query, as prefetch_related would (other queries on
    the manager still go to the database)."""
    cache = job.__dict__.setdefault("_prefetched_objects_cache", {})
    for name, rows in related.items():
        queryset = getattr(job, name).get_queryset()
        queryset._result_cache = list(rows)
        queryset._prefetch_done = True
        cache[name] = queryset


def _check_access(*, user: AbstractBaseUser | None, workspace: Workspace, quota: ResourceQuota) -> None:
    """The user may use the workspace and the quota is one of the workspace's: one query when both
    hold (every accepted submission), a second one to say which rule failed."""
    allowed = quota.workspaces.filter(pk=workspace.pk)
    if user is not None:
        allowed = allowed.filter(pk__in=user_workspaces(user=user).values("pk"))
    if allowed.exists():
        return
    if user is not None and not user_can_use_workspace(user=user, workspace=workspace):
        raise ValidationError({"workspace": f"You are not a member of workspace {workspace.name}."})
    raise ValidationError(
        {"quota": f"Quota {quota.name} is not associated with workspace {workspace.name}; pick one of its quotas."}
    )


def _clean_paths(workspace: Workspace, **paths: str) -> dict[str, str]:
    """Path rules (scheduler/paths.py): a job's own directories lie in its workspace's data root."""
    return {field: clean_user_path(value, workspace_name=workspace.name, field=field) for field, value in paths.items()}


def job_can_stop(job: Job) -> bool:
    """A user may stop a job that has not finished and is not already stopping. A job that stays
    Preempted (fault tolerance off) is over until restarted: it offers Restart, not Stop."""
    return can_stop(job.status, job.stop_outcome, finished=job.finished_at is not None)


def job_can_restart(job: Job, *, has_live_pods: bool) -> bool:
    """A finished job, or one that stays Preempted, whose pods have all exited may run again."""
    return can_restart(job.status, job.stop_outcome, finished=job.finished_at is not None) and not has_live_pods


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
    job.move_to(JobStatus.QUEUING)
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
