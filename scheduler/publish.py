"""Live-update broadcasts, sent after commit (never from signals: a rolled-back write is never announced).

Groups:
- `jobs.ws.<workspace id>`: jobs of that workspace changed ({"type": "jobs.changed", "job_ids": [...]});
  a job's page listens here too and picks its own id (one message per workspace, however many jobs)
- `cluster`: quotas / nodes / allocation changed

Consumers re-read through the selectors (which apply permissions) instead of trusting the payload.

In the embedded setup the channel layer lives in memory inside the console's event loop, so a
publish from another thread (the scheduler loop, the local executor) is handed to that loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer
from django.conf import settings
from django.db import transaction

log = logging.getLogger("tidepool.publish")

_server_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def register_server_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """Called once by the ASGI app: the loop where the in-memory channel layer's consumers live."""
    global _server_loop
    with _lock:
        _server_loop = loop


_publishing: tuple[int, asyncio.AbstractEventLoop, object, object] | None = None  # pid, loop, layer, made for


def _publisher(layer: object) -> tuple[asyncio.AbstractEventLoop, object]:
    """A process without a server loop (run_scheduler, node workers, commands) publishes through a
    channel layer of its own on an event loop of its own, in a daemon thread, for its whole life:
    the Redis layer keeps its connections per loop, so a new loop per publish (async_to_sync) would
    connect to Redis every time. Its own layer object, so that no other loop ever closes (or meets)
    the connections of this one. A forked child makes its own; so does a process whose channel layer
    was replaced (settings changed, as tests do)."""
    global _publishing
    with _lock:
        if _publishing is None or _publishing[0] != os.getpid() or _publishing[1].is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tidepool-publish", daemon=True).start()
            _publishing = (os.getpid(), loop, channel_layers.make_backend(DEFAULT_CHANNEL_LAYER), layer)
        elif _publishing[3] is not layer:
            _publishing = (*_publishing[:2], channel_layers.make_backend(DEFAULT_CHANNEL_LAYER), layer)
        return _publishing[1], _publishing[2]


PUBLISH_WAIT_S = 5.0  # a publish from a thread waits this long for Redis, then gives up (best effort)


def _send_many(messages: list[tuple[str, dict]]) -> None:
    """Deliver (group, message) pairs in one hop to the event loop that owns the channel layer."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return

    async def deliver(through=layer) -> None:
        for group, message in messages:
            await through.group_send(group, message)

    loop = _server_loop
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    try:
        if loop is not None and loop.is_running():
            if running is loop:
                loop.create_task(deliver())
            else:
                asyncio.run_coroutine_threadsafe(deliver(), loop)
        elif running is not None:
            running.create_task(deliver())
        elif isinstance(layer, InMemoryChannelLayer):  # its consumers would be in this process: none yet
            async_to_sync(deliver)()
        else:
            publish_loop, own_layer = _publisher(layer)
            asyncio.run_coroutine_threadsafe(deliver(own_layer), publish_loop).result(PUBLISH_WAIT_S)
    except Exception:  # a broadcast is best effort: clients re-fetch on reconnect
        log.exception("publish of %d message(s) failed", len(messages))


def _send(group: str, message: dict) -> None:
    _send_many([(group, message)])


def jobs_group(workspace_id: int) -> str:
    return f"jobs.ws.{workspace_id}"


CLUSTER_GROUP = "cluster"


def publish_jobs_changed(changes: Iterable[tuple[int, int]]) -> None:
    """changes: (job id, workspace id) pairs; one message per workspace (channels-redis pays a round
    trip and a script per group send, so a cycle that touches a long queue must not send per job)."""
    by_workspace: dict[int, list[int]] = {}
    for job_id, workspace_id in changes:
        by_workspace.setdefault(workspace_id, []).append(job_id)
    messages: list[tuple[str, dict]] = []
    for workspace_id, job_ids in by_workspace.items():
        ids = sorted(set(job_ids))
        messages.append((jobs_group(workspace_id), {"type": "jobs.changed", "job_ids": ids}))
    _send_many(messages)


def publish_jobs_changed_on_commit(changes: Iterable[tuple[int, int]]) -> None:
    pairs = list(changes)
    if pairs:
        transaction.on_commit(lambda: publish_jobs_changed(pairs))


def publish_cluster_change_on_commit() -> None:
    transaction.on_commit(lambda: _send(CLUSTER_GROUP, {"type": "cluster.changed"}))


# Scheduler wake-ups: a submission, a stop or a pod exit asks the loop for a cycle now. In one
# process (embedded) a threading.Event wakes the loop thread; across processes the loop also
# listens on a Redis channel (scheduler/loop/wakeup.py) and polls every TIDEPOOL_SCHEDULER_INTERVAL s.
WAKEUP_CHANNEL = "tidepool:scheduler:wakeup"
local_wakeup = threading.Event()
_redis_client = None


def _redis():
    global _redis_client
    if _redis_client is None:
        import redis

        _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
    return _redis_client


def wake_scheduler() -> None:
    local_wakeup.set()
    if settings.REDIS_URL:
        try:
            _redis().publish(WAKEUP_CHANNEL, b"1")
        except Exception:  # the loop polls anyway; a lost wake-up only costs one interval
            log.warning("could not publish scheduler wake-up", exc_info=True)


def wake_scheduler_on_commit() -> None:
    transaction.on_commit(wake_scheduler)
