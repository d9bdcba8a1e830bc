"""MASTER_PORT: one per job attempt, free among the jobs running on the same machines.

Rank 0 listens on MASTER_ADDR:MASTER_PORT (torchrun's rendezvous store, `init_process_group`'s
env:// rendezvous). Two jobs whose ranks 0 share a host must not pick the same port, and none may
pick torchrun's default 29500, which a user's own launcher may hold. The port is chosen from
TIDEPOOL_MASTER_PORT_RANGE when the attempt's first pod starts, among the ports no live pod of
another job on the attempt's nodes holds (nodes with the same address are one machine: the demo's
nodes all run on this one), and written on every pod of the attempt, so each of its nodes reads the
same one. The nodes' rows are locked meanwhile, in one order, so two attempts sharing a node pick
one after the other, never the same port.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from scheduler.models import Node, Pod
from scheduler.states import LIVE_POD_STATUSES


class NoFreePort(OSError):
    """Every port of the range is held by a job on one of the attempt's machines."""


def choose_port(low: int, high: int, used: set[int], seed: int) -> int:
    """The first port of [low, high] not in `used`, probing from low + seed % size (so jobs
    spread over the range instead of all trying `low` first). Raises NoFreePort."""
    size = high - low + 1
    for offset in range(size):
        port = low + (seed + offset) % size
        if port not in used:
            return port
    raise NoFreePort(f"all {size} ports of TIDEPOOL_MASTER_PORT_RANGE={low}-{high} are used by jobs on the same nodes")


def attempt_master_port(pod: Pod) -> int:
    """The MASTER_PORT of `pod`'s attempt: the one already chosen, or a free one chosen now."""
    if pod.master_port:
        return pod.master_port
    low, high = settings.TIDEPOOL_MASTER_PORT_RANGE
    with transaction.atomic():
        siblings = Pod.objects.filter(job_id=pod.job_id, attempt=pod.attempt)
        node_ids = set(siblings.exclude(node=None).values_list("node_id", flat=True))
        addresses = set(Node.objects.filter(pk__in=node_ids).exclude(address="").values_list("address", flat=True))
        machines = Node.objects.filter(Q(pk__in=node_ids) | Q(address__in=addresses))
        list(machines.select_for_update().order_by("pk").values_list("pk", flat=True))  # lock, in one order
        chosen = siblings.exclude(master_port=None).values_list("master_port", flat=True).first()
        if chosen is None:  # the first pod of the attempt to start: choose for all of them
            used = set(
                Pod.objects.filter(node__in=machines, status__in=LIVE_POD_STATUSES)
                .exclude(job_id=pod.job_id).exclude(master_port=None)
                .values_list("master_port", flat=True)
            )
            chosen = choose_port(low, high, used, seed=pod.job_id)
            siblings.update(master_port=chosen)
    pod.master_port = chosen
    return chosen
