"""The Redis channel layer, with its blocking read well inside redis-py's socket timeout, and a
connection pool that makes a burst wait instead of failing.

channels-redis waits for messages with a blocking read (BZPOPMIN) of `brpop_timeout` seconds, 5 by
default; redis-py ≥ 6 gives every connection a socket timeout of 5 s. With both at 5 s, an idle
consumer's read raced its own timeout, raised TimeoutError and the websocket dropped every ~5 s.
Here the blocking read lasts 2 s, so it always answers before the socket timeout
(TIDEPOOL_REDIS_SOCKET_TIMEOUT, which must stay above it).

redis-py's asyncio pool opens at most 100 connections and raises MaxConnectionsError past that:
200 browsers opening their job lists at once on a freshly started console (one worker process
accepted most of them) made 14 handshakes fail with 500. A BlockingConnectionPool of
TIDEPOOL_REDIS_MAX_CONNECTIONS per process and event loop makes the excess wait for a connection
(up to 20 s) instead.

A consumer whose socket closed cancels its receive. When that cancellation meets the end of the
blocking read, redis-py (8.1, Python 3.11) reports the read as "no message" and the cancellation is
lost: the receive then polled Redis every 2 s for ever, one task and one connection per occurrence,
and gunicorn had to SIGKILL the worker after its 20 s graceful timeout at every restart (found with
200 websockets: one such task in 5 of 6 workers). A read that comes back empty while a cancellation
is pending now ends the receive.
"""

import asyncio

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

POOL_WAIT_SECONDS = 20


class TidepoolRedisChannelLayer(RedisChannelLayer):
    brpop_timeout = 2

    async def _brpop_with_clean(self, index, channel, timeout):
        member = await super()._brpop_with_clean(index, channel, timeout)
        task = asyncio.current_task()
        if member is None and task is not None and task.cancelling():
            raise asyncio.CancelledError  # redis-py swallowed it (see above)
        return member

    def create_pool(self, index: int) -> BlockingConnectionPool:
        from django.conf import settings

        host = dict(self.hosts[index])
        if "address" not in host:  # sentinels and the like: channels-redis's own pool
            return super().create_pool(index)
        address = host.pop("address")
        return BlockingConnectionPool.from_url(address, max_connections=settings.TIDEPOOL_REDIS_MAX_CONNECTIONS,
                                               timeout=POOL_WAIT_SECONDS, **host)
