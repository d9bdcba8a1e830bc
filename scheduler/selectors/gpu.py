"""A job's GPU utilisation and memory over time (NVML samples from its nodes; empty where there is no NVML)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler.models import GpuSample, Job


@dataclass(frozen=True)
class GpuPoint:
    time: datetime
    pod_id: int
    gpu_index: int
    utilization_percent: float
    memory_used_mib: int
    memory_total_mib: int


def job_gpu_samples(*, job: Job, since: datetime | None = None, limit: int = 5000) -> list[GpuPoint]:
    """The job's newest `limit` samples (all its pods and GPUs), oldest first."""
    rows = GpuSample.objects.filter(job=job)
    if since is not None:
        rows = rows.filter(time__gte=since)
    newest = rows.order_by("-time", "-gpu_index").values_list(
        "time", "pod_id", "gpu_index", "utilization_percent", "memory_used_mib", "memory_total_mib"
    )[:limit]
    return [GpuPoint(*row) for row in reversed(list(newest))]
