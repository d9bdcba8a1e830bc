"""Quota tree writes: create, update, delete, with the tree's invariants."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from scheduler.models import Node, ResourceQuota, ResourceType, Workspace
from scheduler.publish import publish_cluster_change_on_commit


def _decimal(value: Any, field: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise ValidationError({field: f"{field} must be a number, got {value!r}."}) from None
    if number < 0:
        raise ValidationError({field: f"{field} cannot be negative (got {number})."})
    return number


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
        try:
            number = int(count)
        except (TypeError, ValueError):
            raise ValidationError({field: f"{field}: {model} must be a whole number of GPUs, got {count!r}."}) from None
        if number != count and str(number) != str(count).strip():
            raise ValidationError({field: f"{field}: {model} must be a whole number of GPUs, got {count!r}."})
        if number < 0:
            raise ValidationError({field: f"{field}: {model} cannot be negative (got {number})."})
        cleaned[model] = number
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


def _resource_label(key: str) -> str:
    return {"cpu": "CPU cores", "memory_gib": "memory GiB"}.get(key, f"{key} GPUs")


def _as_vector(gpus: Mapping[str, int] | None, cpu: Decimal | None, memory: Decimal | None) -> dict[str, Decimal]:
    vector: dict[str, Decimal] = {model: Decimal(count) for model, count in (gpus or {}).items()}
    if cpu is not None:
        vector["cpu"] = cpu
    if memory is not None:
        vector["memory_gib"] = memory
    return vector


def _check_tree(quota: ResourceQuota) -> None:
    """Children's min add up to no more than the parent's; min ≤ max; one resource type per tree."""
    if quota.parent_id is not None:
        parent = quota.parent
        if parent.resource_type != quota.resource_type:
            raise ValidationError(
                {
                    "parent": f"Quota {quota.name} is {quota.resource_type} but its parent {parent.name} is "
                    f"{parent.resource_type}; a quota tree stays in one resource type."
                }
            )
        # Walk up: the parent must not be a descendant of this quota.
        ancestor = parent
        while ancestor is not None:
            if quota.pk is not None and ancestor.pk == quota.pk:
                raise ValidationError({"parent": f"{parent.name} is inside {quota.name}'s subtree: no cycles."})
            ancestor = ancestor.parent
        siblings = ResourceQuota.objects.filter(parent_id=quota.parent_id).exclude(pk=quota.pk)
        _check_children_within(parent, [*siblings, quota], changed=quota)
    if quota.pk is not None:
        children = list(quota.children.all())
        if children:
            _check_children_within(quota, children, changed=None)
            if any(child.resource_type != quota.resource_type for child in children):
                raise ValidationError(
                    {"resource_type": f"Quota {quota.name} has children of another resource type."}
                )
    minimum = _as_vector(quota.min_gpus, quota.min_cpu, quota.min_memory_gib)
    maximum = _as_vector(quota.max_gpus, quota.max_cpu, quota.max_memory_gib) if quota.has_max else {}
    for key, cap in maximum.items():
        if minimum.get(key, Decimal(0)) > cap:
            field = {"cpu": "max_cpu", "memory_gib": "max_memory_gib"}.get(key, "max_gpus")
            raise ValidationError(
                {field: f"Quota {quota.name}: min {minimum[key]} {_resource_label(key)} is above its max {cap}."}
            )


def _check_children_within(
    parent: ResourceQuota, children: list[ResourceQuota], *, changed: ResourceQuota | None
) -> None:
    limit = _as_vector(parent.min_gpus, parent.min_cpu, parent.min_memory_gib)
    total: dict[str, Decimal] = {}
    for child in children:
        for key, amount in _as_vector(child.min_gpus, child.min_cpu, child.min_memory_gib).items():
            total[key] = total.get(key, Decimal(0)) + amount
    for key, amount in sorted(total.items()):
        cap = limit.get(key, Decimal(0))
        if amount > cap:
            field_name = {"cpu": "min_cpu", "memory_gib": "min_memory_gib"}.get(key, "min_gpus")
            subject = f"children of {parent.name}" if changed is None else f"{parent.name}'s children"
            raise ValidationError(
                {
                    field_name: f"The min of {subject} would add up to {amount} {_resource_label(key)}, "
                    f"above {parent.name}'s min of {cap}."
                }
            )


def _apply(quota: ResourceQuota, fields: Mapping[str, Any]) -> None:
    for name in ("name", "description", "resource_type"):
        if name in fields:
            setattr(quota, name, fields[name])
    if "parent" in fields:
        quota.parent = fields["parent"]
    if "min_gpus" in fields:
        quota.min_gpus = _gpus(fields["min_gpus"] or {}, "min_gpus")
    if "min_cpu" in fields:
        quota.min_cpu = _decimal(fields["min_cpu"] or 0, "min_cpu")
    if "min_memory_gib" in fields:
        quota.min_memory_gib = _decimal(fields["min_memory_gib"] or 0, "min_memory_gib")
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
    resource_type: str = ResourceType.GENERAL,
    parent: ResourceQuota | None = None,
    min_gpus: Mapping[str, int] | None = None,
    min_cpu: Any = 0,
    min_memory_gib: Any = 0,
    max_gpus: Mapping[str, int] | None = None,
    max_cpu: Any = None,
    max_memory_gib: Any = None,
    workspaces: Iterable[Workspace] | None = None,
    description: str = "",
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
        },
    )
    _validate(quota)
    quota.save()
    _set_workspaces(quota, workspaces)
    publish_cluster_change_on_commit()
    return quota


@transaction.atomic
def quota_update(
    *, quota: ResourceQuota, workspaces: Iterable[Workspace] | None = None, **fields: Any
) -> ResourceQuota:
    quota = ResourceQuota.objects.select_for_update().get(pk=quota.pk)
    if "resource_type" in fields and fields["resource_type"] != quota.resource_type:
        if quota.jobs.exists() or quota.children.exists():
            raise ValidationError(
                {"resource_type": f"Quota {quota.name} has children or jobs; its resource type cannot change."}
            )
    _apply(quota, fields)
    _validate(quota)
    quota.save()
    _set_workspaces(quota, workspaces)
    publish_cluster_change_on_commit()
    return quota


@transaction.atomic
def quota_delete(*, quota: ResourceQuota) -> None:
    if quota.children.exists():
        raise ValidationError({"parent": f"Quota {quota.name} has child quotas; delete or move them first."})
    if quota.jobs.exists():
        raise ValidationError({"name": f"Quota {quota.name} has jobs; it cannot be deleted."})
    quota.delete()
    publish_cluster_change_on_commit()
