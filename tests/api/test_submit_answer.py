"""POST /api/v1/jobs/ answers with the job's detail built from the rows the service just wrote: it must be
exactly what GET /api/v1/jobs/<id>/ shows (the texts this reader may read included), without reading the
job back."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test import Client

from scheduler.models import JobEvent
from scheduler.selectors.access import reason_for, shown_text
from tests.api.v1_helpers import submission
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL statement run on the default connection meanwhile (whatever resets the query log)."""
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


@pytest.mark.parametrize("reader", ["alice_client", "staff_client"])
def test_the_answer_is_the_detail_without_reading_the_job_back(world: World, reader: str, request) -> None:
    client: Client = request.getfixturevalue(reader)
    body = submission(roles=[{"name": "master", "pod_count": 1, "gpus": 1, "cpu": "1.5", "memory_gib": 8},
                             {"name": "worker", "pod_count": 2, "gpus": 2, "cpu": 4, "memory_gib": "16.25"}])
    with statements() as sql:
        created = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    answer = created.json()
    assert answer == client.get(f"/api/v1/jobs/{answer['id']}/").json()
    assert [role["name"] for role in answer["roles"]] == ["master", "worker"] and answer["gpus"] == 5
    assert [e["kind"] for e in answer["events"]] == ["submitted", "queued"] and answer["pods"] == []
    reads = [q for q in sql if q.lstrip().upper().startswith("SELECT")]
    assert reads, "the statements were not seen"
    for table in ("scheduler_jobevent", "scheduler_jobrole", "scheduler_pod", "scheduler_jobpreemption"):
        assert not any(f'FROM "{table}"' in q for q in reads), f"{table} was read back"
    assert not any('FROM "scheduler_job" ' in q or 'FROM "scheduler_job"\n' in q for q in reads)


@pytest.mark.parametrize("staff_text", ["", "waits for job other-team-job"])
def test_shown_text_is_reason_for_on_values_in_hand(world: World, staff_text: str) -> None:
    """The answer's texts come from `shown_text`; GET's from `reason_for` in SQL: one rule, two places."""
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    event = JobEvent.objects.create(job=job, kind="queued", reason="waits for a job of quota team-language",
                                    staff_reason=staff_text)
    for user in (world.alice, world.admin):
        in_sql = JobEvent.objects.annotate(shown=reason_for(user=user)).get(pk=event.pk).shown
        assert shown_text(user=user, text=event.reason, staff_text=event.staff_reason) == in_sql


def test_a_token_submission_costs_nine_statements(world: World) -> None:
    """What one POST /api/v1/jobs/ asks of the database (issue 25: CPU per request is what bounds the
    API's p95 on two cores). Each statement has a purpose; a new one should be a deliberate choice.
    The token's last use is written at most once a minute, so the second submission writes none."""
    from scheduler.services.tokens import token_create

    secret = token_create(user=world.alice, name="bench").secret
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.post("/api/v1/jobs/", submission(name="first"), content_type="application/json").status_code == 201
    with statements() as sql:
        created = client.post("/api/v1/jobs/", submission(name="second"), content_type="application/json")
    assert created.status_code == 201, created.content
    work = [q for q in sql if q.split()[0].upper() not in {"BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"}]
    tables = [found[1] if (found := re.search(r'(?:FROM|INTO|UPDATE) "(\w+)"', q)) else q[:40] for q in work]
    assert tables == [
        "scheduler_apitoken",  # the token and its user
        "scheduler_workspace",  # the workspace, among the user's
        "scheduler_resourcequota",  # the quota, among the user's
        "scheduler_workspace",  # the service's own check: the quota is the workspace's, the user a member
        "scheduler_node",  # the pool's nodes: a pod no node holds is refused
        "scheduler_resourcequota",  # the pool's quota tree: a job its quota can never run is refused
        "scheduler_job", "scheduler_jobrole", "scheduler_jobevent",  # the three inserts
    ], work
