"""Inventory that disagrees (issue 23): what the Nodes page and the dashboard warn about, with the numbers.

- **A node that registered other resources than before** (a worker restarted declaring 2 GPUs instead
  of 8, a GPU model that changed): "gpu-03 registered 2 × A100, was 8 × A100 at 2026-12-02 01:50 UTC",
  for `RECENT` after the change (services/nodes.py keeps the previous inventory).
- **A pool whose quotas guarantee more than its nodes register**, per GPU model: a root quota
  guarantees its stated `min_gpus`, or its children's guarantees added up where those are more
  (each child the same way, down the tree): "pool general: quotas guarantee 32 A100, nodes register 24".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from scheduler.models import Node, ResourceQuota

RECENT = timedelta(days=7)


def node_inventory(node: Node) -> dict[str, Any]:
    """What a node registers, as stored in `Node.previous_inventory` (numbers as JSON numbers)."""
    return {"gpu_type": node.gpu_type, "gpu_count": int(node.gpu_count), "cpu": float(node.cpu),
            "memory_gib": float(node.memory_gib)}


def inventory_text(inventory: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    """"2 × A100", with CPU and memory when they differ from `other`'s: "8 × A100 · 32 CPU · 256 GiB"."""
    text = f"{inventory['gpu_count']} × {inventory['gpu_type'] or 'no GPU'}"
    if other is not None and (inventory["cpu"], inventory["memory_gib"]) != (other["cpu"], other["memory_gib"]):
        text += f" · {inventory['cpu']:g} CPU · {inventory['memory_gib']:g} GiB"
    return text


@dataclass(frozen=True)
class InventoryWarning:
    kind: str  # "node" (its inventory changed) | "pool" (guarantees above capacity)
    subject: str  # the node's name, or the pool (resource type)
    text: str


def _guarantees(quota: ResourceQuota, children: dict[int | None, list[ResourceQuota]]) -> dict[str, int]:
    """GPUs per model that `quota` promises: its own min, or its children's sum where that is more."""
    below: dict[str, int] = defaultdict(int)
    for child in children.get(quota.pk, []):
        for model, count in _guarantees(child, children).items():
            below[model] += count
    own = {model: int(count) for model, count in (quota.min_gpus or {}).items() if int(count or 0) > 0}
    return {model: max(own.get(model, 0), below.get(model, 0)) for model in set(own) | set(below)}


def pool_guarantee_warnings() -> list[InventoryWarning]:
    quotas = list(ResourceQuota.objects.all())
    children: dict[int | None, list[ResourceQuota]] = defaultdict(list)
    for quota in quotas:
        children[quota.parent_id].append(quota)
    promised: dict[tuple[str, str], int] = defaultdict(int)
    for root in children.get(None, []):
        for model, count in _guarantees(root, children).items():
            promised[(root.resource_type, model)] += count
    capacity: dict[tuple[str, str], int] = defaultdict(int)
    for pool, model, count in Node.objects.values_list("resource_type", "gpu_type", "gpu_count"):
        capacity[(pool, model)] += count
    return [
        InventoryWarning("pool", pool, f"pool {pool}: quotas guarantee {count} {model}, "
                                       f"nodes register {capacity[(pool, model)]}")
        for (pool, model), count in sorted(promised.items()) if count > capacity[(pool, model)]
    ]


def node_change_warnings(*, now: datetime | None = None) -> list[InventoryWarning]:
    since = (now or timezone.now()) - RECENT
    nodes = Node.objects.filter(inventory_changed_at__gte=since, previous_inventory__isnull=False).order_by("name")
    warnings = []
    for node in nodes:
        current, before = node_inventory(node), node.previous_inventory
        when = timezone.localtime(node.inventory_changed_at).strftime("%Y-%m-%d %H:%M %Z")
        warnings.append(InventoryWarning(
            "node", node.name,
            f"{node.name} registered {inventory_text(current, before)}, was {inventory_text(before, current)} at {when}",
        ))
    return warnings


def inventory_warnings(*, now: datetime | None = None) -> list[InventoryWarning]:
    """Everything that disagrees: nodes whose inventory changed lately, then pools promised more than they have."""
    return node_change_warnings(now=now) + pool_guarantee_warnings()
