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
READ_LOG_COMMAND = "tidepool_read_pod_log"


def node_queue(node_name: str) -> str:
    return f"node.{node_name}"


class CeleryExecutor:
    """Both messages are hints: each node worker reconciles its pods with the database on a short
    period (scheduler/node/reconcile.py), so a message that cannot be sent (broker down) is logged
    and dropped, never raised into the caller's after-commit hook. The rest of a batch is skipped
    after the first failure: the broker is down for them too."""

    def launch(self, launches: list[tuple[Job, list[Pod]]]) -> None:
        pods = [pod for _job, job_pods in launches for pod in job_pods]
        for sent, pod in enumerate(pods):
            try:
                current_app.send_task(RUN_POD_TASK, kwargs={"pod_id": pod.pk, "attempt": pod.attempt},
                                      queue=node_queue(pod.node.name))
            except Exception as error:
                log.warning("could not send %d pod start(s) (%s): the nodes' reconcile will start them",
                            len(pods) - sent, error)
                return

    def terminate(self, refs: list[PodRef], *, grace_s: float, outcome: str) -> None:
        for sent, (pod_id, attempt, node_name) in enumerate(refs):
            try:
                current_app.control.broadcast(
                    TERMINATE_COMMAND,
                    arguments={"node": node_name, "pod_id": pod_id, "attempt": attempt, "grace_s": grace_s,
                               "outcome": outcome},
                )
            except Exception as error:
                log.warning("could not send %d termination(s) (%s): the nodes' reconcile will signal them",
                            len(refs) - sent, error)
                return
