"""Production executor: each pod goes to its node's queue; terminations go by remote control.

A start is a task on `node.<name>` (one queue per node, consumed by that node's worker), sent by
name through Celery's current app (config/celery.py, loaded with Django), so the sender never
imports the node side. A termination must not wait behind queued starts, so it is a broadcast
control command to the node's worker (every worker receives it; only the pod's node acts),
fenced by attempt there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from celery import current_app

from scheduler.executors import PodRef

if TYPE_CHECKING:
    from scheduler.models import Job, Pod

log = logging.getLogger("tidepool.executor")

RUN_POD_TASK = "tidepool.run_pod"
TERMINATE_COMMAND = "tidepool_terminate_pod"


def node_queue(node_name: str) -> str:
    return f"node.{node_name}"


class CeleryExecutor:
    """Both messages are hints, sent after commit: a broker that is down must not turn a committed
    write into an error. A failed send is logged and the rest of the batch skipped (each try against
    a dead broker costs about a second); the database already says what should run, so each node
    worker's reconcile (scheduler/node/reconcile.py) catches up on its short period."""

    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None:
        sends = [
            (pod.pk, pod.attempt, pod.node.name) for _job, pods in launches for pod in pods
        ]
        for done, (pod_id, attempt, node_name) in enumerate(sends):
            try:
                current_app.send_task(RUN_POD_TASK, kwargs={"pod_id": pod_id, "attempt": attempt},
                                      queue=node_queue(node_name))
            except Exception:
                log.warning("could not send the start of pod %s (attempt %s) to %s; %d start(s) not sent, "
                            "left to the node's reconcile", pod_id, attempt, node_queue(node_name),
                            len(sends) - done, exc_info=True)
                return

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None:
        for done, (pod_id, attempt, node_name) in enumerate(refs):
            try:
                current_app.control.broadcast(
                    TERMINATE_COMMAND,
                    arguments={"node": node_name, "pod_id": pod_id, "attempt": attempt, "grace_s": grace_s,
                               "outcome": outcome},
                )
            except Exception:
                log.warning("could not signal pod %s (attempt %s) on %s; %d termination(s) not sent, left to "
                            "the node's reconcile", pod_id, attempt, node_name, len(refs) - done, exc_info=True)
                return
