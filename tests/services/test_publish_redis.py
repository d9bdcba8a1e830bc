"""Publishing from a process without a server loop (run_scheduler, a node worker) on the Redis channel
layer: delivered, through one event loop and one layer object kept for the process's life."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.layers import channel_layers, get_channel_layer

from config.settings import redis_channel_layers
from scheduler import publish

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def redis_layer(settings, redis_url):
    settings.CHANNEL_LAYERS = redis_channel_layers(redis_url)
    channel_layers.backends.clear()
    publish.register_server_loop(None)  # as in run_scheduler: no server loop in this process
    yield
    channel_layers.backends.clear()


def publish_from_a_thread(changes: list[tuple[int, int]]) -> None:
    thread = threading.Thread(target=publish.publish_jobs_changed, args=(changes,))
    thread.start()
    thread.join(10)


def test_a_publish_from_a_plain_thread_reaches_subscribers_and_reuses_its_loop(redis_layer) -> None:
    """The subscriber runs on an event loop of its own thread (as a console process would), with a
    layer object of its own, so the test depends on no event loop of the test runner."""
    global_layer = get_channel_layer()
    seen: dict[str, object] = {}

    async def subscribe_publish_receive() -> None:
        layer = channel_layers.make_backend("default")
        channel = await layer.new_channel()
        await layer.group_add("jobs.ws.9001", channel)
        try:
            await asyncio.to_thread(publish_from_a_thread, [(5, 9001), (6, 9001)])
            seen["first"] = await asyncio.wait_for(layer.receive(channel), 10)
            seen["publishing"] = publish._publishing
            await asyncio.to_thread(publish_from_a_thread, [(7, 9001)])
            seen["second"] = await asyncio.wait_for(layer.receive(channel), 10)
        finally:
            await layer.group_discard("jobs.ws.9001", channel)
            await layer.flush()  # closes its connections (channels-redis pub/sub layer)

    subscriber = threading.Thread(target=lambda: asyncio.run(subscribe_publish_receive()))
    subscriber.start()
    subscriber.join(30)
    assert seen.get("first") == {"type": "jobs.changed", "job_ids": [5, 6]}
    assert seen.get("second") == {"type": "jobs.changed", "job_ids": [7]}
    first = seen["publishing"]
    assert publish._publishing is first  # the same loop and layer: no new Redis connection per publish
    assert first[2] is not global_layer  # its own layer object: no other loop closes its connections
