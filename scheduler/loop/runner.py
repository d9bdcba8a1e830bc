"""The scheduler process's loop: wait for leadership, then a cycle every interval or when woken.

Wake-ups coalesce: after a cycle the loop rests at least TIDEPOOL_SCHEDULER_MIN_GAP seconds, and
every wake-up that arrives meanwhile is answered by the one cycle that follows. Under a burst of
submissions (50 a second) one cycle then decides them all instead of one cycle per submission,
each over the whole queue; the scheduler's share of a core stays below cycle / (cycle + gap).
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connection

from scheduler.loop.cycle import schedule_once
from scheduler.loop.leader import LeaderLock
from scheduler.loop.wakeup import redis_wakeup_listener
from scheduler.publish import local_wakeup

log = logging.getLogger("tidepool.scheduler")


def run_forever(stop: threading.Event, interval: float | None = None, min_gap: float | None = None) -> None:
    """The loop: wait for leadership, then a cycle every `interval` s, or when woken but no sooner
    than `min_gap` s after the previous cycle ended."""
    from django.db import close_old_connections

    interval = interval if interval is not None else settings.TIDEPOOL_SCHEDULER_INTERVAL
    min_gap = min(interval, min_gap if min_gap is not None else settings.TIDEPOOL_SCHEDULER_MIN_GAP)
    lock = LeaderLock()
    listener = redis_wakeup_listener(stop)
    announced_standby = False
    try:
        while not stop.is_set():
            close_old_connections()
            if not lock.still_held():
                if not lock.acquire():
                    if not announced_standby:
                        log.info("standby: another scheduler holds the leader lock")
                        announced_standby = True
                    stop.wait(interval)
                    continue
                log.info("leader: this process schedules")
                announced_standby = False
            try:
                result = schedule_once()
                if result.admitted or result.preempted or result.promoted or result.nominated:
                    log.info(
                        "cycle: %d admitted, %d preempted, %d nominated, %d promoted, %d pending (%.3f s)",
                        result.admitted, result.preempted, result.nominated, result.promoted, result.pending,
                        result.seconds,
                    )
            except Exception:
                log.exception("scheduling cycle failed; retrying next interval")
                connection.close()
            if min_gap > 0 and stop.wait(min_gap):  # wake-ups of the gap stay set for the next cycle
                break
            local_wakeup.wait(max(0.0, interval - min_gap))
            local_wakeup.clear()
    finally:
        lock.release()
        if listener is not None:
            listener.stop()
