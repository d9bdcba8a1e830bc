"""Shared fixtures: one per real service (PostgreSQL, Redis), each skipped with a reason when absent."""

from __future__ import annotations

import os
import socket

import pytest


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path):
    """Pod logs, progress files and checkpoints of a test go to its own folder."""
    settings.TIDEPOOL_DATA_DIR = tmp_path / "var"


@pytest.fixture
def postgres_db(db):
    """The test database, provided it is PostgreSQL (CI runs the suite once with DATABASE_URL on it)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://postgres@127.0.0.1:5432/tidepool")
    return connection


# Unset REDIS_URL: a database of its own (15), never db 0 that a local console or another run uses.
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/15"


@pytest.fixture
def redis_url():
    url = os.environ.get("REDIS_URL") or DEFAULT_TEST_REDIS_URL
    host_port = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, _, port = host_port.partition(":")
    if not _answers(host or "127.0.0.1", int(port or 6379)):
        pytest.skip(f"needs Redis at {url} (start it: redis-server --daemonize yes --port 6379)")
    return url


@pytest.fixture
def world(db):
    """The two-team world of tests.factories.build_world (users alice, bob and staff admin)."""
    from tests.factories import build_world

    return build_world()


def _logged_in(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(world):
    return _logged_in(world.alice)


@pytest.fixture
def bob_client(world):
    return _logged_in(world.bob)


@pytest.fixture
def staff_client(world):
    return _logged_in(world.admin)


class RecordingExecutor:
    """Stands in for the node side in service/loop tests: records what would be launched or signalled.

    Tests then report pod starts and exits through the real lifecycle services, as a node would.
    """

    def __init__(self) -> None:
        self.launched: list[tuple[int, int]] = []  # (pod id, attempt)
        self.terminated: list[tuple[int, int, str, float]] = []  # (pod id, attempt, outcome, grace)

    def launch(self, launches) -> None:
        for _job, pods in launches:
            self.launched.extend((pod.pk, pod.attempt) for pod in pods)

    def terminate(self, refs, *, grace_s: float, outcome: str) -> None:
        self.terminated.extend((pod_id, attempt, outcome, grace_s) for pod_id, attempt, _node in refs)


@pytest.fixture
def recording_executor():
    from scheduler.executors import set_executor

    executor = RecordingExecutor()
    previous = set_executor(executor)
    yield executor
    set_executor(previous)
