"""Node inventory writes: registration (by node workers or the admin), heartbeats, cordon, drain."""

from __future__ import annotations

import ipaddress
import logging
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduler.models import Node, ResourceType
from scheduler.publish import publish_cluster_change_on_commit
from scheduler.selectors.inventory import inventory_text, node_inventory
from scheduler.services.lifecycle import jobs_restart_for_node
from scheduler.services.quotas import gpu_model_pools

log = logging.getLogger("tidepool.nodes")


def _check_node(node: Node) -> None:
    if node.resource_type not in ResourceType.values:
        raise ValidationError({"resource_type": f"Resource type {node.resource_type!r} is unknown: use general or lingjun."})
    if not node.gpu_type and node.gpu_count:
        raise ValidationError({"gpu_type": f"Node {node.name} has {node.gpu_count} GPUs but no GPU model."})
    for field, value in (("gpu_count", node.gpu_count), ("cpu", node.cpu), ("memory_gib", node.memory_gib)):
        if value is None or Decimal(str(value)) < 0:
            raise ValidationError({field: f"Node {node.name}: {field} cannot be negative (got {value})."})
    if node.pod_subnet:
        _check_pod_subnet(node)
    carriers = gpu_model_pools().get(node.gpu_type, set())
    others = carriers - {node.resource_type}
    if others and node.gpu_type:
        other_nodes = Node.objects.filter(gpu_type=node.gpu_type).exclude(pk=node.pk).exclude(
            resource_type=node.resource_type
        )
        if other_nodes.exists():
            pool = sorted(others)[0]
            raise ValidationError(
                {
                    "gpu_type": f"{node.gpu_type} GPUs are {pool} resources (e.g. node {other_nodes.first().name}); "
                    f"a {node.resource_type} node cannot carry them."
                }
            )


def _check_pod_subnet(node: Node) -> None:
    """A routed pod network needs every node's pod subnet to be its own (docs/runtime.md)."""
    try:
        subnet = ipaddress.ip_network(node.pod_subnet, strict=True)
    except ValueError:
        raise ValidationError({"pod_subnet": f"Node {node.name}: pod subnet {node.pod_subnet!r} is not an IPv4 network "
                                             "such as 10.213.1.0/24 (set TIDEPOOL_POD_SUBNETS on its agent)."}) from None
    if subnet.version != 4 or subnet.prefixlen > 29:
        raise ValidationError({"pod_subnet": f"Node {node.name}: pod subnet {subnet} must be an IPv4 network of /29 "
                                             "or larger."})
    for other, text in Node.objects.exclude(pk=node.pk).exclude(pod_subnet="").values_list("name", "pod_subnet"):
        try:
            overlaps = subnet.overlaps(ipaddress.ip_network(text, strict=False))
        except ValueError:
            continue
        if overlaps:
            raise ValidationError({"pod_subnet": f"Node {node.name}: pod subnet {subnet} overlaps node {other}'s "
                                                 f"({text}): give each node's agent its own TIDEPOOL_POD_SUBNETS."})


@transaction.atomic
def node_register(
    *,
    name: str,
    gpu_type: str,
    gpu_count: int,
    cpu: Any,
    memory_gib: Any,
    resource_type: str = ResourceType.GENERAL,
    address: str = "",
    inventory_source: str = Node.InventorySource.DECLARED,
    gpu_memory_mib: int | None = None,
    driver_version: str = "",
    heartbeat: bool = False,
    pod_runtime: str | None = None,
    pod_image: str | None = None,
    pod_subnet: str | None = None,
) -> Node:
    """Create or update a node's inventory. A re-registering lost node comes back (not cordoned).
    `pod_runtime`, `pod_image`: how its worker runs pods (None: unchanged); `pod_subnet`: its pods'
    addresses in a routed pod network ("" : none; None: unchanged), refused where another node's overlaps. Registering other
    resources than before (GPU model or count, CPU, memory) keeps what it had in
    `previous_inventory`, with `inventory_changed_at`, and logs it (selectors/inventory.py shows it)."""
    node = Node.objects.select_for_update().filter(name=name).first() or Node(name=name)
    before = node_inventory(node) if node.pk is not None else None
    node.gpu_type = gpu_type
    node.gpu_count = int(gpu_count)
    node.cpu = Decimal(str(cpu))
    node.memory_gib = Decimal(str(memory_gib))
    node.resource_type = resource_type
    node.address = address
    node.inventory_source = inventory_source
    node.gpu_memory_mib = gpu_memory_mib
    node.driver_version = driver_version
    if pod_runtime is not None:
        node.pod_runtime = pod_runtime[:32]
    if pod_image is not None:
        node.pod_image = pod_image[:255]
    if pod_subnet is not None:
        node.pod_subnet = pod_subnet
    _check_node(node)
    if before is not None and node_inventory(node) != before:  # e.g. a worker restarted with 2 GPUs, not 8
        node.previous_inventory, node.inventory_changed_at = before, timezone.now()
        log.warning("node %s registered %s, was %s", name, inventory_text(node_inventory(node), before),
                    inventory_text(before, node_inventory(node)))
    if heartbeat:
        node.last_heartbeat = timezone.now()
        node.lost = False
        node.draining = False
        # Cordoned only by the drain an older worker did as it stopped (before adoption): back in service.
        if node.worker_drained:
            node.schedulable = True
            node.worker_drained = False
    node.save()
    publish_cluster_change_on_commit()
    return node


@transaction.atomic
def node_heartbeat(*, name: str) -> Node:
    node = Node.objects.select_for_update().get(name=name)
    node.last_heartbeat = timezone.now()
    changed = node.lost
    node.lost = False
    node.save(update_fields=["last_heartbeat", "lost"])
    if changed:
        publish_cluster_change_on_commit()
    return node


@transaction.atomic
def node_set_schedulable(*, node: Node, schedulable: bool) -> Node:
    """Cordon (False) or uncordon (True): running pods stay, nothing new is placed."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    node.schedulable = schedulable
    node.worker_drained = False  # a person decided: a worker's re-registration keeps it
    if schedulable:
        node.draining = False
    node.save(update_fields=["schedulable", "draining", "worker_drained"])
    publish_cluster_change_on_commit()
    return node


@transaction.atomic
def node_drain(*, node: Node) -> Node:
    """Cordon the node and restart its jobs elsewhere (their pods get SIGTERM and a grace period).

    An explicit action (the Nodes page, `POST /api/v1/nodes/<name>/drain/`, `tidepool drain`): a
    node worker that stops never drains its node, its pods run on for the next one to adopt.
    """
    node = Node.objects.select_for_update().get(pk=node.pk)
    node.worker_drained = False  # a person drained it: the worker's next registration keeps it cordoned
    node.schedulable = False
    node.draining = True
    node.save(update_fields=["schedulable", "draining", "worker_drained"])
    jobs_restart_for_node(node=node, reason=f"node {node.name} drained")
    publish_cluster_change_on_commit()
    return node
