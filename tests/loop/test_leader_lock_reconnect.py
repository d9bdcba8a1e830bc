"""The scheduler's leader lock survives PostgreSQL ending its session (pg_terminate_backend, a
restart, a failover): the loop notices at its next check, gives leadership up without crashing and
takes the lock again on a new connection (scheduler/loop/leader.py)."""

from __future__ import annotations

import threading

import pytest

from scheduler.loop.leader import SCHEDULER_LEADER_LOCK, LeaderLock

pytestmark = pytest.mark.django_db(transaction=True)


def _lock_holders(connection) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted",
                       [SCHEDULER_LEADER_LOCK])
        return [row[0] for row in cursor.fetchall()]


def _terminate(connection, pids: list[int]) -> None:
    with connection.cursor() as cursor:
        for pid in pids:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        # pg_terminate_backend only signals: wait until the backends are gone.
        for _ in range(100):
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            if cursor.fetchone()[0] == 0:
                return
            threading.Event().wait(0.05)
    raise AssertionError(f"backends {pids} still there")


def test_a_terminated_lock_session_is_noticed_and_the_lock_taken_again(postgres_db) -> None:
    lock = LeaderLock()
    try:
        assert lock.acquire()
        first = _lock_holders(postgres_db)
        assert len(first) == 1

        _terminate(postgres_db, first)

        assert lock.still_held() is False  # noticed, not raised
        assert lock.acquire()  # what run_forever does next, on a fresh connection
        again = _lock_holders(postgres_db)
        assert len(again) == 1 and again != first
        assert lock.still_held()
    finally:
        lock.release()
    assert _lock_holders(postgres_db) == []


def test_the_loop_keeps_leading_after_its_sessions_are_terminated(postgres_db, settings) -> None:
    """run_forever itself: every backend of the loop (the lock's and the cycle's) is terminated while
    it leads; it goes on scheduling and holds the lock again."""
    from scheduler.loop import runner

    settings.REDIS_URL = ""  # no wake-up listener: the loop runs on its interval
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.run_forever(stop, interval=0.2, min_gap=0.0)
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)
        finally:
            from django.db import connection

            connection.close()  # this thread's: the test database is dropped afterwards

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if _lock_holders(postgres_db):
                break
            threading.Event().wait(0.05)
        first = _lock_holders(postgres_db)
        assert len(first) == 1, "the loop did not take the leader lock"
        with postgres_db.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            own = cursor.fetchone()[0]
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s",
                           [own])
            others = [row[0] for row in cursor.fetchall()]
        _terminate(postgres_db, others)

        for _ in range(100):
            holders = _lock_holders(postgres_db)
            if holders and holders != first:
                break
            threading.Event().wait(0.05)
        assert holders and holders != first, "the loop did not take the lock again"
        assert thread.is_alive() and not errors, errors
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors
