"""The job list at 10,000 jobs: a constant number of queries per page, whatever the page or filter.

Not a timing test: it counts queries, which is what grows when a row quietly reads the database.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.tables import JobListQuery, build_page, page_ids, render_rows
from scheduler.models import IdleMode, Job, JobRole, Pod
from scheduler.states import JobStatus, PodStatus
from tests.factories import World

pytestmark = pytest.mark.django_db

STATUSES = [JobStatus.RUNNING, JobStatus.QUEUING, JobStatus.SUCCEEDED, JobStatus.PREEMPTED, JobStatus.FAILED]
MAX_QUERIES = 10  # session, user, count, page, roles, pods, workspaces and quotas for the filters


def bulk_jobs(world: World, count: int, prefix: str = "bulk") -> None:
    now = timezone.now()
    first_new = (Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    jobs = [
        Job(
            name=f"{prefix}-{i}",
            workspace=world.vision if i % 2 else world.language,
            quota=world.team_vision if i % 2 else world.team_language,
            owner=world.alice if i % 2 else world.bob,
            command="sleep 1",
            status=STATUSES[i % len(STATUSES)],
            in_quota=bool(i % 3) if STATUSES[i % len(STATUSES)] == JobStatus.RUNNING else None,
            idle_mode=[IdleMode.OFF, IdleMode.ACCEPTABLE, IdleMode.ONLY][i % 3],
            priority=1 + i % 9,
            attempt=1,
            queue_time=now - timedelta(seconds=i),
            queue_position=i if STATUSES[i % len(STATUSES)] == JobStatus.QUEUING else None,
        )
        for i in range(count)
    ]
    Job.objects.bulk_create(jobs, batch_size=2000)
    ids = list(Job.objects.filter(pk__gte=first_new).order_by("pk").values_list("pk", "status"))
    JobRole.objects.bulk_create(
        [JobRole(job_id=pk, name="worker", pod_count=2, gpu_type="A100", gpus=4) for pk, _ in ids], batch_size=2000
    )
    Pod.objects.bulk_create(
        [
            Pod(job_id=pk, role="worker", index=i, rank=i, attempt=1, node=world.gpu1 if i == 0 else world.gpu2,
                gpu_indices=[0, 1, 2, 3], status=PodStatus.RUNNING)
            for pk, status in ids
            if status == JobStatus.RUNNING
            for i in range(2)
        ],
        batch_size=2000,
    )


def queries_for(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured)


QUERIES = [
    "",
    "?page=2",
    "?page=100",
    "?status=Running&sort=-priority",
    "?quota={quota}&idle_mode=only&mine=1",
    "?status=pending&sort=name&page=3",
    "?q=-99",
    "?workspace={workspace}&sort=quota",
]


def test_list_page_queries_do_not_grow_with_jobs(
    world: World, alice_client: Client, staff_client: Client, django_assert_max_num_queries
) -> None:
    urls = [reverse("console:jobs") + q.format(quota=world.team_vision.pk, workspace=world.vision.pk)
            for q in QUERIES]
    bulk_jobs(world, 120, prefix="few")
    clients = {"staff": staff_client, "member": alice_client}
    small = {(who, url): queries_for(client, url) for who, client in clients.items() for url in urls}
    bulk_jobs(world, 10_000)
    assert Job.objects.count() == 10_120
    for (who, url), before in small.items():
        with django_assert_max_num_queries(MAX_QUERIES):
            after = queries_for(clients[who], url)
        assert after == before, f"{who} {url}: {before} queries with 120 jobs, {after} with 10,120"


def test_a_full_page_renders_fifty_rows_in_five_queries(world: World, django_assert_num_queries) -> None:
    bulk_jobs(world, 10_000)
    query = JobListQuery.from_query_string("sort=-priority&page=37")
    with django_assert_num_queries(5):  # count, page, roles, pods and resizes of the current attempt
        page = build_page(user=world.admin, query=query)
        html = render_rows(page)
    assert len(page.jobs) == 50 and html.count("<tr data-job-id=") == 50
    with django_assert_num_queries(2):  # what the job-list consumer runs on every change notice
        ids, total = page_ids(user=world.admin, query=query)
    assert ids == page.ids and total == 10_000
