"""What a preemption costs and how it is told (DESIGN §3: a preemption is not a failure).

- Each preemption is a `JobPreemption` row: written when the job is preempted, completed once its
  pods have exited with the work lost — the steps and GPU time since the attempt's last checkpoint,
  from the attempt's last progress report (the checkpoint helper saves on SIGTERM, so a job that
  saved in its grace period lost nothing).
- Reasons come in two texts: one a member of the job's workspace reads, which names no other job
  (another workspace's job, or the scheduler's internal `name#id` key), and one staff read, with
  job names. Both are rendered from the engine's typed values by `scheduler.engine.reasons`
  (`render`, `preemption_text`); the scheduling service stores them with the reason's code.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.models import Job, JobPreemption


def preemption_record(*, job: Job, kind: str, reason: str, staff_reason: str, now: datetime) -> JobPreemption:
    gpus = job.total_gpus
    ran = max(0.0, (now - job.started_at).total_seconds()) if job.started_at else 0.0
    return JobPreemption.objects.create(
        job=job, attempt=job.attempt, kind=kind, time=now, reason=reason[:500], staff_reason=staff_reason[:500],
        gpus=gpus, ran_gpu_seconds=gpus * ran,
    )


def preemption_settle(*, job: Job, now: datetime) -> JobPreemption | None:
    """The pods of a preempted attempt have exited: measure the work lost since its last checkpoint.

    Steps lost = the last reported step − the last checkpoint's step (both of this attempt's last
    report). GPU time lost = GPUs × (preemption time − the safe point), where the safe point is the
    last checkpoint's time if it was written during this attempt, else the attempt's start; a
    checkpoint saved on SIGTERM makes it 0. Without a progress report of this attempt, steps lost are
    unknown and the whole attempt counts as lost.
    """
    record = JobPreemption.objects.filter(job=job, attempt=job.attempt, settled_at__isnull=True).last()
    if record is None:
        return None
    progress = job.progress if job.progress.get("attempt") == job.attempt else {}
    step = progress.get("step")
    checkpoint_step = progress.get("last_checkpoint_step")
    checkpoint_at = progress.get("last_checkpoint_at")
    start = job.started_at.timestamp() if job.started_at else record.time.timestamp()
    safe_point = max(start, float(checkpoint_at)) if checkpoint_at is not None else start
    record.lost_gpu_seconds = record.gpus * max(0.0, record.time.timestamp() - safe_point)
    if isinstance(step, int):
        record.step = step
        record.checkpoint_step = checkpoint_step if isinstance(checkpoint_step, int) else None
        record.lost_steps = max(0, step - (record.checkpoint_step or 0))
    record.settled_at = now
    record.save()
    return record
