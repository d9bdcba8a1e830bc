"""Celery tasks run by node workers (thin: the work is in the node agent and the services).

Importing this module (the Celery app's `include`) also registers the node worker's signal
handlers and control commands (scheduler/node/worker.py).
"""

from __future__ import annotations

from celery import shared_task

from scheduler.executors.celery import RUN_POD_TASK
from scheduler.node.worker import current_agent


@shared_task(name=RUN_POD_TASK, acks_late=False)
def run_pod(*, pod_id: int, attempt: int) -> str:
    """A hint to start one pod attempt on this node now. Returns at once; the agent reports its
    exit later. Acknowledged on receipt: a lost one only waits for the node's reconcile."""
    return current_agent().start_pod(pod_id=pod_id, attempt=attempt)
