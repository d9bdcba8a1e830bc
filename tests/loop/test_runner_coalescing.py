"""The loop answers a burst of wake-ups with a few cycles, and a lone wake-up at once.

At 50 submissions a second every submission wakes the scheduler; one cycle per wake-up would spend
a core re-deciding the whole queue. TIDEPOOL_SCHEDULER_MIN_GAP makes the loop rest between cycles
and answer every wake-up of the rest with the next cycle (scheduler/loop/runner.py).
"""

from __future__ import annotations

import threading
import time

import pytest

from scheduler.loop import runner
from scheduler.publish import local_wakeup
from tests.waiting import wait_for

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]


class CycleClock:
    def __init__(self) -> None:
        self.starts: list[float] = []

    def __call__(self) -> _Result:
        self.starts.append(time.monotonic())
        return _Result()


class _Result:
    admitted = preempted = promoted = nominated = pending = 0
    seconds = 0.0


@pytest.fixture
def loop(settings, monkeypatch):
    settings.REDIS_URL = None  # the in-process event only
    clock = CycleClock()
    monkeypatch.setattr(runner, "schedule_once", clock)
    stop = threading.Event()
    local_wakeup.clear()
    thread = threading.Thread(target=runner.run_forever, args=(stop,), kwargs={"interval": 30, "min_gap": 0.3})
    thread.start()
    wait_for(lambda: len(clock.starts) == 1, 10, "the first cycle")
    time.sleep(0.4)  # past the first gap: the loop now sleeps until woken
    yield clock
    stop.set()
    local_wakeup.set()
    thread.join(10)
    assert not thread.is_alive()


def test_a_lone_wakeup_is_answered_at_once(loop):
    woken = time.monotonic()
    local_wakeup.set()
    wait_for(lambda: len(loop.starts) == 2, 5, "the cycle after the wake-up")
    assert loop.starts[1] - woken < 0.2


def test_a_burst_of_wakeups_is_answered_by_a_few_cycles_and_the_last_one_is_not_lost(loop):
    burst_started = time.monotonic()
    while time.monotonic() - burst_started < 1.5:  # 150 wake-ups, one every 10 ms
        local_wakeup.set()
        time.sleep(0.01)
    last_wakeup = time.monotonic()  # taken before the last wake-up: a cycle after it answers it
    local_wakeup.set()
    wait_for(lambda: loop.starts[-1] > last_wakeup, 5, "a cycle after the last wake-up")
    cycles = [start for start in loop.starts if start >= burst_started]
    # 1.5 s of burst with a 0.3 s rest: about one cycle per 0.3 s, not 150
    assert 3 <= len(cycles) <= 8, cycles
    gaps = [later - earlier for earlier, later in zip(cycles, cycles[1:], strict=False)]
    assert min(gaps) >= 0.29
    assert loop.starts[-1] - last_wakeup < 0.3 + 0.2
