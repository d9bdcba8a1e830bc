"""A websocket on the Redis channel layer stays connected through long idle spells and still gets updates.

redis-py ≥ 6 gives connections a 5 s socket timeout; channels-redis waits for messages with a 5 s
blocking read. With those defaults an idle consumer's read raced its own timeout and the socket
dropped every ~5 s (issue 10: at 200 clients 35 % of updates were lost). config/channel_layer.py
shortens the blocking read to 2 s, inside the socket timeout.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application
from config.settings import redis_channel_layers
from scheduler.publish import publish_jobs_changed
from scheduler.services.jobs import job_stop
from scheduler.states import JobStatus
from tests.factories import JobFactory, World, build_world

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

IDLE_S = 11  # more than two of channels-redis's 5 s blocking reads


@pytest.fixture
def redis_layer(settings, redis_url):
    settings.CHANNEL_LAYERS = redis_channel_layers(redis_url)
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _session(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def _world_and_job() -> tuple[World, object, bytes]:
    world = build_world()
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="idle-watch")
    return world, job, _session(world.alice)


async def test_idle_websocket_stays_connected_and_receives_an_update(redis_layer) -> None:
    world, job, cookie = await database_sync_to_async(_world_and_job)()
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
    listing = WebsocketCommunicator(application, "/ws/jobs/", headers=headers)
    detail = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)
    try:
        for socket in (listing, detail):
            connected, _ = await socket.connect(timeout=10)
            assert connected
            assert (await socket.receive_json_from(timeout=10))["type"] == "snapshot"

        await asyncio.sleep(IDLE_S)  # nothing is sent either way
        for socket in (listing, detail):
            # A dropped consumer would have sent websocket.close (or died with the read's TimeoutError).
            assert await socket.receive_nothing(timeout=0.2), "the socket was closed while idle"

        await database_sync_to_async(job_stop)(job=job, user=world.alice)
        await asyncio.get_running_loop().run_in_executor(
            None, publish_jobs_changed, [(job.pk, world.vision.pk)])
        rows = await listing.receive_json_from(timeout=10)
        assert rows["type"] in ("rows", "snapshot") and f'data-job-id="{job.pk}"' in str(rows)
        update = await detail.receive_json_from(timeout=10)
        assert update["status"] == JobStatus.STOPPED
    finally:
        await listing.disconnect()
        await detail.disconnect()
