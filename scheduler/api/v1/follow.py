"""`?follow=1` on a job's log: the tail (or what follows `offset`), then every append, until the pod exits.

An async iterator, so the ASGI server streams each piece as it comes (a sync iterator would be read
to its end before the first byte is sent). Reads go through scheduler.api.logs like the JSON answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async

from scheduler.api.logs import LogUnavailable, follow_window, tail_window
from scheduler.models import Pod
from scheduler.states import LIVE_POD_STATUSES

POLL_SECONDS = 0.5
UNAVAILABLE_RETRIES = 20  # a node that does not answer for this many polls ends the stream


def _is_live(pod_id: int) -> bool:
    return Pod.objects.filter(pk=pod_id, status__in=LIVE_POD_STATUSES).exists()


async def follow_log(pod: Pod | None, *, offset: int | None, lines: int,
                     poll_s: float = POLL_SECONDS) -> AsyncIterator[str]:
    if pod is None:
        return
    failures = 0
    first = True
    while True:
        live = await sync_to_async(_is_live)(pod.pk)  # before reading, so the last append is never missed
        try:
            if first and offset is None:
                window = await sync_to_async(tail_window)(pod, lines)
            else:
                window = await sync_to_async(follow_window)(pod, offset or 0)
            failures = 0
        except LogUnavailable as error:
            failures += 1
            if failures >= UNAVAILABLE_RETRIES:
                yield f"\n[tidepool: {error}]\n"
                return
            await asyncio.sleep(poll_s)
            continue
        first = False
        offset = window.offset
        if window.text:
            yield window.text
        if not live:
            return
        await asyncio.sleep(poll_s)
