"""A node process's database calls survive a connection the other side closed.

PostgreSQL restarted, `pg_terminate_backend`, a proxy's idle timeout: the thread's connection is
dead, but Django finds out only when a query fails (OperationalError, or InterfaceError once psycopg
knows it is closed) and, with persistent connections, would hand the same dead one out again.
`retrying_once` runs a call on a usable connection and, when the connection fails under it, closes
it and runs the call once more on a new one. Only for idempotent calls (a reconcile pass, a
heartbeat: every action they take is fenced by attempt and state), and never inside a transaction,
whose work would be half lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, close_old_connections, connection

log = logging.getLogger("tidepool.db")

T = TypeVar("T")


def replace_connection() -> None:
    """Drop this thread's connection (dead or not); the next query opens a new one."""
    try:
        connection.close()
    except Exception:  # closing a connection the server already dropped may fail too: it is gone either way
        connection.connection = None


def retrying_once(what: str, call: Callable[[], T]) -> T:
    """`call()`, and once more on a new connection if the database connection failed under it."""
    close_old_connections()
    try:
        return call()
    except (OperationalError, InterfaceError) as error:
        if connection.in_atomic_block:
            raise
        log.warning("%s: the database connection failed (%s); retrying once on a new connection", what,
                    str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__)
        replace_connection()
        return call()
