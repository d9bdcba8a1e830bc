"""Pods left behind by the previous process that ran a node (a node agent stopped or killed, a console).

Pods run in sessions (host) or containers of their own, so they outlive the process that
supervised them, and each pod's shell writes its exit status to an exit file when its command
ends (runtime/sandbox.py). The next process that runs the node, once it holds the node's lease
(services/leases.py: so a second live process never gets here), settles every pod the database
calls live there, or that ended there lately:

| what it finds | what it does |
|---|---|
| a running pod (host process group, cgroups or container), and an agent to take it | **adopts** it (runtime/adoption.py): nothing is killed, the attempt goes on, its exit is reported when it comes; the reconcile stops it (SIGTERM, grace) if its job no longer wants it |
| an exited container | adopts it too: its exit code (and OOM) is read back from Podman and reported |
| a running pod the database already ended (e.g. failed "node lost" meanwhile) | adopts it and stops it at once with the job's grace period (its exit report is refused: fenced) |
| an exit file | the exit it holds: 0 → Succeeded, else Failed (or the outcome asked for, if a stop or preemption was) |
| a live process and no agent to take it (the embedded console's demo nodes) | kills the group (SIGKILL) and fails the pod with `reason`: two copies must never train at once |
| nothing, pod Running | Failed: the process is gone without an exit status |
| nothing, pod Pending | nothing: it never started; the reconcile starts it |
"""

from __future__ import annotations

import logging
import os
import signal
import time
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from scheduler.models import Node, Pod
from scheduler.node.agent import PodAgent
from scheduler.node.runtime.process import live_group_members
from scheduler.node.runtime.sandbox import find_pod_processes, read_exit_file
from scheduler.node.specs import master_address
from scheduler.paths import pod_exit_path
from scheduler.services.leases import EMBEDDED_CONSOLE, lease_held
from scheduler.services.lifecycle import grace_seconds, pod_exited
from scheduler.states import LIVE_POD_STATUSES, PodOutcome, PodStatus

log = logging.getLogger("tidepool.orphans")

# Pods that ended (in the database) this recently may still have a process.
RECENT = timedelta(days=7)
KILL_WAIT_S = 10.0


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group and wait (bounded) until nothing of it is left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + KILL_WAIT_S
    while live_group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def exit_from_file(pod: Pod) -> tuple[int, str] | None:
    code = read_exit_file(str(pod_exit_path(pod)))
    if code is None:
        return None
    return code, PodOutcome.SUCCEEDED if code == 0 else PodOutcome.FAILED


def _adopt(agent: PodAgent, pod: Pod) -> bool:
    siblings = list(Pod.objects.select_related("node").filter(job_id=pod.job_id, attempt=pod.attempt))
    if not agent.adopt(pod.job, pod, world_size=len(siblings), master_addr=master_address(siblings)):
        return False
    if pod.status not in LIVE_POD_STATUSES:
        log.warning("node %s: pod %s attempt %s runs but the database ended it: stopping it", pod.node.name,
                    pod.pk, pod.attempt)
        agent.terminate(pod.pk, pod.attempt, grace_s=grace_seconds(pod.job), outcome=PodOutcome.STOPPED)
    return True


def release_orphaned_pods(*, node: Node, reason: str, owner: str, role: str,
                          agent: PodAgent | None = None) -> dict[str, int]:
    """At the start of the process that runs `node`'s pods, holding lease `role` as `owner`:
    settle what the previous one left (table above); `agent` adopts the pods still there.
    Returns counts per case.

    Refuses (ValueError) without the lease: only the node's one live process may kill its pods.
    """
    if not lease_held(role=role, owner=owner):
        raise ValueError(f"lease {role} is not held by {owner}: another process runs node {node.name}")
    recent = Q(status__in=LIVE_POD_STATUSES) | Q(finished_at__gte=timezone.now() - RECENT)
    pods = list(Pod.objects.filter(recent, node=node).select_related("job", "job__workspace", "node"))
    counts = {"adopted": 0, "exit_file": 0, "killed": 0, "gone": 0, "never_started": 0}
    if agent is not None:
        adopted = [pod for pod in pods if _adopt(agent, pod)]
        counts["adopted"] = len(adopted)
        pods = [pod for pod in pods if pod not in adopted]
    alive = find_pod_processes({(pod.pk, pod.attempt): str(pod.job.uid) for pod in pods})
    for pod in pods:
        pgid = alive.get((pod.pk, pod.attempt))
        if pgid is not None:
            log.warning("node %s: killing pod %s attempt %s (process group %s): its supervisor died",
                        node.name, pod.pk, pod.attempt, pgid)
            kill_group(pgid)
        if pod.status not in LIVE_POD_STATUSES:
            continue
        exited = exit_from_file(pod)
        if exited is not None:
            code, outcome = exited
            pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=code, outcome=outcome,
                       reason=f"exit code {code} (read back from its exit file: {reason})")
            counts["exit_file"] += 1
        elif pgid is not None:
            pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=None, outcome=PodOutcome.FAILED, reason=reason)
            counts["killed"] += 1
        elif pod.status == PodStatus.RUNNING:
            pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=None, outcome=PodOutcome.FAILED,
                       reason=f"{reason}: the pod's process was gone without an exit status")
            counts["gone"] += 1
        else:
            counts["never_started"] += 1
    return counts


def release_demo_node_orphans(*, owner: str) -> dict[str, int]:
    """The embedded console (re)starts, holding the console lease: settle the pods a previous
    console left on the demo nodes."""
    total: dict[str, int] = {}
    for node in Node.objects.filter(inventory_source=Node.InventorySource.DEMO):
        counts = release_orphaned_pods(node=node, reason="the console process restarted", owner=owner,
                                       role=EMBEDDED_CONSOLE)
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
    return total
