"""Websocket consumers behind the live pages.

Group messages (scheduler.publish) only say *which* jobs changed. A consumer never forwards
them: it re-reads through the selectors, as the user it serves, and sends what that user may
see. Every connection starts with a snapshot, and the browser reconnects with backoff, so a
message lost while disconnected never leaves a wrong screen.

Close codes: 4401 not logged in, 4403 not allowed (e.g. another workspace's job).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.tables import (
    JobListQuery,
    build_page,
    page_ids,
    render_pager,
    render_row,
    render_rows,
    visible_rows,
)
from console.views import render_job_live
from scheduler.publish import CLUSTER_GROUP, jobs_group
from scheduler.selectors import cluster_fingerprint, job_detail, job_for_user, user_workspaces
from scheduler.states import FINAL_JOB_STATUSES

log = logging.getLogger("tidepool.console.live")


class _Flight:
    """One read in flight: its result to come, when it began on the database thread (None while
    queued) and, for a read of changed rows, the job ids it reads (grown by joiners until it begins)."""

    def __init__(self, future: asyncio.Future, ids: frozenset[int] = frozenset()) -> None:
        self.future = future
        self.started: float | None = None
        self.ids = set(ids)
        self.lock = threading.Lock()  # the event loop adds ids while the database thread may begin


class SharedReads:
    """Identical re-reads in one process run once: the sockets of one user watching the same page all
    get a change notice at the same moment and would each run the same queries and renders, one after
    another on the process's database thread (200 sockets: seconds of queueing).

    A read returns the message as JSON text, encoded once on the database thread: every socket
    that shares the read sends the same text, instead of each encoding the page again on the event
    loop (200 sockets: 200 encodings of up to 50 rendered rows per change).

    A socket joins a read in flight if that read has not begun yet (it waits on the database thread
    behind others) or began after the socket's own latest notice, so it never gets a result older
    than the change it was told about; results are never kept. Joining reads that still wait in the
    queue is what keeps a burst (every browser reconnecting after a restart, a change seen by 100
    sockets) at a few reads when the database thread is busy.
    """

    def __init__(self, run_sync: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None) -> None:
        # How a read runs: on the process's database thread (channels), unless a test says otherwise.
        self._run_sync = run_sync or (lambda read: database_sync_to_async(read)())
        self._flights: dict[Any, _Flight] = {}

    async def read(self, key: Any, not_before: float, read: Callable[[], Any]) -> Any:
        flight = self._flights.get(key)
        if flight is not None and not flight.future.done() and (flight.started is None
                                                                 or flight.started >= not_before):
            return await asyncio.shield(flight.future)
        flight = self._flights[key] = _Flight(asyncio.get_running_loop().create_future())

        def timed_read() -> Any:
            flight.started = time.monotonic()  # before the first query: later notices can no longer join
            return read()

        return await self._run(key, flight, timed_read)

    async def read_changes(self, key: Any, not_before: float, ids: frozenset[int],
                           read: Callable[[frozenset[int]], Any]) -> Any:
        """`read(ids)` shared by sockets told of different jobs: a read still queued takes the joiner's
        ids too (its result then covers every joiner), one already begun is joined only by a socket
        whose notice came before it began and whose ids it reads. One read per change, not one per
        set of notices a socket happened to gather within its coalescing window."""
        flight = self._flights.get(key)
        if flight is not None and not flight.future.done():
            with flight.lock:
                if flight.started is None:
                    flight.ids.update(ids)
                    joined = True
                else:
                    joined = flight.started >= not_before and ids <= flight.ids
            if joined:
                return await asyncio.shield(flight.future)
        flight = self._flights[key] = _Flight(asyncio.get_running_loop().create_future(), ids)

        def timed_read() -> Any:
            with flight.lock:  # no joiner adds an id once the read has taken them
                flight.started = time.monotonic()
                taken = frozenset(flight.ids)
            return read(taken)

        return await self._run(key, flight, timed_read)

    async def _run(self, key: Any, flight: _Flight, timed_read: Callable[[], Any]) -> Any:
        try:
            result = await self._run_sync(timed_read)
        except BaseException as error:
            flight.future.set_exception(error)
            flight.future.exception()  # retrieved: joiners re-raise it, nobody logs it as unhandled
            raise
        else:
            flight.future.set_result(result)
            return result
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]


shared_reads = SharedReads()


def encode(message: dict[str, Any]) -> str:
    """A message as the socket sends it: json.dumps, as AsyncJsonWebsocketConsumer.encode_json does
    (that one is a coroutine; this runs in a shared read, on the database thread)."""
    return json.dumps(message)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Authentication, group membership, and coalescing of bursts of change notices.

    The scheduler may announce the same jobs several times in one cycle (admitted, then each
    pod running); notices arriving within `coalesce_s` are answered with one re-read.
    """

    # One cycle (or one request) publishes its notices together, right after its commit, so they
    # arrive within a few milliseconds of each other: 20 ms gathers them without adding much to
    # every update's delay (docs/benchmarks.md: the fan-out figure counts it).
    coalesce_s = 0.02

    async def connect(self) -> None:
        user = self.scope.get("user")
        self._joined: list[str] = []
        self._pending: set[int] = set()
        self._noticed_at = 0.0  # when the latest change notice arrived (monotonic)
        self._flusher: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)  # before accept: the handshake is refused
            return
        self.user = user
        if not await database_sync_to_async(self.authorize)():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        for group in await database_sync_to_async(self.groups_for_user)():
            await self.channel_layer.group_add(group, self.channel_name)
            self._joined.append(group)
        self._noticed_at = time.monotonic()  # the snapshot reads nothing older than the membership
        await self.accept()
        await self.send_snapshot()

    async def disconnect(self, code: int) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
        for group in self._joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self._joined = []

    # Change notices (group messages) need no database in their handlers: they only mark what to
    # re-read. Channels' `dispatch` runs `close_old_connections` on the process's one database thread
    # before every handler (channels ≥ 4.2): with 100 sockets a notice queued 100 thread hops there,
    # ahead of the shared read they were waiting for (measured: docs/benchmarks.md). The re-reads go
    # through database_sync_to_async, which closes stale connections itself, before and after.
    notice_types = frozenset({"jobs.changed", "cluster.changed"})

    async def dispatch(self, message: dict[str, Any]) -> None:
        if message.get("type") in self.notice_types:
            handler = getattr(self, get_handler_name(message), None)
            if handler is not None:
                await handler(message)
                return
        await super().dispatch(message)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "snapshot":
            self._noticed_at = time.monotonic()
            await self.on_snapshot_request(content)
            await self.send_snapshot()

    # Subclasses ------------------------------------------------------------------------------

    def authorize(self) -> bool:
        return True

    def groups_for_user(self) -> list[str]:
        raise NotImplementedError

    async def on_snapshot_request(self, content: dict[str, Any]) -> None:
        """A client asking for a snapshot may also change what it watches."""

    async def send_snapshot(self) -> None:
        raise NotImplementedError

    async def push_changes(self, job_ids: set[int]) -> None:
        raise NotImplementedError

    # Coalescing ------------------------------------------------------------------------------

    def notice(self, job_ids: Iterable[Any] = ()) -> None:
        self._noticed_at = time.monotonic()
        self._pending.update(i for i in job_ids if isinstance(i, int))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(self.coalesce_s)
        while True:
            ids, self._pending = self._pending, set()
            try:
                async with self._send_lock:
                    await self.push_changes(ids)
            except Exception:  # keep the socket: the next notice or reconnect re-syncs the page
                log.exception("live update failed for %s", type(self).__name__)
            if not self._pending:
                return


def _workspace_job_groups(user: Any) -> list[str]:
    return [jobs_group(pk) for pk in user_workspaces(user=user).values_list("pk", flat=True)]


class JobListConsumer(LiveConsumer):
    """The job list: snapshots of the page the browser shows, then the rows that changed on it.

    The page is the one named by the socket URL's query string (same parameters as the page:
    filters, sort, page). When a change alters which jobs are on that page (a new job, a status
    filter no longer matching), the whole page is sent again; otherwise only the changed rows.
    """

    def groups_for_user(self) -> list[str]:
        # Staff see every workspace; user_workspaces already answers that.
        return _workspace_job_groups(self.user)

    async def connect(self) -> None:
        self.query = JobListQuery.from_query_string(self.scope.get("query_string", b"").decode("latin-1"))
        self._sent: tuple[list[int], int] | None = None
        await super().connect()

    async def on_snapshot_request(self, content: dict[str, Any]) -> None:
        if isinstance(content.get("query"), str):
            self.query = JobListQuery.from_query_string(content["query"].lstrip("?"))

    async def jobs_changed(self, event: dict[str, Any]) -> None:
        self.notice(event.get("job_ids") or ())

    async def send_snapshot(self) -> None:
        async with self._send_lock:
            await self._send_page()

    async def _send_page(self) -> None:
        text, sent = await shared_reads.read(
            ("page", self.user.pk, self.query), self._noticed_at, self._snapshot
        )
        self._sent = sent
        await self.send(text_data=text)

    def _snapshot(self) -> tuple[str, tuple[list[int], int]]:
        page = build_page(user=self.user, query=self.query)
        message = {
            "type": "snapshot",
            "rows": render_rows(page),
            "pager": render_pager(page),
            "ids": page.ids,
            "total": page.total,
        }
        return encode(message), (page.ids, page.total)

    async def push_changes(self, job_ids: set[int]) -> None:
        # The page's ids and the changed rows on it in one trip to the database thread: the usual
        # change (a job on the page moved on) then costs one read, shared by this user's sockets.
        current, rows = await shared_reads.read_changes(
            ("changes", self.user.pk, self.query), self._noticed_at, frozenset(job_ids), self._page_changes,
        )
        if current != self._sent:
            await self._send_page()
            return
        if rows:
            await self.send(text_data=rows)

    def _page_changes(self, job_ids: frozenset[int]) -> tuple[tuple[list[int], int], str | None]:
        """The page's (ids, total) now, and the rows message of the jobs on it that changed (None: none)."""
        current = page_ids(user=self.user, query=self.query)
        on_page = [pk for pk in current[0] if pk in job_ids]
        if not on_page:
            return current, None
        rows = [{"id": job.pk, "html": render_row(job)} for job in visible_rows(user=self.user, job_ids=on_page)]
        return current, encode({"type": "rows", "rows": rows}) if rows else None


class JobDetailConsumer(LiveConsumer):
    """One job's page: status, pods, events and checkpoint information, re-rendered on each change."""

    def authorize(self) -> bool:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        job = job_for_user(user=self.user, job_id=self.job_id)
        self.workspace_id = job.workspace_id if job is not None else None
        return job is not None

    def groups_for_user(self) -> list[str]:
        # The job's workspace group, filtered here: one notice per workspace and cycle instead of one
        # group per job (a cycle that moves 1,000 queue positions sends one message, not 1,001).
        return [jobs_group(self.workspace_id)]

    async def jobs_changed(self, event: dict[str, Any]) -> None:
        if self.job_id in (event.get("job_ids") or ()):
            self.notice([self.job_id])

    async def send_snapshot(self) -> None:
        async with self._send_lock:
            await self.push_changes({self.job_id})

    async def push_changes(self, job_ids: set[int]) -> None:
        text = await shared_reads.read(
            ("detail", self.user.pk, self.job_id), self._noticed_at, self._render
        )
        if text is None:  # no longer visible (e.g. removed from the workspace)
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.send(text_data=text)

    def _render(self) -> str | None:
        job = job_detail(user=self.user, job_id=self.job_id)
        if job is None:
            return None
        return encode({
            "type": "snapshot",
            "html": render_job_live(job),
            "status": job.status,
            "final": job.status in FINAL_JOB_STATUSES,
        })


class ClusterConsumer(LiveConsumer):
    """Nodes, quotas and the dashboard: a "changed" notice, and the page re-fetches its fragment over
    HTTP (through the same permission-checked views). No data travels on this socket.

    Quota and node changes come on the `cluster` group. Job notices matter too (a finished job
    frees its GPUs), but most of them only report training progress: those are filtered out by
    comparing a fingerprint of the pods and job statuses before saying "changed".
    """

    coalesce_s = 1.0

    def groups_for_user(self) -> list[str]:
        return [CLUSTER_GROUP, *_workspace_job_groups(self.user)]

    async def connect(self) -> None:
        self._fingerprint: int | None = None
        self._cluster_notice = False
        await super().connect()

    async def cluster_changed(self, event: dict[str, Any]) -> None:
        self._cluster_notice = True
        self.notice()

    async def jobs_changed(self, event: dict[str, Any]) -> None:
        self.notice()

    async def send_snapshot(self) -> None:
        # The page's HTML is the snapshot: "ready" tells a reconnected page to re-fetch it.
        self._fingerprint = await database_sync_to_async(cluster_fingerprint)()
        await self.send_json({"type": "ready"})

    async def push_changes(self, job_ids: set[int]) -> None:
        fingerprint = await database_sync_to_async(cluster_fingerprint)()
        if fingerprint == self._fingerprint and not self._cluster_notice:
            return
        self._fingerprint, self._cluster_notice = fingerprint, False
        await self.send_json({"type": "changed"})
