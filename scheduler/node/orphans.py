"""Pods left behind by a node process that died (a killed console or node worker).

Pods run in sessions of their own, so they outlive the process that supervised them. When that
process starts again it kills them (a pod nobody supervises could train twice into the same
checkpoint directory, on GPUs the scheduler thinks are free) and records them failed, so their
jobs restart under their fault-tolerance settings.
"""

from __future__ import annotations

import logging
import os
import signal
from datetime import timedelta
from pathlib import Path

from django.db.models import Q
from django.utils import timezone

from scheduler.models import Node, Pod
from scheduler.services.lifecycle import node_mark_lost
from scheduler.states import LIVE_POD_STATUSES

log = logging.getLogger("tidepool.orphans")

# Pods that ended (in the database) this recently may still have a process: e.g. failed as
# "node lost" while their worker was down.
RECENT = timedelta(days=7)


def kill_orphan(pod: Pod) -> bool:
    """SIGKILL the pod's process group if it is still that pod's process.

    The recorded pid is checked against the process's environment (pod id and attempt), so a
    recycled pid is never hit.
    """
    if not pod.pid:
        return False
    try:
        environ = Path(f"/proc/{pod.pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    if f"TIDEPOOL_POD_ID={pod.pk}".encode() not in environ or f"TIDEPOOL_ATTEMPT={pod.attempt}".encode() not in environ:
        return False
    try:
        os.killpg(pod.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    log.warning("killed pod %s attempt %s (process group %s): its supervisor had died", pod.pk, pod.attempt, pod.pid)
    return True


def release_orphaned_pods(*, node: Node, reason: str) -> int:
    """At the start of the process that runs `node`'s pods: kill what the previous one left and fail
    its live pods with `reason`. Returns how many pods were failed."""
    recent = Q(status__in=LIVE_POD_STATUSES) | Q(finished_at__gte=timezone.now() - RECENT)
    for pod in Pod.objects.filter(recent, node=node, pid__isnull=False):
        kill_orphan(pod)
    live = Pod.objects.filter(node=node, status__in=LIVE_POD_STATUSES).count()
    if live:
        node_mark_lost(node=node, reason=reason)
        Node.objects.filter(pk=node.pk).update(lost=False)  # the node itself is back
    return live


def release_demo_node_orphans() -> None:
    """The embedded console (re)starts: pods of its demo nodes that a previous console left are
    killed and failed as 'console process restarted'."""
    for node in Node.objects.filter(inventory_source=Node.InventorySource.DEMO):
        release_orphaned_pods(node=node, reason=f"node {node.name} lost: the console process restarted")
