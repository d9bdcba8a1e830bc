"""Elastic roles through API v1 (DESIGN §2c): `min_pod_count` on a role, refused with idle off at that field,
and the job's resize counters."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.models import Job
from tests.api.v1_helpers import bearer, submission
from tests.factories import World

pytestmark = pytest.mark.django_db

ELASTIC = [{"name": "worker", "pod_count": 4, "min_pod_count": 2, "gpus": 1, "cpu": 1, "memory_gib": 8}]


@pytest.fixture
def alice(world: World) -> Client:
    return bearer(world.alice)


def test_an_elastic_role_is_submitted_and_shown(world: World, alice: Client) -> None:
    created = alice.post("/api/v1/jobs/", submission(roles=ELASTIC), content_type="application/json")
    assert created.status_code == 201, created.json()
    detail = alice.get(f"/api/v1/jobs/{created.json()['id']}/").json()
    assert (detail["roles"][0]["pod_count"], detail["roles"][0]["min_pod_count"]) == (4, 2)
    assert (detail["shrink_count"], detail["grow_count"], detail["resized_at"]) == (0, 0, None)


@pytest.mark.parametrize(("override", "field"), [
    ({"idle_mode": "off"}, "roles[0].min_pod_count"),
    ({"roles": [dict(ELASTIC[0], min_pod_count=5)]}, "roles[0].min_pod_count"),
    ({"roles": [dict(ELASTIC[0], min_pod_count=0)]}, "roles[0].min_pod_count"),
])
def test_a_wrong_elastic_role_is_refused_at_its_field(world: World, alice: Client, override, field) -> None:
    response = alice.post("/api/v1/jobs/", submission(**{"roles": ELASTIC, **override}),
                          content_type="application/json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()
