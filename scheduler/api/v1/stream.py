"""GET /api/v1/jobs/watch/ — job changes as server-sent events (docs/api.md, "Live changes").

The same notices the console's websockets get (scheduler.publish: "jobs of workspace W changed")
are re-read through the selectors as the caller, so an event never shows a job the caller may not
see. The stream opens with one `job` event per matching job (the snapshot) and a `synced` event,
then one `job` event per change;
a comment line every 15 s keeps proxies from closing it. Authentication: a bearer token or the
session, as the rest of v1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from rest_framework.renderers import JSONRenderer

from scheduler.api.v1.auth import bearer_secret
from scheduler.api.v1.serializers import JobSerializer
from scheduler.publish import jobs_group
from scheduler.selectors import STATUS_GROUPS, job_list, user_workspaces, with_row_data
from scheduler.selectors.jobs import JobFilters
from scheduler.services.tokens import TokenRejected, token_authenticate
from scheduler.states import JOB_STATUS_VALUES
from scheduler.validation import parse_id

KEEPALIVE_SECONDS = 15.0


def _token_user(secret: str) -> Any:
    return token_authenticate(secret).user


async def _user(request: HttpRequest) -> tuple[Any, str]:
    """(user or None, why not)."""
    secret = bearer_secret(request.headers.get("Authorization", ""))
    if secret is not None:
        try:
            return await sync_to_async(_token_user)(secret), ""
        except TokenRejected as error:
            return None, str(error)
    user = await request.auser()
    return (user, "") if user.is_authenticated else (None, "Authentication credentials were not provided.")


def _jobs(user: Any, ids: set[int] | None, job_id: int | None, status: str) -> list[dict[str, Any]]:
    jobs = job_list(user=user, filters=JobFilters(status=status))
    if ids is not None:
        jobs = jobs.filter(pk__in=ids)
    if job_id is not None:
        jobs = jobs.filter(pk=job_id)
    return json.loads(JSONRenderer().render(JobSerializer(with_row_data(jobs)[:500], many=True).data))


def _groups(user: Any) -> list[str]:
    return [jobs_group(pk) for pk in user_workspaces(user=user).values_list("pk", flat=True)]


def _event(data: dict[str, Any], seq: int) -> str:
    return f"id: {seq}\nevent: job\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def watch(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return JsonResponse({"detail": f'Method "{request.method}" not allowed.'}, status=405)
    user, why = await _user(request)
    if user is None:
        response = JsonResponse({"detail": why}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="tidepool"'
        return response
    raw_job = request.GET.get("job", "")
    job_id = parse_id(raw_job) if raw_job else None  # ASCII digits: "²".isdigit() is true and int("²") raises
    if raw_job and job_id is None:
        return JsonResponse({"job": [f"job is a job id (ASCII digits), got {raw_job[:40]!r}."]}, status=400)
    status = request.GET.get("status", "" if job_id else "active")  # the snapshot's filter (job_list's rules)
    if status and status not in STATUS_GROUPS and status not in JOB_STATUS_VALUES:
        return JsonResponse({"status": [f"Unknown status {status[:40]!r}: one of {', '.join(JOB_STATUS_VALUES)}, "
                                        f"or a group: {', '.join(STATUS_GROUPS)}."]}, status=400)
    response = StreamingHttpResponse(_stream(user, job_id, status), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def _stream(user: Any, job_id: int | None, status: str) -> AsyncIterator[str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    groups = await sync_to_async(_groups)(user)
    for group in groups:
        await layer.group_add(group, channel)
    seq = 0
    try:
        yield "retry: 2000\n\n"
        for data in await sync_to_async(_jobs)(user, None, job_id, status):
            seq += 1
            yield _event(data, seq)
        yield "event: synced\ndata: {}\n\n"  # the snapshot is complete; changes follow
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            ids = {i for i in message.get("job_ids", []) if isinstance(i, int)}
            if job_id is not None:
                ids &= {job_id}
            if not ids:
                continue
            await asyncio.sleep(0.1)  # let a burst of notices for one cycle settle into one re-read
            for data in await sync_to_async(_jobs)(user, ids, job_id, ""):
                seq += 1
                yield _event(data, seq)
    finally:
        for group in groups:
            await layer.group_discard(group, channel)
