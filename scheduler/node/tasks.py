"""Celery tasks run by node workers (thin: the work is in the node agent and the services).

Importing this module (the Celery app's `include`) also registers the node worker's signal
handlers and control commands (scheduler/node/worker.py).
"""

from __future__ import annotations

from celery import shared_task

from scheduler.executors.celery import RUN_POD_TASK
from scheduler.node.worker import current_agent


@shared_task(name=RUN_POD_TASK, acks_late=True)
def run_pod(*, pod_id: int, attempt: int) -> str:
    """Start one pod attempt on this node. Returns at once; the agent reports its exit later."""
    return current_agent().start_pod(pod_id=pod_id, attempt=attempt)
