"""Cluster-wide figures for /metrics, read at scrape time (no user: the scrape is not a person).

Everything here is computed from rows that outlive processes — live pods, nodes, job events and
preemptions — so
counters never reset when the console or scheduler restarts, and every console process agrees.
A fixed number of queries whatever the cluster's size (docs/benchmarks.md: 10,000 jobs).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Case, Count, F, FloatField, Func, Sum, Value, When

from scheduler.models import Job, JobEvent, JobPreemption, Node, Pod, ResourceQuota
from scheduler.states import LIVE_POD_STATUSES, PENDING_JOB_STATUSES, EventKind

QUEUE_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


def failure_cause(reason: str) -> str:
    """A failed attempt's cause, as a label: node_lost, hang or pod_failed."""
    text = reason.lower()
    if "lost" in text or "worker restarted" in text:
        return "node_lost"
    if "hung" in text:
        return "hang"
    return "pod_failed"


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, not cumulative; one more for +Inf
    total: float = 0.0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)
        self.counts[bisect_left(self.buckets, value)] += 1  # the first bucket whose bound is ≥ value
        self.total += value


@dataclass
class JobHistory:
    """Counters and the queue-wait histogram per (pool, quota), from every job's event timeline."""

    queue_wait: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    preemptions: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    work_lost: dict[tuple[str, str, str], float] = field(default_factory=lambda: defaultdict(float))
    restarts: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))


HISTORY_KINDS = (EventKind.QUEUED, EventKind.ADMITTED, EventKind.ATTEMPT_FAILED, EventKind.RESTARTING)


def job_history() -> JobHistory:
    """Long because: one pass over the events of every job, in time order per job, feeds the queue-wait
    histogram and the restart counters; preemptions come from their own rows.

    - queue wait: from a job's latest "queued" to its next "admitted" (a restart or a preemption's
      requeue counts its own wait);
    - restarts by cause: each automatic restart after a failure, by what ended the attempt before it
      (a preemption is not a restart: DESIGN §3);
    - preemptions by kind and the GPU time each lost since its attempt's last checkpoint, from
      JobPreemption (measured when the pods have exited).

    The events are read as raw rows (the SQL is Django's): converting 10,000 jobs' timelines to
    model values would cost most of a scrape's budget (docs/benchmarks.md).
    """
    quotas = {pk: (pool, name) for pk, pool, name in ResourceQuota.objects.values_list("pk", "resource_type", "name")}
    job_quota = {pk: quotas.get(quota_id, ("", "")) for pk, quota_id in _raw(Job.objects.values_list("pk", "quota_id"))}
    history = JobHistory()
    events = JobEvent.objects.filter(kind__in=HISTORY_KINDS).order_by("job_id", "time", "id")
    job_id = None
    queued_at: float | None = None
    admitted_at: float | None = None
    cause = "pod_failed"
    labels = ("", "")
    rows = events.annotate(
        at=EpochSeconds("time"),
        # Only a cause needs its text: leaving the others' out halves what a scrape transfers.
        why=Case(When(kind=EventKind.ATTEMPT_FAILED, then=F("reason")), default=Value("")),
    ).values_list("job_id", "kind", "at", "why")
    for row_job, kind, at, reason in _raw(rows):
        if row_job != job_id:
            job_id, queued_at, admitted_at, cause = row_job, None, None, "pod_failed"
            labels = job_quota.get(job_id, ("", ""))
        if kind == EventKind.QUEUED:
            queued_at = at
        elif kind == EventKind.ADMITTED:
            admitted_at = at
            if queued_at is not None:
                wait = admitted_at - queued_at
                history.queue_wait.setdefault(labels, Histogram(QUEUE_WAIT_BUCKETS)).observe(max(0.0, wait))
                queued_at = None
        elif kind == EventKind.ATTEMPT_FAILED:
            cause = failure_cause(reason)
        elif kind == EventKind.RESTARTING:
            history.restarts[(*labels, cause)] += 1
    # Preemptions and the work each lost are recorded once per preemption (JobPreemption, settled when
    # the pods have exited): counted apart from failures (DESIGN §3), by kind.
    rows = JobPreemption.objects.values_list("job__quota__resource_type", "job__quota__name", "kind").annotate(
        n=Count("id"), lost=Sum("lost_gpu_seconds")
    )
    for pool, quota, kind, count, lost in rows:
        history.preemptions[(pool, quota, kind)] += count
        history.work_lost[(pool, quota, kind)] += lost or 0.0
    return history


def _raw(queryset: Any) -> Iterator[tuple]:
    """The rows of a values_list query as the database driver returns them (no field converters)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(5000):
            yield from rows


class EpochSeconds(Func):
    """A timestamp as seconds since the epoch, computed by the database (a float is far cheaper to
    fetch than a datetime: the driver's datetime parsing was most of a scrape)."""

    output_field = FloatField()

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        if connection.vendor == "postgresql":
            return super().as_sql(compiler, connection, template="CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)", **extra)
        if connection.vendor == "sqlite":
            return super().as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)", **extra)
        return super().as_sql(compiler, connection, template="UNIX_TIMESTAMP(%(expressions)s)", **extra)


@dataclass(frozen=True)
class NodeGpus:
    name: str
    pool: str
    gpu_type: str
    total: int
    allocated: int
    unhealthy: int  # GPUs of a lost node
    schedulable: bool

    @property
    def free(self) -> int:
        return 0 if self.unhealthy else max(0, self.total - self.allocated)


def node_gpus() -> list[NodeGpus]:
    held: dict[int, int] = defaultdict(int)
    for node_id, indices in Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__isnull=False).values_list(
        "node_id", "gpu_indices"
    ):
        held[node_id] += len(indices or [])
    return [
        NodeGpus(
            name=name, pool=pool, gpu_type=gpu_type, total=count, allocated=held[pk],
            unhealthy=count if lost else 0, schedulable=schedulable and not draining and not lost,
        )
        for pk, name, pool, gpu_type, count, lost, schedulable, draining in Node.objects.order_by("name").values_list(
            "pk", "name", "resource_type", "gpu_type", "gpu_count", "lost", "schedulable", "draining"
        )
    ]


def pending_jobs_by_quota() -> dict[int, int]:
    """Pending jobs per quota (its own jobs, not its children's)."""
    rows = Job.objects.filter(status__in=PENDING_JOB_STATUSES).values_list("quota_id").annotate(n=Count("id"))
    return dict(rows.order_by())
