"""The loop's side of wake-ups: a Redis pub/sub listener that sets the local wake-up event.

The sending side (`wake_scheduler_on_commit`) is in scheduler/publish.py, next to the other
after-commit broadcasts, so that services never import the loop.
"""

from __future__ import annotations

import threading

from django.conf import settings

from scheduler.publish import WAKEUP_CHANNEL, local_wakeup


def redis_wakeup_listener(stop: threading.Event):
    """Across processes, a submission publishes on Redis; forward it to the local event."""
    if not settings.REDIS_URL:
        return None
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(**{WAKEUP_CHANNEL: lambda message: local_wakeup.set()})
    return pubsub.run_in_thread(sleep_time=0.5, daemon=True)
