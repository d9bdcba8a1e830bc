"""Websockets on the Redis channel layer: connected through long idle spells (issue 10: with
channels-redis's 5 s blocking read against redis-py's 5 s socket timeout, idle sockets dropped every
~5 s), and across a Redis restart: a handshake while Redis is down is refused cleanly, and new
handshakes succeed within 5 s of Redis being back (issue 25: 11 of 20 answered 500 for a minute).
"""

from __future__ import annotations

import asyncio
import time

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
from tests.redis_server import PrivateRedis

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

IDLE_S = 11  # more than two 5 s socket timeouts


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


async def test_handshakes_while_redis_is_down_are_refused_and_succeed_within_5_s_of_it_coming_back(
        settings, tmp_path, caplog) -> None:
    server = PrivateRedis(tmp_path)
    server.start()
    settings.CHANNEL_LAYERS = redis_channel_layers(server.url)
    channel_layers.backends.clear()
    world, job, cookie = await database_sync_to_async(_world_and_job)()
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]

    async def handshake() -> tuple[bool, WebsocketCommunicator]:
        socket = WebsocketCommunicator(application, "/ws/jobs/", headers=headers)
        connected, _ = await socket.connect(timeout=10)
        return connected, socket

    try:
        connected, before = await handshake()
        assert connected and (await before.receive_json_from(timeout=10))["type"] == "snapshot"

        await asyncio.get_running_loop().run_in_executor(None, server.stop)
        await before.disconnect()
        refused_at = time.monotonic()
        connected, refused = await handshake()  # an exception here would be a 500 under a real server
        assert not connected
        assert time.monotonic() - refused_at < 5
        assert any("channel layer is unreachable" in r.getMessage() for r in caplog.records)

        back = await asyncio.get_running_loop().run_in_executor(None, server.start)
        opened = []
        for _ in range(20):  # 20 new job lists, as after the restart of issue 25
            connected, socket = await handshake()
            assert connected, "a handshake after Redis came back was refused"
            assert (await socket.receive_json_from(timeout=10))["type"] == "snapshot"
            opened.append(socket)
        assert time.monotonic() - back < 5

        await database_sync_to_async(job_stop)(job=job, user=world.alice)
        await asyncio.get_running_loop().run_in_executor(None, publish_jobs_changed, [(job.pk, world.vision.pk)])
        for socket in opened:  # and they get live updates
            assert f'data-job-id="{job.pk}"' in str(await socket.receive_json_from(timeout=10))
        for socket in opened:
            await socket.disconnect()
    finally:
        channel_layers.backends.clear()
        server.stop()
