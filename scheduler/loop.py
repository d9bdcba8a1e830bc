"""The live scheduler loop: snapshot from the database → engine → decisions applied in one transaction.

Housekeeping runs first in each cycle (restarts whose backoff passed, lost nodes, maximum
running time, hung jobs), then one engine cycle. Publishing and process signals happen after
commit. Only one loop may run against a database: on PostgreSQL an advisory lock elects the
leader (a standby takes over when the leader's session ends); on SQLite run a single process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Prefetch
from django.utils import timezone

from scheduler.bulk import set_column
from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import Decisions
from scheduler.models import (
    LIVE_POD_STATUSES,
    AllocationSample,
    Job,
    JobEvent,
    JobRole,
    JobStatus,
    Node,
    Pod,
)
from scheduler.publish import publish_cluster_change_on_commit, publish_jobs_changed_on_commit
from scheduler.services.events import job_event
from scheduler.services.lifecycle import (
    job_fail_attempt,
    job_preempt,
    job_terminate,
    node_mark_lost,
    restarts_due,
)
from scheduler.snapshot import SnapshotIndex, build_snapshot
from scheduler.wakeup import local_wakeup

log = logging.getLogger("tidepool.scheduler")

SCHEDULER_LEADER_LOCK = 727_001  # PostgreSQL advisory-lock key of the scheduler leader
SAMPLE_EVERY = timedelta(seconds=60)

SCHEDULABLE_STATUSES = (
    JobStatus.QUEUING,
    JobStatus.ENV_PREPARING,
    JobStatus.RUNNING,
    JobStatus.PREEMPTED,
    JobStatus.STOPPING,
    JobStatus.RESTARTING,
)


@dataclass
class CycleResult:
    admitted: int = 0
    preempted: int = 0
    nominated: int = 0
    promoted: int = 0
    pending: int = 0
    seconds: float = 0.0
    decisions: Decisions | None = None


def housekeeping(now: datetime) -> None:
    with transaction.atomic():
        restarts_due(now=now)
    cutoff = now - timedelta(seconds=settings.TIDEPOOL_NODE_TIMEOUT)
    for node in Node.objects.filter(lost=False, last_heartbeat__lt=cutoff).exclude(inventory_source="demo"):
        node_mark_lost(node=node, reason=f"node {node.name} lost: no heartbeat for {settings.TIDEPOOL_NODE_TIMEOUT:.0f} s")
    with transaction.atomic():
        for job in Job.objects.select_for_update().filter(
            status=JobStatus.RUNNING, max_running_minutes__isnull=False, started_at__isnull=False
        ):
            if job.started_at + timedelta(minutes=job.max_running_minutes) <= now:
                job_terminate(
                    job=job, outcome="stopped", reason=f"maximum running time of {job.max_running_minutes} min reached"
                )
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


def _free_gpu_indices(node_ids: set[int]) -> dict[int, list[int]]:
    used: dict[int, set[int]] = defaultdict(set)
    for node_id, indices in Pod.objects.filter(node_id__in=node_ids, status__in=LIVE_POD_STATUSES).values_list(
        "node_id", "gpu_indices"
    ):
        used[node_id].update(indices or [])
    counts = dict(Node.objects.filter(pk__in=node_ids).values_list("pk", "gpu_count"))
    return {node_id: [i for i in range(counts[node_id]) if i not in used[node_id]] for node_id in node_ids}


def _display(index: SnapshotIndex, key: str) -> str:
    job = index.jobs.get(key)
    return job.name if job else key


def apply_decisions(decisions: Decisions, index: SnapshotIndex, now: datetime) -> list[tuple[Job, list[Pod]]]:
    """Write one cycle's decisions. Returns the admitted jobs and their new pods (launched after commit)."""
    changed: list[Job] = []
    launches: list[tuple[Job, list[Pod]]] = []

    for key, preemption in decisions.preempted.items():
        victim = index.jobs[key]
        job_preempt(
            job=victim,
            reason=f"reclaimed by quota {preemption.by_quota} for job {_display(index, preemption.for_job)}",
        )

    node_ids = {index.nodes[name].pk for a in decisions.admitted.values() for name in a.nodes}
    free_indices = _free_gpu_indices(node_ids) if node_ids else {}
    admitted_jobs: list[Job] = []
    new_pods: list[Pod] = []
    events: list[JobEvent] = []
    for key, admission in decisions.admitted.items():
        job = index.jobs[key]
        job.status = JobStatus.ENV_PREPARING
        job.in_quota = admission.in_quota
        job.gpu_type = admission.gpu_type or ""
        job.attempt += 1
        job.started_at = now
        job.nominated_nodes = None
        job.waiting_reason = ""
        job.queue_position = None
        job.stop_outcome = ""
        pods: list[Pod] = []
        role_counter: dict[str, int] = defaultdict(int)
        for rank, (spec, node_name) in enumerate(zip(index.pods_of[key], admission.nodes, strict=True)):
            node = index.nodes[node_name]
            take = free_indices[node.pk][: spec.gpus]
            del free_indices[node.pk][: spec.gpus]
            pods.append(
                Pod(job=job, role=spec.role, index=role_counter[spec.role], rank=rank, attempt=job.attempt,
                    node=node, gpu_indices=take)
            )
            role_counter[spec.role] += 1
        new_pods.extend(pods)
        where = ", ".join(sorted(set(admission.nodes)))
        how = "In Quota" if admission.in_quota else "Not in Quota (idle resources)"
        events.append(JobEvent(job=job, kind="admitted", reason=f"admitted {how} on {where}"))
        admitted_jobs.append(job)
        launches.append((job, pods))
    if admitted_jobs:
        # Batched: a cycle may admit thousands of jobs. Rows differ only in in_quota, gpu_type and attempt.
        groups: dict[tuple[bool, str], list[int]] = defaultdict(list)
        for job in admitted_jobs:
            groups[(job.in_quota, job.gpu_type)].append(job.pk)
        for (in_quota, gpu_type), ids in groups.items():
            Job.objects.filter(pk__in=ids).update(
                status=JobStatus.ENV_PREPARING, in_quota=in_quota, gpu_type=gpu_type, attempt=F("attempt") + 1,
                started_at=now, nominated_nodes=None, waiting_reason="", queue_position=None, stop_outcome="",
                updated_at=now,
            )
        Pod.objects.bulk_create(new_pods, batch_size=500)
        JobEvent.objects.bulk_create(events, batch_size=500)
        changed.extend(admitted_jobs)

    for key, nodes in decisions.nominated.items():
        job = index.jobs[key]
        why = decisions.reasons.get(key)  # a reason value: its text by str(), its kind by `.code`
        reason = str(why) if why is not None else "waiting for preempted jobs to exit"
        if job.nominated_nodes != list(nodes):
            job_event(job, "nominated", reason)
        if job.nominated_nodes != list(nodes) or job.waiting_reason != reason or job.queue_position is not None:
            job.nominated_nodes = list(nodes)
            job.waiting_reason = reason[:500]
            job.queue_position = None
            job.save(update_fields=["nominated_nodes", "waiting_reason", "queue_position", "updated_at"])
            changed.append(job)

    for key in decisions.promoted:
        job = index.jobs[key]
        job.in_quota = True
        job.save(update_fields=["in_quota", "updated_at"])
        job_event(job, "promoted", f"promoted to In Quota: quota {job.quota.name} has room now")
        changed.append(job)

    # Pending jobs: queue positions shift whenever a job ahead leaves the queue, so they are
    # written in one pass; reasons are shared by many jobs, so one UPDATE per distinct reason.
    positions: list[tuple[int, int]] = []
    by_reason: dict[str, list[int]] = defaultdict(list)
    renominated: list[int] = []
    for position, key in enumerate(decisions.pending, start=1):
        job = index.jobs[key]
        why = decisions.reasons.get(key)
        reason = str(why)[:500] if why is not None else ""
        touched = False
        if job.queue_position != position:
            positions.append((job.pk, position))
            touched = True
        if job.waiting_reason != reason:
            by_reason[reason].append(job.pk)
            touched = True
        if job.nominated_nodes:  # a withdrawn nomination
            renominated.append(job.pk)
            touched = True
        if touched:
            changed.append(job)
    set_column(Job, "queue_position", positions)
    for reason, ids in by_reason.items():
        Job.objects.filter(pk__in=ids).update(waiting_reason=reason)
    if renominated:
        Job.objects.filter(pk__in=renominated).update(nominated_nodes=None)

    publish_jobs_changed_on_commit([(job.pk, job.workspace_id) for job in changed])
    if decisions.admitted or decisions.preempted or decisions.promoted:
        publish_cluster_change_on_commit()
    return launches


def _record_allocation(now: datetime) -> None:
    last = AllocationSample.objects.order_by("-time").values_list("time", flat=True).first()
    if last is not None and now - last < SAMPLE_EVERY:
        return
    from scheduler.selectors import allocation_by_quota

    AllocationSample.objects.bulk_create(allocation_by_quota(now=now))


def schedule_once(now: datetime | None = None) -> CycleResult:
    """One full cycle. Safe to call from tests and from the loop."""
    from scheduler.executors import get_executor

    now = now or timezone.now()
    started = time.perf_counter()
    housekeeping(now)
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update()
            .filter(status__in=SCHEDULABLE_STATUSES)
            .prefetch_related(Prefetch("roles", queryset=JobRole.objects.order_by("order", "id")))
            .order_by("pk")
        )
        snapshot, index = build_snapshot(jobs, now)
        decisions = run_cycle(snapshot)
        launches = apply_decisions(decisions, index, now)
        if launches:
            transaction.on_commit(lambda: get_executor().launch(launches))
        _record_allocation(now)
    return CycleResult(
        admitted=len(decisions.admitted),
        preempted=len(decisions.preempted),
        nominated=len(decisions.nominated),
        promoted=len(decisions.promoted),
        pending=len(decisions.pending),
        seconds=time.perf_counter() - started,
        decisions=decisions,
    )


class LeaderLock:
    """PostgreSQL session advisory lock on a connection of its own; elsewhere the single process leads.

    Django closes its connections between cycles (CONN_MAX_AGE), which would drop a session
    lock, so the lock lives on a dedicated connection that stays open while this process leads.
    If that connection breaks, leadership is given up and has to be won again.
    """

    def __init__(self) -> None:
        self.held = False
        self._conn = None

    def acquire(self) -> bool:
        if connection.vendor != "postgresql":
            self.held = True
            return True
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connection.Database.connect(**connection.get_connection_params(), autocommit=True)
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", [SCHEDULER_LEADER_LOCK]).fetchone()
            self.held = bool(row[0])
        except Exception:
            log.exception("could not reach PostgreSQL for the leader lock")
            self._drop()
        return self.held

    def still_held(self) -> bool:
        if not self.held or connection.vendor != "postgresql":
            return self.held
        try:
            self._conn.execute("SELECT 1")
        except Exception:
            log.warning("the leader lock's connection broke: leadership lost")
            self._drop()
        return self.held

    def _drop(self) -> None:
        self.held = False
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def release(self) -> None:
        if self.held and self._conn is not None:
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", [SCHEDULER_LEADER_LOCK])
            except Exception:
                pass
        self._drop()


def run_forever(stop: threading.Event, interval: float | None = None) -> None:
    """The loop: wait for leadership, then a cycle every `interval` s or at once when woken."""
    from django.db import close_old_connections

    interval = interval if interval is not None else settings.TIDEPOOL_SCHEDULER_INTERVAL
    lock = LeaderLock()
    listener = _redis_wakeup_listener(stop)
    announced_standby = False
    try:
        while not stop.is_set():
            close_old_connections()
            if not lock.still_held():
                if not lock.acquire():
                    if not announced_standby:
                        log.info("standby: another scheduler holds the leader lock")
                        announced_standby = True
                    stop.wait(interval)
                    continue
                log.info("leader: this process schedules")
                announced_standby = False
            try:
                result = schedule_once()
                if result.admitted or result.preempted or result.promoted or result.nominated:
                    log.info(
                        "cycle: %d admitted, %d preempted, %d nominated, %d promoted, %d pending (%.3f s)",
                        result.admitted, result.preempted, result.nominated, result.promoted, result.pending,
                        result.seconds,
                    )
            except Exception:
                log.exception("scheduling cycle failed; retrying next interval")
                connection.close()
            local_wakeup.wait(interval)
            local_wakeup.clear()
    finally:
        lock.release()
        if listener is not None:
            listener.close()


def _redis_wakeup_listener(stop: threading.Event):
    """Across processes, a submission publishes on Redis; forward it to the local event."""
    if not settings.REDIS_URL:
        return None
    import redis

    from scheduler.wakeup import WAKEUP_CHANNEL

    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(**{WAKEUP_CHANNEL: lambda message: local_wakeup.set()})
    return pubsub.run_in_thread(sleep_time=0.5, daemon=True)


def mark_pods_lost_on_start() -> None:
    """The embedded console (re)starts: pods of its demo nodes that a previous console left are
    killed and failed as 'console process restarted'."""
    from scheduler.executors.orphans import release_orphaned_pods

    for node in Node.objects.filter(inventory_source=Node.InventorySource.DEMO):
        release_orphaned_pods(node=node, reason=f"node {node.name} lost: the console process restarted")
