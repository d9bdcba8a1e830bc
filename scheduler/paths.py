"""Where a pod's files live on its node: one home for the paths every process derives from a Pod row."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from scheduler.models import Pod


def pod_dir(job_id: int, attempt: int) -> Path:
    return Path(settings.TIDEPOOL_DATA_DIR) / "pods" / f"job-{job_id}" / f"attempt-{attempt}"


def pod_log_path(pod: Pod) -> Path:
    return pod_dir(pod.job_id, pod.attempt) / f"{pod.role}-{pod.index}.log"


def pod_progress_path(pod: Pod) -> Path:
    return pod_dir(pod.job_id, pod.attempt) / f"progress-{pod.rank}.json"
