"""From a Pod row to the runtime's PodSpec: paths, rank, master address, user, environment."""

from __future__ import annotations

from django.conf import settings

from scheduler.models import Job, Pod
from scheduler.node.runtime.process import PodSpec
from scheduler.paths import (
    default_checkpoint_dir,
    default_workdir,
    pod_dir,
    pod_exit_path,
    pod_log_path,
    pod_progress_path,
    pod_user_name,
    root_of,
)

MASTER_PORT_BASE = 29500


def pod_spec(pod: Pod, job: Job, *, world_size: int, master_addr: str) -> PodSpec:
    """Raises OSError when one of the job's directories lies outside the roots it may use."""
    workdir = job.code_mount or str(default_workdir(job))
    checkpoint_dir = job.checkpoint_dir or str(default_checkpoint_dir(job))
    env = dict(job.environment or {})
    if job.data_mount:
        env.setdefault("TIDEPOOL_DATA_DIR", job.data_mount)
    attempt_dir = pod_dir(job, pod.attempt)
    dirs = tuple((str(root_of(job, path)), str(path)) for path in (attempt_dir, workdir, checkpoint_dir))
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
        checkpoint_dir=checkpoint_dir,
        restart_count=job.restart_count,
        workdir=workdir,
        log_path=str(pod_log_path(pod)),
        progress_path=str(pod_progress_path(pod)),
        job_uid=str(job.uid),
        exit_path=str(pod_exit_path(pod)),
        user=pod_user_name(job),
        dirs=dirs,
        env_allow=tuple(settings.TIDEPOOL_POD_ENV_ALLOW),
    )


def master_address(pods: list[Pod]) -> str:
    rank0 = min(pods, key=lambda pod: pod.rank)
    return (rank0.node.address if rank0.node and rank0.node.address else "127.0.0.1")
