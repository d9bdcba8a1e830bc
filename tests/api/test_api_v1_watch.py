"""GET /api/v1/jobs/watch/: server-sent job changes, re-read as the caller (never another workspace's)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient
from django.utils import timezone

from scheduler.models import ApiToken
from scheduler.services.jobs import job_stop, job_submit
from scheduler.services.tokens import token_create, token_revoke
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db(transaction=True)

ROLE = [{"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 1, "memory_gib": 1}]


async def next_event(stream, timeout: float = 10) -> dict:
    """The next `event: job` of the stream (comments and the retry hint skipped)."""
    while True:
        chunk = (await asyncio.wait_for(anext(stream), timeout)).decode()
        if "event: job" in chunk:
            return json.loads(chunk.split("data: ", 1)[1])


async def test_watch_sends_a_snapshot_then_changes_of_visible_jobs(world: World) -> None:
    existing = await sync_to_async(JobFactory)(workspace=world.vision, quota=world.team_vision, name="already")
    secret = (await sync_to_async(token_create)(user=world.alice, name="watch")).secret
    response = await AsyncClient().get("/api/v1/jobs/watch/", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    stream = aiter(response.streaming_content)
    try:
        assert (await next_event(stream))["id"] == existing.pk  # the snapshot
        submit = sync_to_async(job_submit)
        await submit(user=world.bob, workspace=world.language, quota=world.team_language, name="bobs-secret",
                     command="x", roles=ROLE)
        mine = await submit(user=world.alice, workspace=world.vision, quota=world.team_vision, name="alices-new",
                            command="x", roles=ROLE)
        event = await next_event(stream)
        assert (event["id"], event["name"], event["status"]) == (mine.pk, "alices-new", "Queuing")
        await sync_to_async(job_stop)(job=mine, user=world.alice)
        event = await next_event(stream)
        assert (event["id"], event["status"]) == (mine.pk, "Stopped")
    finally:
        await stream.aclose()
        await sync_to_async(connections.close_all)()  # the thread's connection: lets the test database go


async def test_watch_refuses_anonymous_and_bad_tokens(world: World) -> None:
    assert (await AsyncClient().get("/api/v1/jobs/watch/")).status_code == 401
    refused = await AsyncClient().get("/api/v1/jobs/watch/", headers={"Authorization": "Bearer tp_nope"})
    assert refused.status_code == 401 and "Unknown" in json.loads(refused.content)["detail"]
    expired = await sync_to_async(token_create)(user=world.alice, name="old",
                                                expires_at=timezone.now() + timedelta(seconds=60))
    await sync_to_async(ApiToken.objects.filter(pk=expired.token.pk).update)(
        expires_at=timezone.now() - timedelta(seconds=1))
    revoked = await sync_to_async(token_create)(user=world.alice, name="gone")
    await sync_to_async(token_revoke)(user=world.alice, token_id=revoked.token.pk)
    for secret, why in ((expired.secret, "expired"), (revoked.secret, "revoked")):
        answer = await AsyncClient().get("/api/v1/jobs/watch/", headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code == 401 and why in json.loads(answer.content)["detail"]
    secret = (await sync_to_async(token_create)(user=world.alice, name="w")).secret
    bad = await AsyncClient().get("/api/v1/jobs/watch/?job=abc", headers={"Authorization": f"Bearer {secret}"})
    assert bad.status_code == 400 and "job" in json.loads(bad.content)
    await sync_to_async(connections.close_all)()
