"""POST /api/jobs/ answers with the job's detail built from the rows the service just wrote: it must be
exactly what GET /api/jobs/<id>/ shows, with fewer queries than reading it back."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.api.test_api import submission
from tests.factories import World

pytestmark = pytest.mark.django_db


def test_the_answer_is_the_detail(world: World, alice_client: Client) -> None:
    body = submission(roles=[{"name": "master", "pod_count": 1, "gpus": 1, "cpu": "1.5", "memory_gib": 8},
                             {"name": "worker", "pod_count": 2, "gpus": 2, "cpu": 4, "memory_gib": "16.25"}])
    with CaptureQueriesContext(connection) as captured:
        created = alice_client.post("/api/jobs/", body, content_type="application/json")
    assert created.status_code == 201
    answer = created.json()
    assert answer == alice_client.get(f"/api/jobs/{answer['id']}/").json()
    assert [role["name"] for role in answer["roles"]] == ["master", "worker"] and answer["gpus"] == 5
    assert [e["kind"] for e in answer["events"]] == ["submitted", "queued"] and answer["pods"] == []
    assert not any("scheduler_jobevent" in q["sql"] and q["sql"].lstrip().upper().startswith("SELECT")
                   for q in captured.captured_queries)  # the events were not read back
