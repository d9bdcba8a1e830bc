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
