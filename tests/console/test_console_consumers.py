"""Websocket consumers through the real ASGI application (origin check, session auth, routing).

Each test connects as a browser would: with the session cookie of a logged-in user and an
Origin header. Changes are made through the services, whose after-commit broadcasts reach the
consumers over the in-memory channel layer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers, get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application
from scheduler.models import Job
from scheduler.publish import jobs_group, publish_jobs_changed, register_server_loop
from scheduler.services.jobs import job_stop
from scheduler.states import JobStatus
from tests.factories import JobFactory, World, build_world

pytestmark = pytest.mark.django_db(transaction=True)

GOOD_ORIGIN = b"http://127.0.0.1"
QUIET_S = 0.6  # longer than the consumers' coalescing delay


@pytest.fixture
def world_tx(transactional_db) -> World:
    return build_world()


@pytest.fixture
def cookie(world_tx: World) -> Callable[[object], bytes]:
    def make(user: object) -> bytes:
        client = Client()
        client.force_login(user)
        return f"sessionid={client.cookies['sessionid'].value}".encode()

    return make


@pytest.fixture
def in_memory_layer(settings):
    """These tests are about the consumers: the in-memory layer, also when REDIS_URL is set (the Redis
    layer has its own test, tests/console/test_ws_idle_redis.py)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
async def live(in_memory_layer) -> AsyncIterator[list[WebsocketCommunicator]]:
    """Broadcasts from service threads reach this test's event loop; sockets are closed afterwards."""
    register_server_loop(asyncio.get_running_loop())
    await get_channel_layer().flush()
    opened: list[WebsocketCommunicator] = []
    yield opened
    for communicator in opened:
        await communicator.disconnect()


async def connect(
    opened: list[WebsocketCommunicator], path: str, cookie: bytes | None, origin: bytes = GOOD_ORIGIN
) -> tuple[WebsocketCommunicator, bool]:
    headers = [(b"origin", origin), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    if connected:
        opened.append(communicator)
    return communicator, connected


@pytest.mark.parametrize("path", ["/ws/jobs/", "/ws/jobs/1/", "/ws/cluster/"])
async def test_anonymous_is_rejected(live, path: str) -> None:
    _, connected = await connect(live, path, cookie=None)
    assert not connected


@pytest.mark.parametrize("origin", [b"http://evil.example", b"https://127.0.0.1.evil.example"])
async def test_foreign_origin_is_rejected(live, world_tx: World, cookie, origin: bytes) -> None:
    session = await database_sync_to_async(cookie)(world_tx.alice)
    _, connected = await connect(live, "/ws/jobs/", session, origin=origin)
    assert not connected
    _, connected = await connect(live, "/ws/jobs/", session)  # same session, our origin: accepted
    assert connected


async def test_snapshot_holds_only_the_users_jobs(live, world_tx: World, cookie) -> None:
    mine, theirs = await database_sync_to_async(_two_jobs)(world_tx)
    socket, connected = await connect(live, "/ws/jobs/", await database_sync_to_async(cookie)(world_tx.alice))
    assert connected
    snapshot = await socket.receive_json_from(timeout=5)
    assert snapshot["type"] == "snapshot"
    assert snapshot["ids"] == [mine.pk]
    assert f'data-job-id="{mine.pk}"' in snapshot["rows"]
    assert "language-secret" not in json.dumps(snapshot)


async def test_changes_reach_only_permitted_users(live, world_tx: World, cookie) -> None:
    mine, theirs = await database_sync_to_async(_two_jobs)(world_tx)
    alice, _ = await connect(live, "/ws/jobs/", await database_sync_to_async(cookie)(world_tx.alice))
    bob, _ = await connect(live, "/ws/jobs/", await database_sync_to_async(cookie)(world_tx.bob))
    await alice.receive_json_from(timeout=5)
    await bob.receive_json_from(timeout=5)

    # Bob's job changes through the service: Bob hears of it, Alice hears nothing at all.
    await database_sync_to_async(job_stop)(job=theirs, user=world_tx.bob)
    update = await bob.receive_json_from(timeout=5)
    assert update["type"] == "rows"
    assert [row["id"] for row in update["rows"]] == [theirs.pk]
    assert 'data-status="Stopped"' in update["rows"][0]["html"]
    assert await alice.receive_nothing(timeout=QUIET_S)

    # Alice's own job: she gets the re-rendered row.
    await database_sync_to_async(job_stop)(job=mine, user=world_tx.alice)
    update = await alice.receive_json_from(timeout=5)
    assert [row["id"] for row in update["rows"]] == [mine.pk]
    assert 'data-status="Stopped"' in update["rows"][0]["html"]
    assert await bob.receive_nothing(timeout=QUIET_S)


async def test_a_forged_notice_never_leaks_another_workspaces_job(live, world_tx: World, cookie) -> None:
    mine, theirs = await database_sync_to_async(_two_jobs)(world_tx)
    alice, _ = await connect(live, "/ws/jobs/", await database_sync_to_async(cookie)(world_tx.alice))
    await alice.receive_json_from(timeout=5)
    # A notice in Alice's own group that names Bob's job: the consumer re-reads as Alice and finds nothing.
    await get_channel_layer().group_send(jobs_group(world_tx.vision.pk), {"type": "jobs.changed",
                                                                          "job_ids": [theirs.pk]})
    assert await alice.receive_nothing(timeout=QUIET_S)
    publish_jobs_changed([(theirs.pk, world_tx.vision.pk), (mine.pk, world_tx.vision.pk)])
    update = await alice.receive_json_from(timeout=5)
    assert [row["id"] for row in update["rows"]] == [mine.pk]
    assert "language-secret" not in json.dumps(update)


async def test_a_new_job_on_the_page_sends_a_new_snapshot(live, world_tx: World, cookie) -> None:
    mine, _ = await database_sync_to_async(_two_jobs)(world_tx)
    alice, _ = await connect(live, "/ws/jobs/?status=Queuing", await database_sync_to_async(cookie)(world_tx.alice))
    first = await alice.receive_json_from(timeout=5)
    assert first["ids"] == [mine.pk]
    fresh = await database_sync_to_async(JobFactory)(workspace=world_tx.vision, quota=world_tx.team_vision,
                                                     name="fresh")
    publish_jobs_changed([(fresh.pk, world_tx.vision.pk)])
    snapshot = await alice.receive_json_from(timeout=5)
    assert snapshot["type"] == "snapshot"
    assert snapshot["ids"] == [fresh.pk, mine.pk]
    assert "1–2 of 2 jobs" in snapshot["pager"]
    # The job leaves the Queuing filter: the page is sent again without it.
    await database_sync_to_async(job_stop)(job=mine, user=world_tx.alice)
    snapshot = await alice.receive_json_from(timeout=5)
    assert snapshot["type"] == "snapshot" and snapshot["ids"] == [fresh.pk]


async def test_a_client_can_ask_for_a_snapshot_of_another_page(live, world_tx: World, cookie) -> None:
    mine, _ = await database_sync_to_async(_two_jobs)(world_tx)
    alice, _ = await connect(live, "/ws/jobs/", await database_sync_to_async(cookie)(world_tx.alice))
    await alice.receive_json_from(timeout=5)
    await alice.send_json_to({"type": "snapshot", "query": "?status=Running"})
    snapshot = await alice.receive_json_from(timeout=5)
    assert snapshot["type"] == "snapshot" and snapshot["ids"] == []


async def test_job_detail_socket_is_for_permitted_jobs_only(live, world_tx: World, cookie) -> None:
    mine, theirs = await database_sync_to_async(_two_jobs)(world_tx)
    session = await database_sync_to_async(cookie)(world_tx.alice)
    _, connected = await connect(live, f"/ws/jobs/{theirs.pk}/", session)
    assert not connected
    detail, connected = await connect(live, f"/ws/jobs/{mine.pk}/", session)
    assert connected
    snapshot = await detail.receive_json_from(timeout=5)
    assert snapshot["type"] == "snapshot" and snapshot["status"] == JobStatus.QUEUING
    await database_sync_to_async(job_stop)(job=mine, user=world_tx.alice)
    update = await detail.receive_json_from(timeout=5)
    assert update["status"] == JobStatus.STOPPED and update["final"] is True
    assert "stopped by alice" in update["html"]


async def test_job_detail_socket_hears_its_job_only_among_its_workspaces_notices(live, world_tx: World,
                                                                                   cookie) -> None:
    """One notice per workspace names many jobs (a cycle's queue positions): the page of a job
    re-renders when its job is named, and stays quiet for a neighbour's change."""
    mine, _ = await database_sync_to_async(_two_jobs)(world_tx)
    neighbour = await database_sync_to_async(JobFactory)(workspace=world_tx.vision, quota=world_tx.team_vision,
                                                         name="neighbour")
    detail, connected = await connect(live, f"/ws/jobs/{mine.pk}/", await database_sync_to_async(cookie)(world_tx.alice))
    assert connected
    await detail.receive_json_from(timeout=5)
    await database_sync_to_async(job_stop)(job=neighbour, user=world_tx.alice)
    assert await detail.receive_nothing(timeout=QUIET_S)
    publish_jobs_changed([(neighbour.pk, world_tx.vision.pk), (mine.pk, world_tx.vision.pk)])
    update = await detail.receive_json_from(timeout=5)
    assert update["type"] == "snapshot" and update["status"] == JobStatus.QUEUING


async def test_cluster_socket_says_changed_and_nothing_else(live, world_tx: World, cookie) -> None:
    mine, theirs = await database_sync_to_async(_two_jobs)(world_tx)
    cluster, connected = await connect(live, "/ws/cluster/", await database_sync_to_async(cookie)(world_tx.alice))
    assert connected
    assert await cluster.receive_json_from(timeout=5) == {"type": "ready"}
    await get_channel_layer().group_send("cluster", {"type": "cluster.changed"})
    assert await cluster.receive_json_from(timeout=5) == {"type": "changed"}
    await database_sync_to_async(job_stop)(job=mine, user=world_tx.alice)
    assert await cluster.receive_json_from(timeout=5) == {"type": "changed"}
    # A notice that changes nothing those pages show (e.g. training progress): no refresh.
    publish_jobs_changed([(mine.pk, world_tx.vision.pk)])
    assert await cluster.receive_nothing(timeout=1.5)
    await database_sync_to_async(job_stop)(job=theirs, user=world_tx.bob)
    assert await cluster.receive_nothing(timeout=1.5)


def _two_jobs(world: World) -> tuple[Job, Job]:
    mine = JobFactory(workspace=world.vision, quota=world.team_vision, name="vision-job")
    theirs = JobFactory(workspace=world.language, quota=world.team_language, name="language-secret")
    return mine, theirs


async def _job_and_ten_job_lists(live, world: World, cookie) -> tuple[Job, list[WebsocketCommunicator]]:
    """Alice's job, and ten of her job-list sockets past their snapshots."""
    mine, _ = await database_sync_to_async(_two_jobs)(world)
    session = await database_sync_to_async(cookie)(world.alice)
    sockets = [(await connect(live, "/ws/jobs/", session))[0] for _ in range(10)]
    for socket in sockets:
        assert (await socket.receive_json_from(timeout=5))["type"] == "snapshot"
    return mine, sockets


async def test_sockets_sharing_a_read_send_one_encoding(live, world_tx: World, cookie, monkeypatch) -> None:
    """A change seen by many sockets of one user: one read, and its message encoded once on the
    database thread (before: each socket encoded the rows again on the event loop)."""
    from console import consumers
    from console.consumers import JobListConsumer

    mine, sockets = await _job_and_ten_job_lists(live, world_tx, cookie)
    encoded: list[object] = []
    real_async, real_sync = JobListConsumer.encode_json, getattr(consumers, "encode", None)

    async def counting_async(cls: type, content: object) -> str:  # send_json's, per socket
        encoded.append(content)
        return await real_async(content)

    def counting(content: dict) -> str:  # a shared read's, once per read
        encoded.append(content)
        return real_sync(content)  # type: ignore[misc]

    monkeypatch.setattr(JobListConsumer, "encode_json", classmethod(counting_async))
    monkeypatch.setattr(consumers, "encode", counting, raising=False)  # before: no such function
    await database_sync_to_async(job_stop)(job=mine, user=world_tx.alice)
    texts = [await socket.receive_from(timeout=5) for socket in sockets]
    assert len(set(texts)) == 1
    update = json.loads(texts[0])
    assert update["type"] == "rows" and [row["id"] for row in update["rows"]] == [mine.pk]
    assert 'data-status="Stopped"' in update["rows"][0]["html"]
    assert len(encoded) == 1, f"{len(encoded)} encodings for {len(sockets)} sockets"


async def test_a_notice_costs_no_database_thread_hop_per_socket(live, world_tx: World, cookie,
                                                                monkeypatch) -> None:
    """Channels' dispatch closes old connections on the database thread before every handler; a change
    notice reaching 10 sockets must not queue 10 such hops ahead of the one shared read (issue 25's
    fan-out), while a socket's own messages still get them."""
    import channels.consumer

    mine, sockets = await _job_and_ten_job_lists(live, world_tx, cookie)
    hops: list[None] = []
    real = channels.consumer.aclose_old_connections

    async def counting() -> None:
        hops.append(None)
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counting)
    await database_sync_to_async(job_stop)(job=mine, user=world_tx.alice)
    for socket in sockets:
        update = await socket.receive_json_from(timeout=5)
        assert update["type"] == "rows" and 'data-status="Stopped"' in update["rows"][0]["html"]
    assert hops == [], f"{len(hops)} database-thread hops for one notice to {len(sockets)} sockets"
    await sockets[0].send_json_to({"type": "snapshot"})
    assert (await sockets[0].receive_json_from(timeout=5))["type"] == "snapshot"
    assert len(hops) == 1  # the socket's own message: dispatched as channels does
