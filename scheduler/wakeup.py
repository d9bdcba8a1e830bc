"""Ask the scheduler loop to run a cycle now (after a submission, a stop or a pod exit).

In one process (the embedded setup) a threading.Event wakes the loop thread. Across
processes (PostgreSQL + a separate `run_scheduler`) the loop also polls every
TIDEPOOL_SCHEDULER_INTERVAL seconds and, with Redis, listens on a pub/sub channel.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import transaction

log = logging.getLogger("tidepool.wakeup")

WAKEUP_CHANNEL = "tidepool:scheduler:wakeup"
local_wakeup = threading.Event()
_redis_client = None


def _redis():
    global _redis_client
    if _redis_client is None:
        import redis

        _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
    return _redis_client


def wake_scheduler() -> None:
    local_wakeup.set()
    if settings.REDIS_URL:
        try:
            _redis().publish(WAKEUP_CHANNEL, b"1")
        except Exception:  # the loop polls anyway; a lost wake-up only costs one interval
            log.warning("could not publish scheduler wake-up", exc_info=True)


def wake_scheduler_on_commit() -> None:
    transaction.on_commit(wake_scheduler)
