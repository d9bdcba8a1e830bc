"""The loop's side of wake-ups: a Redis pub/sub listener that sets the local wake-up event.

The sending side (`wake_scheduler_on_commit`) is in scheduler/publish.py, next to the other
after-commit broadcasts, so that services never import the loop.

The listener is a thread of its own that owns its client (a client that is garbage-collected
closes its connection pool under the subscription: "I/O operation on closed file"), reconnects
after any error (Redis restarted, network cut) with a backoff up to 5 s, and wakes the loop once
after each reconnect, since wake-ups sent meanwhile were lost. `stop()` ends it.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings

from scheduler.publish import WAKEUP_CHANNEL, local_wakeup

log = logging.getLogger("tidepool.scheduler")


class WakeupListener:
    def __init__(self, url: str, stop: threading.Event) -> None:
        self.url = url
        self._stop = stop
        self._own_stop = threading.Event()
        self.connected = threading.Event()
        self.received = 0
        self._thread = threading.Thread(target=self._run, name="tidepool-wakeup", daemon=True)

    def start(self) -> WakeupListener:
        self._thread.start()
        return self

    def stopping(self) -> bool:
        return self._stop.is_set() or self._own_stop.is_set()

    def stop(self, timeout: float = 3.0) -> None:
        self._own_stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        import redis

        backoff = 0.2
        while not self.stopping():
            client = pubsub = None
            try:
                client = redis.Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=5,
                                              health_check_interval=10)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(WAKEUP_CHANNEL)
                self.connected.set()
                local_wakeup.set()  # wake-ups sent while we were not listening are lost: look now
                backoff = 0.2
                while not self.stopping():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        self.received += 1
                        local_wakeup.set()
            except Exception as error:
                self.connected.clear()
                if not self.stopping():
                    log.warning("wake-up listener lost Redis (%s); reconnecting in %.1f s", error, backoff)
                    self._own_stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
            finally:
                for thing in (pubsub, client):
                    try:
                        if thing is not None:
                            thing.close()
                    except Exception:
                        pass
        self.connected.clear()


def redis_wakeup_listener(stop: threading.Event) -> WakeupListener | None:
    """Across processes, a submission publishes on Redis; forward it to the local event."""
    if not settings.REDIS_URL:
        return None
    return WakeupListener(settings.REDIS_URL, stop).start()
