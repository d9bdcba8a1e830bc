"""Two concurrent submissions with one Idempotency-Key make one job; both get its answer."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from scheduler.models import Job
from tests.api.v1_helpers import bearer, submission
from tests.factories import World

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_retries_make_one_job(world: World) -> None:
    client = bearer(world.alice)
    answers: list = []
    start = threading.Barrier(4)

    def post() -> None:
        try:
            start.wait()
            response = client.post("/api/v1/jobs/", submission(), content_type="application/json",
                                   HTTP_IDEMPOTENCY_KEY="race")
            answers.append((response.status_code, response.json()["id"]))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert Job.objects.count() == 1
    assert sorted(answers) == [(201, Job.objects.get().pk)] * 4
