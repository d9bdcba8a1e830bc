"""The Redis channel layer, with its blocking read well inside redis-py's socket timeout.

channels-redis waits for messages with a blocking read (BZPOPMIN) of `brpop_timeout` seconds, 5 by
default; redis-py ≥ 6 gives every connection a socket timeout of 5 s. With both at 5 s, an idle
consumer's read raced its own timeout, raised TimeoutError and the websocket dropped every ~5 s.
Here the blocking read lasts 2 s, so it always answers before the socket timeout
(TIDEPOOL_REDIS_SOCKET_TIMEOUT, which must stay above it).
"""

from channels_redis.core import RedisChannelLayer


class TidepoolRedisChannelLayer(RedisChannelLayer):
    brpop_timeout = 2
