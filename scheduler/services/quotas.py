"""Quota tree writes: create, update, delete, with the tree's invariants."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from scheduler import validation
from scheduler.engine.quota import TreeViolation, tree_violations
from scheduler.engine.types import CPU, GPU_PREFIX, MEMORY
from scheduler.engine_rows import engine_nodes_of_pool, engine_quota
from scheduler.models import Node, ResourceQuota, ResourceType, Workspace
from scheduler.publish import publish_cluster_change_on_commit, wake_scheduler_on_commit

_AMOUNT_BOUNDS = {
    "min_cpu": validation.MAX_QUOTA_CPU,
    "max_cpu": validation.MAX_QUOTA_CPU,
    "min_memory_gib": validation.MAX_QUOTA_MEMORY_GIB,
    "max_memory_gib": validation.MAX_QUOTA_MEMORY_GIB,
}


def _decimal(value: Any, field: str) -> Decimal:
    return validation.amount(value, field, high=_AMOUNT_BOUNDS[field])


def _gpus(value: Mapping[str, Any] | None, field: str) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError({field: f"{field} must map GPU models to counts, e.g. {{'A100': 8}}."})
    cleaned: dict[str, int] = {}
    for model, count in value.items():
        model = str(model).strip()
        if not model:
            raise ValidationError({field: f"{field} has an empty GPU model name."})
        problem = validation.gpu_model_problem(model)
        if problem:
            raise ValidationError({field: problem})
        cleaned[model] = validation.whole_number(
            count, field, low=0, high=validation.MAX_QUOTA_GPUS, label=f"{field}: {model}"
        )
    return cleaned


def gpu_model_pools() -> dict[str, set[str]]:
    """Which resource types carry each GPU model, from the registered nodes."""
    pools: dict[str, set[str]] = {}
    for model, pool in Node.objects.values_list("gpu_type", "resource_type").distinct():
        pools.setdefault(model, set()).add(pool)
    return pools


def check_gpu_models_in_pool(models: Iterable[str], resource_type: str, field: str) -> None:
    """Lingjun GPUs stay in Lingjun quotas and nodes, general GPUs in general ones."""
    pools = gpu_model_pools()
    for model in models:
        carriers = pools.get(model, set())
        if carriers and resource_type not in carriers:
            other = sorted(carriers)[0]
            raise ValidationError(
                {
                    field: f"{model} GPUs are {other} resources; a {resource_type} quota cannot hold them "
                    f"(use a {other} quota, or a GPU model of the {resource_type} pool)."
                }
            )


def _check_tree(quota: ResourceQuota) -> None:
    """One resource type per tree and no cycle (said here in the form's words), then the engine's own
    tree rules (scheduler/engine/quota.py: children's min within the parent's — a root stating no
    min is guaranteed its pool's capacity — and min ≤ max), so the services and the scheduler can
    never disagree about which trees are valid."""
    if quota.parent_id is not None:
        parent = quota.parent
        if parent.resource_type != quota.resource_type:
            raise ValidationError(
                {
                    "resource_type": f"Quota {quota.name} is stated {quota.resource_type} but its parent "
                    f"{parent.name} is {parent.resource_type}: a child quota belongs to its parent's pool "
                    "(leave the resource type empty to inherit it)."
                }
            )
        # Walk up: the parent must not be a descendant of this quota.
        ancestor = parent
        while ancestor is not None:
            if quota.pk is not None and ancestor.pk == quota.pk:
                raise ValidationError({"parent": f"{parent.name} is inside {quota.name}'s subtree: no cycles."})
            ancestor = ancestor.parent
    if quota.pk is not None and quota.children.exclude(resource_type=quota.resource_type).exists():
        raise ValidationError({"resource_type": f"Quota {quota.name} has children of another resource type."})
    # GPUs first: a CPU or memory share derived from the GPUs is not what the person typed.
    for violation in sorted(_engine_violations(quota), key=lambda v: not v.key.startswith(GPU_PREFIX)):
        raise ValidationError(_as_field_error(violation, quota))


def _engine_violations(quota: ResourceQuota) -> list[TreeViolation]:
    """The engine's verdict on the pool's tree with `quota` as it would be saved: only the rules this
    change can break (the quota's own min/max, its parent's children, its own children)."""
    others = list(ResourceQuota.objects.filter(resource_type=quota.resource_type).exclude(pk=quota.pk))
    names = {row.pk: row.name for row in others}
    if quota.pk is not None:
        names[quota.pk] = quota.name
    tree = [engine_quota(row, names) for row in [*others, quota]]
    parent_name = names.get(quota.parent_id) if quota.parent_id else None
    return [
        v for v in tree_violations(tree, engine_nodes_of_pool(quota.resource_type))
        if (v.rule == "min_over_max" and v.quota == quota.name)
        or (v.rule == "children_over_parent" and v.other in (quota.name, parent_name))
    ]


_MIN_FIELDS = {CPU: "min_cpu", MEMORY: "min_memory_gib"}
_MAX_FIELDS = {CPU: "max_cpu", MEMORY: "max_memory_gib"}


def _amount(key: str, amount: int) -> str:
    """An engine amount in the form's units: GPUs, CPU cores, GiB."""
    if key == CPU:
        return format((Decimal(amount) / 1000).normalize(), "f")
    if key == MEMORY:
        return format((Decimal(amount) / 1024).normalize(), "f")
    return str(amount)


def _label(key: str) -> str:
    return {CPU: "CPU cores", MEMORY: "memory GiB"}.get(key, f"{key.removeprefix(GPU_PREFIX)} GPUs")


def _as_field_error(v: TreeViolation, quota: ResourceQuota) -> dict[str, str]:
    if v.rule == "min_over_max":
        return {_MAX_FIELDS.get(v.key, "max_gpus"): f"Quota {quota.name}: min {_amount(v.key, v.amount)} "
                f"{_label(v.key)} is above its max {_amount(v.key, v.limit)}."}
    subject = f"children of {v.other}" if v.other == quota.name else f"{v.other}'s children"
    return {_MIN_FIELDS.get(v.key, "min_gpus"): f"The min of {subject} would add up to {_amount(v.key, v.amount)} "
            f"{_label(v.key)}, above {v.other}'s min of {_amount(v.key, v.limit)}."}


def pool_share_per_gpu(pool: str) -> tuple[Decimal, Decimal]:
    """The pool's CPU cores and memory GiB per GPU (all its nodes): what a quota's `min` gets per
    guaranteed GPU when it names no CPU or memory. (0, 0) for a pool without GPUs."""
    gpus, cpu, memory = 0, Decimal(0), Decimal(0)
    for count, cores, gib in Node.objects.filter(resource_type=pool).values_list("gpu_count", "cpu", "memory_gib"):
        gpus, cpu, memory = gpus + count, cpu + cores, memory + gib
    if not gpus:
        return Decimal(0), Decimal(0)
    step = Decimal("0.001")
    return (cpu / gpus).quantize(step), (memory / gpus).quantize(step)


def _apply_min_shares(quota: ResourceQuota, fields: Mapping[str, Any]) -> None:
    """`min` names CPU and memory, or gets them in proportion to its GPUs (None: in proportion)."""
    proportional = [name for name in ("min_cpu", "min_memory_gib") if name in fields and fields[name] is None]
    if not proportional:
        return
    cpu_per_gpu, memory_per_gpu = pool_share_per_gpu(quota.resource_type)
    gpus = quota.min_gpu_total
    if "min_cpu" in proportional:
        quota.min_cpu = cpu_per_gpu * gpus
    if "min_memory_gib" in proportional:
        quota.min_memory_gib = memory_per_gpu * gpus


def _inherit_pool(quota: ResourceQuota, fields: Mapping[str, Any]) -> None:
    """DESIGN §2: a child quota belongs to its parent's pool; a quota that states none is its parent's
    (a root: general). A different one stated is refused by `_check_tree`."""
    if fields.get("resource_type") in (None, ""):
        parent = fields.get("parent", quota.parent if quota.parent_id else None)
        if parent is not None:
            quota.resource_type = parent.resource_type
        elif not quota.resource_type:
            quota.resource_type = ResourceType.GENERAL


def _apply(quota: ResourceQuota, fields: Mapping[str, Any]) -> None:
    for name in ("name", "description", "resource_type"):
        if name in fields and fields[name] not in (None, ""):
            setattr(quota, name, fields[name])
    if "parent" in fields:
        quota.parent = fields["parent"]
    if fields.get("preempt_within") is not None:
        quota.preempt_within = bool(fields["preempt_within"])
    _inherit_pool(quota, fields)
    if "min_gpus" in fields:
        quota.min_gpus = _gpus(fields["min_gpus"] or {}, "min_gpus")
    if fields.get("min_cpu") is not None:
        quota.min_cpu = _decimal(fields["min_cpu"] or 0, "min_cpu")
    if fields.get("min_memory_gib") is not None:
        quota.min_memory_gib = _decimal(fields["min_memory_gib"] or 0, "min_memory_gib")
    _apply_min_shares(quota, fields)
    if "max_gpus" in fields:
        quota.max_gpus = _gpus(fields["max_gpus"], "max_gpus")
    if "max_cpu" in fields:
        quota.max_cpu = None if fields["max_cpu"] in (None, "") else _decimal(fields["max_cpu"], "max_cpu")
    if "max_memory_gib" in fields:
        value = fields["max_memory_gib"]
        quota.max_memory_gib = None if value in (None, "") else _decimal(value, "max_memory_gib")


def _validate(quota: ResourceQuota) -> None:
    if quota.resource_type not in ResourceType.values:
        raise ValidationError(
            {"resource_type": f"Resource type {quota.resource_type!r} is unknown: use general or lingjun."}
        )
    if not quota.name:
        raise ValidationError({"name": "A quota needs a name."})
    validation.check_name(quota.name, "name", "quota")
    validation.check_text(quota.description or "", "description", 200)
    clash = ResourceQuota.objects.filter(name=quota.name).exclude(pk=quota.pk)
    if clash.exists():
        raise ValidationError({"name": f"A quota named {quota.name} exists already."})
    models = set(quota.min_gpus or {}) | set(quota.max_gpus or {})
    check_gpu_models_in_pool(models, quota.resource_type, "min_gpus")
    _check_tree(quota)


def _set_workspaces(quota: ResourceQuota, workspaces: Iterable[Workspace] | None) -> None:
    if workspaces is not None:
        quota.workspaces.set(list(workspaces))


@transaction.atomic
def quota_create(
    *,
    name: str,
    resource_type: str | None = None,
    parent: ResourceQuota | None = None,
    min_gpus: Mapping[str, int] | None = None,
    min_cpu: Any = None,
    min_memory_gib: Any = None,
    max_gpus: Mapping[str, int] | None = None,
    max_cpu: Any = None,
    max_memory_gib: Any = None,
    workspaces: Iterable[Workspace] | None = None,
    description: str = "",
    preempt_within: bool = False,
) -> ResourceQuota:
    quota = ResourceQuota()
    _apply(
        quota,
        {
            "name": name,
            "resource_type": resource_type,
            "parent": parent,
            "description": description,
            "min_gpus": min_gpus,
            "min_cpu": min_cpu,
            "min_memory_gib": min_memory_gib,
            "max_gpus": max_gpus,
            "max_cpu": max_cpu,
            "max_memory_gib": max_memory_gib,
            "preempt_within": preempt_within,
        },
    )
    _validate(quota)
    quota.save()
    _set_workspaces(quota, workspaces)
    publish_cluster_change_on_commit()
    wake_scheduler_on_commit()  # a new min, max or preempt_within: the next cycle decides with it
    return quota


@transaction.atomic
def quota_update(
    *, quota: ResourceQuota, workspaces: Iterable[Workspace] | None = None, **fields: Any
) -> ResourceQuota:
    quota = ResourceQuota.objects.select_for_update().get(pk=quota.pk)
    pool = quota.resource_type
    _apply(quota, fields)
    if quota.resource_type != pool and (quota.jobs.exists() or quota.children.exists()):
        raise ValidationError(
            {"resource_type": f"Quota {quota.name} has children or jobs; its resource type cannot change."}
        )
    _validate(quota)
    quota.save()
    _set_workspaces(quota, workspaces)
    publish_cluster_change_on_commit()
    wake_scheduler_on_commit()  # a new min, max or preempt_within: the next cycle decides with it
    return quota


@transaction.atomic
def quota_delete(*, quota: ResourceQuota) -> None:
    if quota.children.exists():
        raise ValidationError({"parent": f"Quota {quota.name} has child quotas; delete or move them first."})
    if quota.jobs.exists():
        raise ValidationError({"name": f"Quota {quota.name} has jobs; it cannot be deleted."})
    quota.delete()
    publish_cluster_change_on_commit()
