"""Elastic jobs' rows (DESIGN §2c): their GPU time counts the GPUs each held, resize by resize, and a page of
them renders in the same five queries as any page (their resizes come prefetched, not one read per row)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from console.tables import JobListQuery, build_page, render_rows
from scheduler.models import IdleMode, Job, JobResize, JobRole, Pod
from scheduler.states import JobStatus, PodStatus
from tests.factories import World


def _elastic_jobs(world: World, count: int) -> None:
    """Running 1-4 pod jobs of 2 GPUs a pod: 1 pod for 300 s, 4 for 100 s, then 2 (shrunk) until now + 600 s."""
    now = timezone.now()
    for number in range(count):
        job = Job.objects.create(name=f"elastic-{number}", workspace=world.vision, quota=world.team_vision,
                                 owner=world.alice, command="torchrun train.py", status=JobStatus.RUNNING,
                                 in_quota=False, idle_mode=IdleMode.ACCEPTABLE, attempt=1, queue_time=now,
                                 started_at=now - timedelta(seconds=1000), resized_at=now - timedelta(seconds=600))
        JobRole.objects.create(job=job, name="worker", pod_count=4, min_pod_count=1, gpu_type="A100", gpus=2)
        for index in range(2):
            Pod.objects.create(job=job, role="worker", index=index, rank=index, attempt=1, node=world.gpu1,
                               gpu_indices=[2 * index, 2 * index + 1], status=PodStatus.RUNNING)
        for kind, seconds_ago, before, after, gpus in (("grow", 700, 1, 4, 2), ("shrink", 600, 4, 2, 8)):
            JobResize.objects.create(job=job, attempt=1, kind=kind, time=now - timedelta(seconds=seconds_ago),
                                     from_pods=before, to_pods=after, gpus=gpus, reason="test")


def test_a_page_of_elastic_jobs_renders_in_five_queries(world: World, django_assert_num_queries) -> None:
    _elastic_jobs(world, 12)
    query = JobListQuery.from_query_string("")
    with django_assert_num_queries(5):  # count, page, roles, pods and resizes of the current attempt
        page = build_page(user=world.admin, query=query)
        html = render_rows(page)
    assert len(page.jobs) == 12 and html.count('data-elastic-pods="2 of 1–4 pods"') == 12
    # 2×300 + 8×100 + 4×600 = 3,800 GPU-s ≈ 1.06 GPU-h (at its maximum it would read 8×1000 s ≈ 2.2 GPU-h)
    assert all(round(job.total_gpu_seconds() / 3600, 2) == 1.06 for job in page.jobs)
