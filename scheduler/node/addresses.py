"""Pod addresses of a routed pod network (docs/runtime.md, "Across hosts: the routed pod network").

Every node of such a cluster has its own pod subnet (Node.pod_subnet, from its agent's
TIDEPOOL_POD_SUBNETS). A pod's address is chosen by the console, in its node's subnet, among those
no live pod of that node holds, for every pod of the attempt at once when the first of them needs
its spec: so every pod knows rank 0's address (MASTER_ADDR) and its peers' (the node firewalls let
exactly those pairs through) before any of them starts, with no report to wait for. The nodes'
rows are locked meanwhile, in one order, as for MASTER_PORT (ports.py). A pod added later (an
elastic growth) gets its address the same way when its spec is first built.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from django.db import transaction

from scheduler.models import Node, Pod
from scheduler.states import LIVE_POD_STATUSES


class NoFreeAddress(OSError):
    """A node's pod subnet has no address left for a new pod."""


@dataclass(frozen=True)
class AttemptAddresses:
    """The routed addresses of one attempt's live pods: pod id -> address, and each node's route."""

    by_pod: dict[int, str]
    routes: dict[str, tuple[str, str]]  # node name -> (its pod subnet, its address)


def pod_hosts(subnet: str) -> Iterator[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a pod may get: all hosts of the subnet but the first, the bridge's gateway."""
    return islice(ipaddress.ip_network(subnet).hosts(), 1, None)


def choose_address(subnet: str, used: set[str]) -> str:
    for address in pod_hosts(subnet):
        if str(address) not in used:
            return str(address)
    raise NoFreeAddress(f"pod subnet {subnet} has no free address left (every one is held by a live pod)")


def routed(pods: list[Pod]) -> bool:
    """Every pod of the attempt is on a node with a pod subnet: the attempt uses the routed network."""
    return bool(pods) and all(pod.node is not None and pod.node.pod_subnet for pod in pods)


def attempt_pod_addresses(pods: list[Pod]) -> AttemptAddresses | None:
    """The addresses of the live pods of one attempt (`pods`: all of its pods, with their nodes),
    chosen now for those that have none. None when some pod's node has no pod subnet (that attempt
    uses the node's own networking). Raises NoFreeAddress when a node's subnet is full."""
    if not routed(pods):
        return None
    live = [pod for pod in pods if pod.status in LIVE_POD_STATUSES]
    if any(pod.address is None for pod in live):
        _assign(live)
    nodes = {pod.node.name: (pod.node.pod_subnet, pod.node.address) for pod in live}
    return AttemptAddresses({pod.pk: pod.address for pod in live}, nodes)


def _assign(live: list[Pod]) -> None:
    node_ids = sorted({pod.node_id for pod in live})
    with transaction.atomic():
        nodes = {n.pk: n for n in Node.objects.select_for_update().filter(pk__in=node_ids).order_by("pk")}
        fresh = {p.pk: p.address for p in Pod.objects.filter(pk__in=[pod.pk for pod in live])}
        for pod in live:
            pod.address = fresh.get(pod.pk)  # a sibling's spec may have chosen them meanwhile
        used: dict[int, set[str]] = {}
        for node_id in node_ids:
            used[node_id] = set(Pod.objects.filter(node_id=node_id, status__in=LIVE_POD_STATUSES)
                                .exclude(address=None).values_list("address", flat=True))
        for pod in sorted(live, key=lambda p: p.rank):
            if pod.address is not None:
                continue
            pod.address = choose_address(nodes[pod.node_id].pod_subnet, used[pod.node_id])
            used[pod.node_id].add(pod.address)
            Pod.objects.filter(pk=pod.pk, address=None).update(address=pod.address)
