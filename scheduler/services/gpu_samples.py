"""GPU samples a node worker read with NVML for the pods it runs (scheduler.node.runtime.gpus.sample_gpus)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from scheduler.models import GpuSample, Pod
from scheduler.states import LIVE_POD_STATUSES

KEEP = timedelta(days=7)  # older samples are dropped as new ones arrive


def gpu_samples_record(*, node_name: str, readings: Iterable[Mapping], now: datetime | None = None) -> int:
    """Store one round of readings ({"index", "utilization_percent", "memory_used_mib",
    "memory_total_mib"}) against the live pods of `node_name` holding those GPU indices.

    At most one round per TIDEPOOL_GPU_SAMPLE_SECONDS per node (the worker offers one per heartbeat):
    8 GPUs sampled every minute for a week is ~80,000 rows per node.
    """
    now = now or timezone.now()
    by_index = {int(reading["index"]): reading for reading in readings}
    if not by_index:
        return 0
    interval = timedelta(seconds=settings.TIDEPOOL_GPU_SAMPLE_SECONDS)
    if interval and GpuSample.objects.filter(pod__node__name=node_name, time__gt=now - interval).exists():
        return 0
    rows = []
    pods = Pod.objects.filter(node__name=node_name, status__in=LIVE_POD_STATUSES).values_list(
        "pk", "job_id", "gpu_indices"
    )
    for pod_id, job_id, indices in pods:
        for index in indices or []:
            reading = by_index.get(int(index))
            if reading is None:
                continue
            rows.append(
                GpuSample(
                    job_id=job_id, pod_id=pod_id, time=now, gpu_index=index,
                    utilization_percent=float(reading["utilization_percent"]),
                    memory_used_mib=int(reading["memory_used_mib"]),
                    memory_total_mib=int(reading["memory_total_mib"]),
                )
            )
    GpuSample.objects.bulk_create(rows)
    GpuSample.objects.filter(time__lt=now - KEEP, pod__node__name=node_name).delete()
    return len(rows)
