"""Reasons and events never name a job outside the reader's workspaces (issue 11, Must show).

Bob's idle-only job borrows the whole pool; Alice's job reclaims it. As Bob — a member of another
workspace — no page, API answer or websocket frame names Alice's job or any internal `name#id` key,
reasons and events included; Alice is not told the name of Bob's job she waits for. Staff read the
names.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application
from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job
from scheduler.publish import register_server_loop
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.states import LIVE_POD_STATUSES, JobStatus
from tests.conftest import RecordingExecutor
from tests.factories import World, build_world

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "vision-secret-claim"
KEY = re.compile(r"[a-z0-9]#\d")  # an engine key, name#id


def _borrow_then_reclaim(world: World) -> tuple[Job, Job]:
    borrower = job_submit(user=world.bob, workspace=world.language, quota=world.team_language, name="lang-borrow",
                          command="train", idle_mode="only", fault_tolerance=True,
                          roles=[{"name": "worker", "pod_count": 2, "gpus": 8, "cpu": 8, "memory_gib": 64}])
    schedule_once()
    for pod in borrower.pods.all():
        pod_running(pod_id=pod.pk, attempt=pod.attempt)
    claimer = job_submit(user=world.alice, workspace=world.vision, quota=world.team_vision, name=SECRET,
                         command="train", roles=[{"name": "worker", "pod_count": 1, "gpus": 8, "cpu": 8,
                                                  "memory_gib": 64}])
    schedule_once()
    borrower.refresh_from_db()
    claimer.refresh_from_db()
    assert borrower.status == JobStatus.PREEMPTED and claimer.nominated_nodes
    return borrower, claimer


def _victims_exit(borrower: Job) -> None:
    for pod in borrower.pods.filter(status__in=LIVE_POD_STATUSES):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="preempted")
    schedule_once()


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _bob_reads(world: World, borrower: Job) -> list[str]:
    bob = _client(world.bob)
    pages = ("/jobs/", f"/jobs/{borrower.pk}/", "/", "/nodes/", "/quotas/", "/jobs/?status=Preempted",
             "/nodes/?fragment=1", "/?fragment=1")
    apis = ("/api/v1/jobs/", f"/api/v1/jobs/{borrower.pk}/", "/api/v1/nodes/")
    responses = [bob.get(path) for path in (*pages, *apis)]
    assert [r.status_code for r in responses] == [200] * len(responses)
    return [r.content.decode() for r in responses[: len(pages)]] + [json.dumps(r.json()) for r in responses[len(pages):]]


def _assert_names_nothing_of_alice(texts: list[str]) -> None:
    for text in texts:
        assert SECRET not in text
        assert not KEY.search(text), KEY.search(text)


def test_pages_and_api_name_no_other_workspaces_job(world: World, recording_executor) -> None:
    borrower, claimer = _borrow_then_reclaim(world)
    texts = _bob_reads(world, borrower)
    _assert_names_nothing_of_alice(texts)
    detail = json.loads(texts[-2])
    assert detail["waiting_reason"] == "reclaimed for a queued job of quota team-vision"
    assert "reclaimed for a queued job of quota team-vision" in [e["reason"] for e in detail["events"]]
    assert detail["preemptions"][0]["reason"] == "reclaimed for a queued job of quota team-vision"
    assert "reclaimed for a queued job of quota team-vision" in texts[1]  # the job page, its events

    # Alice waits for Bob's job to exit: she is told how many, not which.
    alice_view = _client(world.alice).get(f"/api/v1/jobs/{claimer.pk}/").json()
    assert alice_view["waiting_reason"] == "waiting for 1 preempted job to exit"
    assert "lang-borrow" not in json.dumps(alice_view)
    assert "lang-borrow" not in _client(world.alice).get(f"/jobs/{claimer.pk}/").content.decode()

    # Staff read the names, never the internal keys.
    staff = _client(world.admin)
    assert staff.get(f"/api/v1/jobs/{borrower.pk}/").json()["waiting_reason"] == (
        f"reclaimed by quota team-vision for job {SECRET}")
    assert staff.get(f"/api/v1/jobs/{claimer.pk}/").json()["waiting_reason"] == "waiting for 1 job(s) to exit: lang-borrow"
    assert f"for job {SECRET}" in staff.get(f"/jobs/{borrower.pk}/").content.decode()

    # Once the victim has exited: the borrower is queued again, and still nothing of Alice's shows.
    _victims_exit(borrower)
    borrower.refresh_from_db()
    assert borrower.resumes_automatically
    _assert_names_nothing_of_alice(_bob_reads(world, borrower))


@pytest.fixture
async def channel_loop() -> AsyncIterator[list[WebsocketCommunicator]]:
    register_server_loop(asyncio.get_running_loop())
    await get_channel_layer().flush()
    opened: list[WebsocketCommunicator] = []
    yield opened
    for communicator in opened:
        await communicator.disconnect()


async def _frames(socket: WebsocketCommunicator, quiet_s: float = 0.8) -> list[str]:
    frames = []
    while not await socket.receive_nothing(timeout=quiet_s):
        frames.append(await socket.receive_from(timeout=1))
    return frames


async def test_websocket_frames_name_no_other_workspaces_job(transactional_db, channel_loop) -> None:
    world = await database_sync_to_async(build_world)()
    previous = set_executor(RecordingExecutor())
    try:
        session = await database_sync_to_async(lambda: _client(world.bob).cookies["sessionid"].value)()
        headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", f"sessionid={session}".encode())]
        listing = WebsocketCommunicator(application, "/ws/jobs/", headers=headers)
        assert (await listing.connect(timeout=5))[0]
        channel_loop.append(listing)
        cluster = WebsocketCommunicator(application, "/ws/cluster/", headers=headers)
        assert (await cluster.connect(timeout=5))[0]
        channel_loop.append(cluster)
        frames = await _frames(listing)
        borrower, _claimer = await database_sync_to_async(_borrow_then_reclaim)(world)
        detail = WebsocketCommunicator(application, f"/ws/jobs/{borrower.pk}/", headers=headers)
        assert (await detail.connect(timeout=5))[0]
        channel_loop.append(detail)
        frames += await _frames(listing) + await _frames(detail)
        await database_sync_to_async(_victims_exit)(borrower)
        frames += await _frames(listing) + await _frames(detail) + await _frames(cluster, 0.2)
    finally:
        set_executor(previous)
    text = "\n".join(frames)
    assert "Preempted" in text and "reclaimed for a queued job of quota team-vision" in text
    assert "resumes automatically" in text
    _assert_names_nothing_of_alice(frames)
