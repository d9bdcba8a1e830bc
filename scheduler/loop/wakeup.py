"""The loop's side of wake-ups: a Redis pub/sub listener that sets the local wake-up event.

The sending side (`wake_scheduler_on_commit`) is in scheduler/publish.py, next to the other
after-commit broadcasts, so that services never import the loop.
"""

from __future__ import annotations

import threading

from django.conf import settings

from scheduler.publish import WAKEUP_CHANNEL, local_wakeup


class WakeupListener:
    """The pub/sub thread and the client it reads through, kept together: a client that is garbage
    collected closes its connections under the thread ("I/O operation on closed file")."""

    def __init__(self, client, pubsub, thread) -> None:
        self.client, self.pubsub, self.thread = client, pubsub, thread

    def close(self) -> None:
        self.thread.stop()  # PubSubWorkerThread has stop(), not close()
        self.thread.join(timeout=2)
        self.pubsub.close()
        self.client.close()


def redis_wakeup_listener(stop: threading.Event) -> WakeupListener | None:
    """Across processes, a submission publishes on Redis; forward it to the local event."""
    if not settings.REDIS_URL:
        return None
    import redis

    # No read timeout: the thread polls with its own 0.5 s timeout; keepalive notices a dead peer.
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=None, socket_keepalive=True,
                                  health_check_interval=15)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(**{WAKEUP_CHANNEL: lambda message: local_wakeup.set()})
    thread = pubsub.run_in_thread(sleep_time=0.5, daemon=True, exception_handler=_keep_listening)
    return WakeupListener(client, pubsub, thread)


def _keep_listening(error: BaseException, pubsub, thread) -> None:
    """Redis went away: wait and let the next read reconnect (the loop polls meanwhile)."""
    import logging
    import time

    logging.getLogger("tidepool.scheduler").warning("wake-up listener: %s; retrying", error)
    time.sleep(1)
