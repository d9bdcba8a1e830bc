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
"""

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

POOL_WAIT_SECONDS = 20


class TidepoolRedisChannelLayer(RedisChannelLayer):
    brpop_timeout = 2

    def create_pool(self, index: int) -> BlockingConnectionPool:
        from django.conf import settings

        host = dict(self.hosts[index])
        if "address" not in host:  # sentinels and the like: channels-redis's own pool
            return super().create_pool(index)
        address = host.pop("address")
        return BlockingConnectionPool.from_url(address, max_connections=settings.TIDEPOOL_REDIS_MAX_CONNECTIONS,
                                               timeout=POOL_WAIT_SECONDS, **host)
