"""The Redis channel layer as configured (config/settings.py redis_channel_layers: channels-redis's
pub/sub layer, stock, with redis-py retries): bursts of joins, sockets leaving, and Redis restarts."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from channels.layers import channel_layers

from config.settings import redis_channel_layers
from tests.redis_server import PrivateRedis

pytestmark = pytest.mark.timeout(60)


def make_layer(settings, url: str):
    settings.CHANNEL_LAYERS = redis_channel_layers(url)
    channel_layers.backends.clear()
    return channel_layers.make_backend("default")


@pytest.fixture
def redis_layer(settings, redis_url):
    layer = make_layer(settings, redis_url)
    yield layer
    channel_layers.backends.clear()


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


async def test_150_concurrent_group_adds_all_succeed(redis_layer) -> None:
    """200 job lists opened at once on a fresh console once made 14 handshakes answer 500 (redis-py's
    pool refused connections past 100); the pub/sub layer joins groups on one connection."""
    channel = await redis_layer.new_channel()
    groups = [f"tidepool-test-burst-{i}" for i in range(150)]
    try:
        await asyncio.gather(*(redis_layer.group_add(group, channel) for group in groups))
        await redis_layer.group_send(groups[-1], {"type": "jobs.changed"})
        assert await asyncio.wait_for(redis_layer.receive(channel), 5) == {"type": "jobs.changed"}
    finally:
        await asyncio.gather(*(redis_layer.group_discard(group, channel) for group in groups))
        await redis_layer.flush()


@pytest.mark.parametrize("round_", range(4))
async def test_closing_sockets_end_every_receive(redis_layer, round_) -> None:
    """30 consumers of one process receive an update, then all disconnect at once, as 200 browsers
    leaving did: every receive must end (one that polled Redis for ever once held each web worker's
    shutdown for 20 s)."""
    group = f"tidepool-test-leave-{round_}"
    channels = [await redis_layer.new_channel() for _ in range(30)]
    received: list[str] = []

    async def consume(channel: str) -> None:
        await redis_layer.group_add(group, channel)
        while True:
            await redis_layer.receive(channel)
            received.append(channel)

    receivers = [asyncio.create_task(consume(channel)) for channel in channels]
    try:
        await asyncio.sleep(0.5)
        await redis_layer.group_send(group, {"type": "jobs.changed"})
        for _ in range(100):
            if len(received) == 30:
                break
            await asyncio.sleep(0.05)
        assert len(received) == 30

        async def leave(channel: str, receiver: asyncio.Task) -> None:
            await redis_layer.group_discard(group, channel)
            receiver.cancel()

        await asyncio.gather(*(leave(c, r) for c, r in zip(channels, receivers, strict=True)))
        done, still_receiving = await asyncio.wait(receivers, timeout=6)
        assert not still_receiving
    finally:
        for receiver in receivers:
            receiver.cancel()
        await redis_layer.flush()


async def test_after_a_redis_restart_groups_work_again_within_5_s(settings, private_redis) -> None:
    """Redis restarted under a running process: a new join and a send work within 5 s of Redis
    answering again, and a channel that joined before the restart receives again (the subscriber
    connection subscribes to its groups again). Before, new joins failed with "Connection closed by
    server." for about a minute."""
    layer = make_layer(settings, private_redis.url)
    try:
        old = await layer.new_channel()
        await layer.group_add("jobs.ws.1", old)
        await layer.group_send("jobs.ws.1", {"type": "jobs.changed", "job_ids": [1]})
        assert (await asyncio.wait_for(layer.receive(old), 5))["job_ids"] == [1]

        private_redis.stop()
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError):  # down: a clear error, after the retries
            await layer.group_add("jobs.ws.2", await layer.new_channel())
        assert time.monotonic() - started < 5

        back = await asyncio.get_running_loop().run_in_executor(None, private_redis.start)
        new = await layer.new_channel()
        await layer.group_add("jobs.ws.1", new)
        await layer.group_send("jobs.ws.1", {"type": "jobs.changed", "job_ids": [2]})
        assert (await asyncio.wait_for(layer.receive(new), 5))["job_ids"] == [2]
        assert (await asyncio.wait_for(layer.receive(old), 5))["job_ids"] == [2]
        assert time.monotonic() - back < 5
    finally:
        await layer.flush()
        channel_layers.backends.clear()
