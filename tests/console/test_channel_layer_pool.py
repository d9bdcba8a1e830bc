"""A burst on the Redis channel layer waits for a pooled connection instead of failing
(config/channel_layer.py): 200 job lists opened at once once made 14 handshakes answer 500."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import channel_layers

from config.settings import redis_channel_layers

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def redis_layer(settings, redis_url):
    settings.CHANNEL_LAYERS = redis_channel_layers(redis_url)
    settings.TIDEPOOL_REDIS_MAX_CONNECTIONS = 4
    channel_layers.backends.clear()
    layer = channel_layers.make_backend("default")
    yield layer
    channel_layers.backends.clear()


async def test_150_concurrent_group_adds_share_4_connections_and_all_succeed(redis_layer) -> None:
    channel = await redis_layer.new_channel()
    groups = [f"tidepool-test-burst-{i}" for i in range(150)]
    try:
        await asyncio.gather(*(redis_layer.group_add(group, channel) for group in groups))
        pool = redis_layer.connection(0).connection_pool
        assert pool.max_connections == 4
        opened = {*pool._get_free_connections(), *pool._get_in_use_connections()}
        assert len(opened) <= 4  # the stock pool opens one per concurrent call, and fails past 100
    finally:
        await asyncio.gather(*(redis_layer.group_discard(group, channel) for group in groups))
        await redis_layer.close_pools()


@pytest.mark.parametrize("round_", range(4))  # the race shows in about two runs of three
async def test_closing_sockets_end_every_receive(redis_layer, round_) -> None:
    """30 consumers of one process receive an update, then all disconnect at once, as 200 browsers
    leaving did: every receive must end. With redis-py swallowing a cancellation that met the end of
    the blocking read, one of them polled Redis for ever (and held the worker's shutdown for 20 s)."""
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
        await redis_layer.close_pools()
