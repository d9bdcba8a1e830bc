"""Production executor: each pod goes to its node's queue; terminations go by remote control.

A start is a task on `node.<name>` (one queue per node, consumed by that node's worker). A
termination must not wait behind queued starts, so it is a broadcast control command to the
node's worker (every worker receives it; only the pod's node acts), fenced by attempt there.
"""

from __future__ import annotations

import logging

from scheduler.executors import PodRef
from scheduler.models import Job, Pod

log = logging.getLogger("tidepool.executor")

TERMINATE_COMMAND = "tidepool_terminate_pod"


def node_queue(node_name: str) -> str:
    return f"node.{node_name}"


class CeleryExecutor:
    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None:
        from scheduler.tasks import run_pod

        for _job, pods in launches:
            for pod in pods:
                run_pod.apply_async(kwargs={"pod_id": pod.pk, "attempt": pod.attempt}, queue=node_queue(pod.node.name))

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None:
        from config.celery import app

        for pod_id, attempt, node_name in refs:
            app.control.broadcast(
                TERMINATE_COMMAND,
                arguments={"node": node_name, "pod_id": pod_id, "attempt": attempt, "grace_s": grace_s,
                           "outcome": outcome},
            )
