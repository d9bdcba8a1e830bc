"""Pods sharing a node get disjoint GPU indices, and each process sees exactly what was recorded."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Pod, Workspace
from scheduler.node.local import LocalExecutor
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_cuda_visible_devices_match_records_and_never_overlap(settings, tmp_path):
    executor = LocalExecutor()
    previous = set_executor(executor)
    try:
        node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, inventory_source="demo")
        user = get_user_model().objects.create_user("ana")
        space = Workspace.objects.create(name="team")
        space.members.add(user)
        quota = quota_create(name="team", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64, workspaces=[space])
        out = tmp_path / "seen"
        out.mkdir()
        command = f'echo "$CUDA_VISIBLE_DEVICES" > {out}/$TIDEPOOL_POD_ID; echo rank=$RANK world=$WORLD_SIZE'
        for i, (pods, gpus) in enumerate(((2, 2), (2, 1), (1, 2))):  # 8 GPUs: the whole node
            job_submit(user=user, workspace=space, quota=quota, name=f"job-{i}", command=command,
                       roles=[{"name": "worker", "pod_count": pods, "gpus": gpus}])
        schedule_once()
        deadline = time.monotonic() + 30
        while Job.objects.exclude(status=JobStatus.SUCCEEDED).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Job.objects.exclude(status=JobStatus.SUCCEEDED).exists()
        taken: set[int] = set()
        pods = list(Pod.objects.all())
        assert len(pods) == 5
        for pod in pods:
            seen = (out / str(pod.pk)).read_text().strip()
            assert seen == ",".join(str(i) for i in pod.gpu_indices), (pod, seen)
            assert not taken & set(pod.gpu_indices), "two pods were given the same GPU"
            taken |= set(pod.gpu_indices)
        assert taken == set(range(8))
    finally:
        executor.shutdown(grace_s=1)
        set_executor(previous)
