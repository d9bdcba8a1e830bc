"""From a Pod row to the runtime's PodSpec: paths, rank, master address, environment."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from scheduler.models import Job, Pod
from scheduler.node.runtime.process import PodSpec
from scheduler.paths import pod_log_path, pod_progress_path

MASTER_PORT_BASE = 29500


def pod_spec(pod: Pod, job: Job, *, world_size: int, master_addr: str) -> PodSpec:
    workdir = job.code_mount or str(Path(settings.TIDEPOOL_DATA_DIR) / "pods" / f"job-{job.pk}" / "work")
    env = dict(job.environment or {})
    if job.data_mount:
        env.setdefault("TIDEPOOL_DATA_DIR", job.data_mount)
    return PodSpec(
        pod_id=pod.pk,
        job_id=job.pk,
        attempt=pod.attempt,
        command=job.command,
        env=env,
        gpu_indices=tuple(pod.gpu_indices or ()),
        rank=pod.rank,
        world_size=world_size,
        master_addr=master_addr,
        master_port=MASTER_PORT_BASE + job.pk % 10000,
        checkpoint_dir=job.checkpoint_dir,
        restart_count=job.restart_count,
        workdir=workdir,
        log_path=str(pod_log_path(pod)),
        progress_path=str(pod_progress_path(pod)),
    )


def master_address(pods: list[Pod]) -> str:
    rank0 = min(pods, key=lambda pod: pod.rank)
    return (rank0.node.address if rank0.node and rank0.node.address else "127.0.0.1")
