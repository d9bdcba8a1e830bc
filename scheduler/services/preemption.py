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

import os
import stat
from datetime import datetime

from scheduler.models import Job, JobPreemption
from scheduler.paths import checkpoint_root, default_checkpoint_dir, is_inside, workspace_data_root

# A checkpoint directory is a few files; a tree much larger than this is not walked to the end.
_CHECKPOINT_SCAN_LIMIT = 10_000


def preemption_record(*, job: Job, kind: str, reason: str, staff_reason: str, now: datetime) -> JobPreemption:
    # An elastic job (§2c) holds what its resizes left it, not its maximum.
    return JobPreemption.objects.create(
        job=job, attempt=job.attempt, kind=kind, time=now, reason=reason[:500], staff_reason=staff_reason[:500],
        gpus=job.held_gpus(), ran_gpu_seconds=job.attempt_gpu_seconds(now),
    )


def preemption_settle(*, job: Job, now: datetime) -> JobPreemption | None:
    """The pods of a preempted attempt have exited: measure the work lost since its last checkpoint.

    Steps lost = the last reported step − the last checkpoint's step (both of this attempt's last
    report). GPU time lost = GPUs × (preemption time − the safe point), where the safe point is the
    last checkpoint's time if it was written during this attempt, else the attempt's start; a
    checkpoint saved on SIGTERM makes it 0. Without a checkpoint time in this attempt's report (or
    without a report), the newest file in the job's checkpoint directory gives the checkpoint's time
    (`newest_checkpoint_mtime`); steps lost are unknown without a report. Only with neither does
    the whole attempt count as lost.
    """
    record = JobPreemption.objects.filter(job=job, attempt=job.attempt, settled_at__isnull=True).last()
    if record is None:
        return None
    progress = job.progress if job.progress.get("attempt") == job.attempt else {}
    step = progress.get("step")
    checkpoint_step = progress.get("last_checkpoint_step")
    checkpoint_at = progress.get("last_checkpoint_at")
    start = job.started_at.timestamp() if job.started_at else record.time.timestamp()
    if checkpoint_at is None:
        checkpoint_at = newest_checkpoint_mtime(job)
    safe_point = max(start, float(checkpoint_at)) if checkpoint_at is not None else start
    record.lost_gpu_seconds = record.gpus * max(0.0, record.time.timestamp() - safe_point)
    if isinstance(step, int):
        record.step = step
        record.checkpoint_step = checkpoint_step if isinstance(checkpoint_step, int) else None
        record.lost_steps = max(0, step - (record.checkpoint_step or 0))
    record.settled_at = now
    record.save()
    return record


def newest_checkpoint_mtime(job: Job) -> float | None:
    """When the newest file in the job's checkpoint directory was last written (epoch seconds), or
    None: no such directory here, none of its files readable. For a job that writes checkpoints its
    own way (torch.save, a framework's directory per step) and reports no progress. Hidden files and
    `*.tmp` are a writer's unfinished files (tidepool_ckpt's `.ckpt-*.tmp`), not checkpoints. Only a
    directory inside the roots a job may use is read (the console's view of them; a control plane
    that does not mount the checkpoint storage finds nothing and counts the whole attempt)."""
    directory = job.checkpoint_dir or str(default_checkpoint_dir(job))
    if not (is_inside(directory, checkpoint_root()) or is_inside(directory, workspace_data_root(job.workspace.name))):
        return None
    newest: float | None = None
    seen = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [name for name in dirnames if not name.startswith(".")]
        for name in filenames:
            seen += 1
            if seen > _CHECKPOINT_SCAN_LIMIT:
                return newest
            if name.startswith(".") or name.endswith(".tmp"):
                continue
            try:
                info = os.stat(os.path.join(dirpath, name), follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and (newest is None or info.st_mtime > newest):
                newest = info.st_mtime
    return newest
