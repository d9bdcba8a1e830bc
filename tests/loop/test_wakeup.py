"""The scheduler's Redis wake-up listener survives its start and a Redis restart, and stops cleanly.

A private redis-server on a free port (never the shared one), stopped and started again.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time

import pytest
import redis

from scheduler.loop.wakeup import WakeupListener
from scheduler.publish import WAKEUP_CHANNEL, local_wakeup
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_redis(port: int, tmp_path) -> subprocess.Popen:
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(tmp_path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: redis.Redis(port=port).ping(), 10, "redis-server to answer")
    return process


def woken_by(port: int, listener: WakeupListener) -> bool:
    local_wakeup.clear()
    before = listener.received
    redis.Redis(port=port).publish(WAKEUP_CHANNEL, b"1")
    return local_wakeup.wait(5) and listener.received > before


@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server")
def test_the_listener_forwards_wakeups_reconnects_after_a_redis_restart_and_stops(tmp_path):
    port = free_port()
    server = start_redis(port, tmp_path)
    stop = threading.Event()
    listener = WakeupListener(f"redis://127.0.0.1:{port}/0", stop).start()
    try:
        assert listener.connected.wait(10), "the listener never subscribed"
        assert woken_by(port, listener)

        server.terminate()
        server.wait(10)
        wait_for(lambda: not listener.connected.is_set(), 15, "the listener to notice Redis is gone")
        time.sleep(1)
        server = start_redis(port, tmp_path)
        assert listener.connected.wait(15), "the listener did not reconnect"
        wait_for(lambda: woken_by(port, listener), 10, "a wake-up after the reconnect")
    finally:
        listener.stop()
        server.terminate()
        server.wait(10)
    assert not listener._thread.is_alive()


def test_run_forever_stops_on_its_event_without_error(settings, transactional_db, tmp_path):
    """SIGTERM sets the event: the loop releases its lock and stops its listener (no AttributeError)."""
    from scheduler.loop.runner import run_forever

    if not shutil.which("redis-server"):
        pytest.skip("needs redis-server")
    port = free_port()
    server = start_redis(port, tmp_path)
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run_forever(stop, interval=0.2)
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    thread = threading.Thread(target=target)
    try:
        thread.start()
        time.sleep(1)
        stop.set()
        local_wakeup.set()
        thread.join(10)
    finally:
        server.terminate()
        server.wait(10)
    assert not thread.is_alive() and not errors, errors
