"""Cluster-wide figures for /metrics, read at scrape time (no user: the scrape is not a person).

Everything here is computed from rows that outlive processes — live pods, nodes, job events — so
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
from django.db.models import Case, Count, F, FloatField, Func, Value, When

from scheduler.models import Job, JobEvent, Node, Pod, ResourceQuota
from scheduler.states import LIVE_POD_STATUSES, PENDING_JOB_STATUSES, EventKind

QUEUE_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


def preemption_cause(reason: str) -> str:
    """A preemption's cause, as a label: reclaim, priority, drain, shutdown or other."""
    text = reason.lower()
    if text.startswith("reclaimed by quota"):
        return "reclaim"
    if "higher-priority" in text:
        return "priority"
    if "drained" in text:
        return "drain"
    if "stopped" in text or "restarted" in text or "shut" in text:
        return "shutdown"
    return "other"


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


HISTORY_KINDS = (
    EventKind.QUEUED, EventKind.ADMITTED, EventKind.PREEMPTED, EventKind.ATTEMPT_FAILED, EventKind.RESTARTING,
)


def job_history() -> JobHistory:
    """Long because: one pass over the events of every job, in time order per job, feeds four figures.

    - queue wait: from a job's latest "queued" to its next "admitted" (a restart counts its own wait);
    - preemptions by cause, and the work each lost: the preemption's time minus the attempt's safe
      point — its last checkpoint when the job still reports it for that attempt, else the admission
      (then an upper bound: docs/metrics.md);
    - restarts by cause: each automatic restart, by what ended the attempt before it.

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
    attempts = 0
    cause = "pod_failed"
    labels = ("", "")
    preempted: list[tuple[int, int, float, float, tuple[str, str, str]]] = []
    rows = events.annotate(
        at=EpochSeconds("time"),
        # Only a cause needs its text: leaving the others' out halves what a scrape transfers.
        why=Case(When(kind__in=(EventKind.PREEMPTED, EventKind.ATTEMPT_FAILED), then=F("reason")), default=Value("")),
    ).values_list("job_id", "kind", "at", "why")
    for row_job, kind, at, reason in _raw(rows):
        if row_job != job_id:
            job_id, queued_at, admitted_at, attempts, cause = row_job, None, None, 0, "pod_failed"
            labels = job_quota.get(job_id, ("", ""))
        if kind == EventKind.QUEUED:
            queued_at = at
        elif kind == EventKind.ADMITTED:
            attempts += 1
            admitted_at = at
            if queued_at is not None:
                wait = admitted_at - queued_at
                history.queue_wait.setdefault(labels, Histogram(QUEUE_WAIT_BUCKETS)).observe(max(0.0, wait))
                queued_at = None
        elif kind == EventKind.PREEMPTED:
            cause = preemption_cause(reason)
            key = (*labels, cause)
            history.preemptions[key] += 1
            if admitted_at is not None:
                preempted.append((job_id, attempts, admitted_at, at, key))
        elif kind == EventKind.ATTEMPT_FAILED:
            cause = failure_cause(reason)
        elif kind == EventKind.RESTARTING:
            history.restarts[(*labels, cause)] += 1
    progress = {
        pk: (attempt, report)
        for pk, attempt, report in Job.objects.filter(pk__in={p[0] for p in preempted}).values_list(
            "pk", "attempt", "progress"
        )
    }
    for pk, attempt, start, end, key in preempted:
        current, report = progress.get(pk, (None, {}))
        safe = _checkpoint_of_attempt(report, attempt, current, start, end)
        history.work_lost[key] += max(0.0, end - safe)
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


def _checkpoint_of_attempt(progress: dict, attempt: int, current: int | None, start: float, end: float) -> float:
    """The attempt's safe point (epoch seconds): its last checkpoint when the job's progress is still
    that attempt's report, else its admission."""
    if not progress or current != attempt or progress.get("attempt") not in (None, attempt):
        return start
    try:
        checkpoint = float(progress.get("last_checkpoint_at"))  # epoch seconds (scheduler/node/runtime/progress.py)
    except (TypeError, ValueError):
        return start
    return checkpoint if start <= checkpoint <= end else start


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
