"""schemathesis against the live schema: every /api/v1/ operation, generated requests, as a member
with a token. No answer may be a 5xx, and every documented answer must match the schema."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from scheduler.services.tokens import token_create
from tests.factories import JobFactory, make_running

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", get_wsgi_application())


@pytest.fixture
def token(world):
    """A member's token; the WSGI app keeps the test's connection open (as Django's test client does)."""
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="fuzzed", owner=world.alice)
    make_running(job, world.gpu1)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield token_create(user=world.alice, name="fuzz").secret
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_api_v1_answers_within_its_schema(case, token) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
