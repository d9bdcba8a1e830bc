"""Housekeeping at the start of each cycle: restarts whose backoff passed, lost nodes, jobs past
their maximum running time, hung jobs. Every write goes through the lifecycle services."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from scheduler.estimates import span_text
from scheduler.models import Job, Node, PoolPolicy
from scheduler.services.idempotency import idempotency_keys_purge
from scheduler.services.lifecycle import job_fail_attempt, job_terminate, node_mark_lost, restarts_due
from scheduler.states import JobStatus, PodOutcome


def housekeeping(now: datetime) -> None:
    with transaction.atomic():
        restarts_due(now=now)
    cutoff = now - timedelta(seconds=settings.TIDEPOOL_NODE_TIMEOUT)
    for node in Node.objects.filter(lost=False, last_heartbeat__lt=cutoff).exclude(inventory_source="demo"):
        node_mark_lost(node=node, reason=f"node {node.name} lost: no heartbeat for {settings.TIDEPOOL_NODE_TIMEOUT:.0f} s")
    with transaction.atomic():
        _stop_past_time_limit(now)
    if settings.TIDEPOOL_HANG_TIMEOUT > 0:
        with transaction.atomic():
            hang = timedelta(seconds=settings.TIDEPOOL_HANG_TIMEOUT)
            for job in Job.objects.select_for_update().filter(status=JobStatus.RUNNING, stop_outcome=""):
                # Only this attempt's reports count: progress is kept across restarts for display.
                last = job.progress.get("updated_at") if job.progress.get("attempt") == job.attempt else None
                last_seen = datetime.fromtimestamp(last, tz=now.tzinfo) if last else job.started_at
                if last_seen and last_seen + hang <= now:
                    job_fail_attempt(
                        job=job, reason=f"no progress reported for {settings.TIDEPOOL_HANG_TIMEOUT:.0f} s: hung"
                    )
    idempotency_keys_purge(now=now)  # keys older than TIDEPOOL_IDEMPOTENCY_KEEP_HOURS


def _stop_past_time_limit(now: datetime) -> None:
    """DESIGN §2d/§3: a running job past its time limit — its maximum running time, else its pool's
    default_time_limit_s — is stopped with "time limit reached"."""
    defaults = {row.resource_type: row.default_time_limit_s
                for row in PoolPolicy.objects.filter(default_time_limit_s__gt=0)}
    running = Job.objects.select_for_update().filter(status=JobStatus.RUNNING, started_at__isnull=False)
    if not defaults:
        running = running.filter(max_running_minutes__isnull=False)
    for job in running.select_related("quota"):
        limit_s = 60.0 * job.max_running_minutes if job.max_running_minutes else defaults.get(job.quota.resource_type)
        if limit_s and job.started_at + timedelta(seconds=limit_s) <= now:
            own = " (the maximum running time)" if job.max_running_minutes else " (the pool's default)"
            job_terminate(job=job, outcome=PodOutcome.STOPPED,
                          reason=f"time limit reached: {span_text(limit_s)}{own}")
