"""DESIGN §3 transitions that follow from scheduling and from pods: preemption, exits, restarts.

Pod reports are fenced by attempt: a report from an older attempt never changes a newer one.
Signals to processes go out after commit, through the configured executor.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.executors import get_executor
from scheduler.models import Job, JobPreemption, Node, Pod
from scheduler.publish import (
    publish_cluster_change_on_commit,
    publish_jobs_changed_on_commit,
    wake_scheduler_on_commit,
)
from scheduler.services.events import job_event
from scheduler.services.preemption import preemption_record, preemption_settle
from scheduler.states import (
    LIVE_POD_STATUSES,
    POD_STATUS_OF_OUTCOME,
    RESUMES_AUTOMATICALLY,
    EventKind,
    JobStatus,
    PodOutcome,
    PodStatus,
    PreemptedPhase,
    holds_capacity,
    is_started,
    phase_after_preemption,
)

log = logging.getLogger("tidepool.lifecycle")



def grace_seconds(job: Job) -> float:
    return job.grace_seconds if job.grace_seconds is not None else settings.TIDEPOOL_GRACE_SECONDS


def restart_backoff(job: Job) -> timedelta:
    seconds = settings.TIDEPOOL_RESTART_BACKOFF_BASE * (2 ** job.restart_count)
    return timedelta(seconds=min(seconds, settings.TIDEPOOL_RESTART_BACKOFF_CAP))


def can_restart(job: Job) -> bool:
    return job.fault_tolerance and job.restart_count < job.max_restarts


def _live_pods(job: Job) -> list[Pod]:
    return list(job.pods.select_for_update(of=("self",)).filter(status__in=LIVE_POD_STATUSES).select_related("node"))


def signal_pods_on_commit(pods: list[Pod], *, grace_s: float, outcome: str) -> None:
    """Ask the executor to SIGTERM these pods (then SIGKILL after grace_s), once the decision is committed."""
    if not pods:
        return
    refs = [(pod.pk, pod.attempt, pod.node.name if pod.node else "") for pod in pods]
    transaction.on_commit(lambda: get_executor().terminate(refs, grace_s=grace_s, outcome=outcome))


def _request_termination(pods: list[Pod], outcome: str) -> None:
    for pod in pods:
        if not pod.terminate_requested:
            pod.terminate_requested = outcome
            pod.save(update_fields=["terminate_requested"])


def job_preempt(*, job: Job, reason: str, staff_reason: str = "", kind: str = JobPreemption.Kind.RECLAIM,
                code: str = "") -> None:
    """Reclaim, priority preemption, drain or shutdown (DESIGN §3: not a failure): the pods get SIGTERM
    and the grace period; the job is Preempted. `reason` names no other job (members read it);
    `staff_reason` may. Counted in `preemption_count`; `max_restarts` is not touched."""
    pods = _live_pods(job)
    now = timezone.now()
    job.move_to(JobStatus.PREEMPTED)
    job.stop_outcome = PodOutcome.PREEMPTED  # pods exiting; cleared once they have (see _settle)
    job.preemption_count += 1
    job.waiting_reason = reason[:500]
    job.waiting_reason_staff = staff_reason[:500]
    job.waiting_reason_code = code
    job.queue_position = None
    job.nominated_nodes = None
    job.save(update_fields=["status", "stop_outcome", "preemption_count", "waiting_reason", "waiting_reason_staff",
                            "waiting_reason_code",
                            "queue_position", "nominated_nodes", "updated_at"])
    job_event(job, EventKind.PREEMPTED, reason, staff_reason=staff_reason, code=code)
    preemption_record(job=job, kind=kind, reason=reason, staff_reason=staff_reason, now=now)
    _request_termination(pods, PodOutcome.PREEMPTED)
    signal_pods_on_commit(pods, grace_s=grace_seconds(job), outcome=PodOutcome.PREEMPTED)
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    if not pods:
        _settle(job)


def job_terminate(*, job: Job, outcome: str, reason: str) -> None:
    """Stop (a user's stop, maximum running time): Stopping until the pods have exited, then Stopped."""
    pods = _live_pods(job)
    job.nominated_nodes = None
    job.queue_position = None
    job.stop_outcome = outcome
    job.waiting_reason = reason
    job.waiting_reason_staff = job.waiting_reason_code = ""
    if pods:
        job.move_to(JobStatus.STOPPING)
        job_event(job, EventKind.STOPPING, reason)
    else:
        job.move_to(JobStatus.STOPPED)
        job.finished_at = timezone.now()
        job_event(job, EventKind.STOPPED, reason)
    job.save()
    _request_termination(pods, PodOutcome.STOPPED)
    signal_pods_on_commit(pods, grace_s=grace_seconds(job), outcome=PodOutcome.STOPPED)
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    wake_scheduler_on_commit()


def job_fail_attempt(*, job: Job, reason: str) -> None:
    """A pod failed, its node was lost or the job hung: stop the rest, then restart or fail."""
    if job.stop_outcome == PodOutcome.FAILED or not is_started(job.status):
        return
    job.stop_outcome = PodOutcome.FAILED
    job.waiting_reason = reason[:500]
    job.waiting_reason_staff = job.waiting_reason_code = ""
    job.save(update_fields=["stop_outcome", "waiting_reason", "waiting_reason_staff", "waiting_reason_code",
                            "updated_at"])
    job_event(job, EventKind.ATTEMPT_FAILED, reason)
    pods = _live_pods(job)
    _request_termination(pods, PodOutcome.STOPPED)
    signal_pods_on_commit(pods, grace_s=grace_seconds(job), outcome=PodOutcome.STOPPED)
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    _settle(job)


def _settle(job: Job) -> None:
    """Once no pod of the job is live: Succeeded, Stopped, Restarting, Failed, or Preempted — queued
    again at once (fault tolerance on) or staying Preempted (off)."""
    if not holds_capacity(job.status, job.stop_outcome):  # settled already, or never placed
        return
    if job.pods.filter(status__in=LIVE_POD_STATUSES).exists():
        return
    now = timezone.now()
    if is_started(job.status) and job.stop_outcome != PodOutcome.FAILED:
        # Pods a shrink took away (§2c) ended on purpose: the job went on without them.
        unfinished = job.pods.filter(attempt=job.attempt).exclude(status=PodStatus.SUCCEEDED).exclude(
            terminate_requested=PodOutcome.SHRUNK).count()
        if unfinished:
            # Pods ended without finishing and nobody asked the job to stop: a failed attempt.
            job.stop_outcome = PodOutcome.FAILED
            job.waiting_reason = f"{unfinished} pod(s) ended without finishing"
            job.waiting_reason_staff = job.waiting_reason_code = ""
    _close_attempt(job, now)
    if job.status == JobStatus.STOPPING:
        preemption_settle(job=job, now=now)  # stopped while a preemption's pods were exiting
        job.move_to(JobStatus.STOPPED)
        job.finished_at = now
        job_event(job, EventKind.STOPPED, job.waiting_reason or "stopped")
    elif job.status == JobStatus.PREEMPTED:
        _settle_preempted(job, now)
    elif job.stop_outcome == PodOutcome.FAILED:
        _settle_failed(job, now)
    else:
        job.move_to(JobStatus.SUCCEEDED)
        job.finished_at = now
        job.waiting_reason = job.waiting_reason_staff = job.waiting_reason_code = ""
        job_event(job, EventKind.SUCCEEDED, "all pods exited with code 0")
    job.save()
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    publish_cluster_change_on_commit()  # its GPUs are free again
    wake_scheduler_on_commit()


def _close_attempt(job: Job, now: datetime) -> None:
    """The attempt has ended: its run time and GPU time join the job's totals (once per attempt:
    every caller leaves the settling states)."""
    if job.started_at is None:
        return
    seconds = max(0.0, (now - job.started_at).total_seconds())
    job.run_seconds += seconds
    job.gpu_seconds += job.attempt_gpu_seconds(now)  # at the GPUs it held, resize by resize (§2c)


def _settle_preempted(job: Job, now: datetime) -> None:
    """DESIGN §3: back in the queue at once — no backoff, queue time kept, no restart used — and shown
    Preempted until it runs again; with fault tolerance off it stays Preempted until restarted."""
    record = preemption_settle(job=job, now=now)
    lost = ""
    if record is not None and record.lost_steps is not None:
        lost = f"; {record.lost_steps:,} step(s) since the last checkpoint lost"
    job.stop_outcome = ""
    job.nominated_nodes = None
    if phase_after_preemption(fault_tolerance=job.fault_tolerance) is PreemptedPhase.REQUEUED:
        job.in_quota = None
        job.restart_after = None
        job_event(job, EventKind.QUEUED, f"preemption {job.preemption_count:,}: queuing again at once, queue time "
                  f"kept; {RESUMES_AUTOMATICALLY} from its last checkpoint{lost}")
    else:
        job.finished_at = now
        job_event(job, EventKind.NOT_RESTARTED, f"stays Preempted: fault tolerance is off; restart it to resume "
                  f"from its last checkpoint{lost}")


def _settle_failed(job: Job, now: datetime) -> None:
    """A failure: restart after an exponential backoff, using one of `max_restarts`; else Failed."""
    if can_restart(job):
        delay = restart_backoff(job)
        job.move_to(JobStatus.RESTARTING)
        job.restart_after = now + delay
        job_event(
            job,
            EventKind.RESTARTING,
            f"failed: restarting in {delay.total_seconds():.0f} s (restart {job.restart_count + 1:,} of "
            f"{job.max_restarts:,})",
        )
        return
    job.move_to(JobStatus.FAILED)
    job.finished_at = now
    why = "fault tolerance is off" if not job.fault_tolerance else f"all {job.max_restarts:,} restarts used"
    job_event(job, EventKind.FAILED, f"{job.waiting_reason}; not restarted: {why}")


def _lock_job_then_pod(pod_id: int) -> tuple[Job, Pod] | tuple[None, None]:
    """Locks are always taken job first, then its pods (as the loop and the stop service do):
    the opposite order deadlocks against them on PostgreSQL."""
    job_id = Pod.objects.filter(pk=pod_id).values_list("job_id", flat=True).first()
    if job_id is None:
        return None, None
    job = Job.objects.select_for_update().get(pk=job_id)
    pod = Pod.objects.select_for_update().get(pk=pod_id)
    return job, pod


@transaction.atomic
def pod_running(*, pod_id: int, attempt: int, pid: int | None = None) -> bool:
    """A node reports the pod's process started (as process group `pid`). False when stale (fenced)."""
    job, pod = _lock_job_then_pod(pod_id)
    if pod is None or pod.attempt != attempt or pod.status != PodStatus.PENDING:
        return False
    pod.move_to(PodStatus.RUNNING)
    pod.started_at = timezone.now()
    pod.pid = pid
    pod.save(update_fields=["status", "started_at", "pid"])
    if (
        job.status == JobStatus.ENV_PREPARING
        and job.attempt == attempt
        and not job.pods.filter(attempt=attempt, status=PodStatus.PENDING).exists()
    ):
        job.move_to(JobStatus.RUNNING)
        job.save(update_fields=["status", "updated_at"])
        # Only this attempt's report counts: the job's progress may still be the previous attempt's.
        resumed = job.progress.get("resumed_from_step") if job.progress.get("attempt") == attempt else None
        job_event(job, EventKind.RUNNING, "all pods running" + (f"; resumed from step {resumed:,}" if resumed else ""))
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    return True


@transaction.atomic
def pod_exited(*, pod_id: int, attempt: int, exit_code: int | None, outcome: str, reason: str = "") -> bool:
    """A node reports the pod's process is gone. outcome: succeeded | failed | preempted | stopped."""
    job, pod = _lock_job_then_pod(pod_id)
    if pod is None or pod.attempt != attempt or pod.status not in LIVE_POD_STATUSES:
        return False
    if pod.terminate_requested and outcome in (PodOutcome.FAILED, PodOutcome.SUCCEEDED):
        # Exited on our SIGTERM: record what we asked for, keep the exit code.
        outcome = pod.terminate_requested
    pod.move_to(POD_STATUS_OF_OUTCOME[outcome])
    pod.exit_code = exit_code
    pod.reason = reason or (f"exit code {exit_code}" if exit_code is not None else outcome)
    pod.finished_at = timezone.now()
    pod.save(update_fields=["status", "exit_code", "reason", "finished_at"])
    label = f"{pod.role}-{pod.index}"
    if job.stop_outcome == NOT_STARTED:  # the attempt is being requeued: a pod of it never started
        _settle_never_started(job)
        return True
    if outcome == PodOutcome.PREEMPTED and not pod.terminate_requested and job.attempt == attempt and (
        is_started(job.status)
    ):
        # Its node stopped its pods (a worker or console shutting down): a preemption, not a failure.
        where = f"node {pod.node.name}" if pod.node else "its node"
        job_preempt(job=job, reason=f"{where} shut down: pod {label} preempted", kind=JobPreemption.Kind.SHUTDOWN)
    if outcome == PodOutcome.FAILED:
        job_event(job, EventKind.POD_FAILED, f"pod {label} failed: {pod.reason}")
        job_fail_attempt(job=job, reason=f"pod {label} failed: {pod.reason}")
    _settle(job)
    return True


@transaction.atomic
def job_progress(*, job_id: int, attempt: int, progress: dict) -> None:
    """The checkpoint helper's progress report, relayed by the node (step, last checkpoint, resumed from)."""
    job = Job.objects.select_for_update().filter(pk=job_id, attempt=attempt).first()
    if job is None or job.progress == progress:
        return
    first_report = job.progress.get("attempt") != attempt
    job.progress = {**progress, "attempt": attempt}
    job.save(update_fields=["progress", "updated_at"])
    resumed = progress.get("resumed_from_step")
    if first_report and resumed:
        job_event(job, EventKind.RESUMED, f"resumed from step {resumed:,}")
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])


def jobs_restart_for_node(*, node: Node, reason: str) -> None:
    job_ids = set(Pod.objects.filter(node=node, status__in=LIVE_POD_STATUSES).values_list("job_id", flat=True))
    for job in Job.objects.select_for_update().filter(pk__in=job_ids):
        if is_started(job.status):
            job_preempt(job=job, reason=reason, kind=JobPreemption.Kind.DRAIN)


@transaction.atomic
def local_nodes_release(*, reason: str) -> int:
    """The embedded console is stopping: its pods die with it, so their jobs are preempted now
    (SIGTERM and the grace period; with fault tolerance they restart at the next start)."""
    count = 0
    for node in Node.objects.filter(inventory_source=Node.InventorySource.DEMO):
        job_ids = set(Pod.objects.filter(node=node, status__in=LIVE_POD_STATUSES).values_list("job_id", flat=True))
        for job in Job.objects.select_for_update().filter(pk__in=job_ids):
            if is_started(job.status):
                job_preempt(job=job, reason=reason, kind=JobPreemption.Kind.SHUTDOWN)
                count += 1
    return count


@transaction.atomic
def node_mark_lost(*, node: Node, reason: str | None = None) -> None:
    """A node that stopped heartbeating: its pods cannot be signalled, so they fail with 'node lost'."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    if node.lost:
        return
    node.lost = True
    node.save(update_fields=["lost"])
    reason = reason or f"node {node.name} lost"
    # Jobs first (in id order, as the loop locks them), then their pods.
    job_ids = set(Pod.objects.filter(node=node, status__in=LIVE_POD_STATUSES).values_list("job_id", flat=True))
    jobs = {job.pk: job for job in Job.objects.select_for_update().filter(pk__in=job_ids).order_by("pk")}
    pods = list(Pod.objects.select_for_update().filter(node=node, status__in=LIVE_POD_STATUSES))
    now = timezone.now()
    started_jobs = {pod.job_id for pod in pods if pod.status != PodStatus.PENDING}
    for pod in pods:
        never_started = pod.status == PodStatus.PENDING
        pod.move_to(PodStatus.STOPPED if never_started else PodStatus.FAILED)
        pod.reason = f"never started: {reason}" if never_started else reason
        pod.finished_at = now
        pod.save(update_fields=["status", "reason", "finished_at"])
    for job in jobs.values():
        job_event(job, EventKind.NODE_LOST, reason)
        if job.pk not in started_jobs and job_requeue_never_started(job=job, reason=f"{reason} before its pods started"):
            continue
        if is_started(job.status):
            job_fail_attempt(job=job, reason=reason)
        _settle(job)
    publish_cluster_change_on_commit()
    log.warning("%s: %d pod(s) failed", reason, len(pods))


def restarts_due(*, now: datetime) -> int:
    """Restarting jobs (after a failure) whose backoff has passed go back to Queuing with their first queue time."""
    count = 0
    for job in Job.objects.select_for_update().filter(status=JobStatus.RESTARTING, restart_after__lte=now):
        job.move_to(JobStatus.QUEUING)
        job.restart_count += 1
        job.in_quota = None
        job.nominated_nodes = None
        job.stop_outcome = ""
        job.restart_after = None
        job.save()
        job_event(job, EventKind.QUEUED,
                  f"queuing again (restart {job.restart_count:,} of {job.max_restarts:,}); queue time kept")
        publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
        count += 1
    return count


# -- Pods that never started (the node side could not launch them, or their node was lost
# first): never a failure. The attempt's other pods are stopped and the job goes back to the
# queue with its queue time, no restart used, after a short backoff that doubles per consecutive
# start failure (so a node that cannot launch anything is not hammered).

NOT_STARTED = PodOutcome.NOT_STARTED  # Job.stop_outcome while such an attempt is being requeued


def start_failure_backoff(job: Job) -> timedelta:
    seconds = settings.TIDEPOOL_RESTART_BACKOFF_BASE * (2 ** min(job.start_failures, 16))
    return timedelta(seconds=min(seconds, settings.TIDEPOOL_RESTART_BACKOFF_CAP))


@transaction.atomic
def pod_never_started(*, pod_id: int, attempt: int, reason: str) -> bool:
    """A node reports it could not launch this pod: the pod is Stopped, its job requeued."""
    job, pod = _lock_job_then_pod(pod_id)
    if pod is None or pod.attempt != attempt or pod.status != PodStatus.PENDING:
        return False
    pod.move_to(PodStatus.STOPPED)
    pod.reason = f"never started: {reason}"[:300]
    pod.finished_at = timezone.now()
    pod.save(update_fields=["status", "reason", "finished_at"])
    if not job_requeue_never_started(job=job, reason=f"pod {pod.role}-{pod.index} never started: {reason}"):
        _settle(job)  # the job had moved on (stopped, preempted): settle it as usual
    return True


def job_requeue_never_started(*, job: Job, reason: str) -> bool:
    """Requeue the job's current attempt because a pod of it never started. False when the job
    is not running that attempt any more (stopped, preempted, failing: their rules apply)."""
    if not is_started(job.status) or job.stop_outcome not in ("", NOT_STARTED):
        return False
    if job.stop_outcome != NOT_STARTED:
        job.stop_outcome = NOT_STARTED
        job.waiting_reason = reason[:500]
        job.save(update_fields=["stop_outcome", "waiting_reason", "updated_at"])
        job_event(job, EventKind.ATTEMPT_FAILED, f"{reason}: requeued (no restart used)"[:500])
        pods = _live_pods(job)
        _request_termination(pods, PodOutcome.STOPPED)
        signal_pods_on_commit(pods, grace_s=grace_seconds(job), outcome=PodOutcome.STOPPED)
    _settle_never_started(job)
    return True


def _settle_never_started(job: Job) -> None:
    """Once no pod of the attempt is live: Queuing again, same queue time, restart_count unchanged."""
    if job.pods.filter(status__in=LIVE_POD_STATUSES).exists():
        publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
        return
    delay = start_failure_backoff(job)
    job.move_to(JobStatus.QUEUING)
    job.start_failures += 1
    job.restart_after = timezone.now() + delay
    job.in_quota = None
    job.nominated_nodes = None
    job.stop_outcome = ""
    job.save()
    job_event(job, EventKind.QUEUED, f"queuing again in {delay.total_seconds():.0f} s; queue time kept, no restart used")
    publish_jobs_changed_on_commit([(job.pk, job.workspace_id)])
    publish_cluster_change_on_commit()
    wake_scheduler_on_commit()
