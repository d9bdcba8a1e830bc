"""Leader election: one scheduler loop per database (PostgreSQL advisory lock; SQLite: one process)."""

from __future__ import annotations

import logging

from django.db import connection

log = logging.getLogger("tidepool.scheduler")

SCHEDULER_LEADER_LOCK = 727_001  # PostgreSQL advisory-lock key of the scheduler leader


class LeaderLock:
    """PostgreSQL session advisory lock on a connection of its own; elsewhere the single process leads.

    Django closes its connections between cycles (CONN_MAX_AGE), which would drop a session
    lock, so the lock lives on a dedicated connection that stays open while this process leads.
    If that connection breaks, leadership is given up and has to be won again.
    """

    def __init__(self) -> None:
        self.held = False
        self._conn = None

    def acquire(self) -> bool:
        if connection.vendor != "postgresql":
            self.held = True
            return True
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connection.Database.connect(**connection.get_connection_params(), autocommit=True)
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", [SCHEDULER_LEADER_LOCK]).fetchone()
            self.held = bool(row[0])
        except Exception:
            log.exception("could not reach PostgreSQL for the leader lock")
            self._drop()
        return self.held

    def still_held(self) -> bool:
        if not self.held or connection.vendor != "postgresql":
            return self.held
        try:
            self._conn.execute("SELECT 1")
        except Exception:
            log.warning("the leader lock's connection broke: leadership lost")
            self._drop()
        return self.held

    def _drop(self) -> None:
        self.held = False
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def release(self) -> None:
        if self.held and self._conn is not None:
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", [SCHEDULER_LEADER_LOCK])
            except Exception:
                pass
        self._drop()
