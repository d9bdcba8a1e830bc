"""Celery tasks run by node workers (thin: the work is in the node agent and the services)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="tidepool.run_pod", acks_late=True)
def run_pod(*, pod_id: int, attempt: int) -> str:
    """Start one pod attempt on this node. Returns at once; the agent reports its exit later."""
    from scheduler.worker import current_agent

    return current_agent().start_pod(pod_id=pod_id, attempt=attempt)
