"""Console test fixtures: the two-team world of tests.factories.build_world and logged-in clients."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import World, build_world


@pytest.fixture
def world(db) -> World:
    return build_world()


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(world: World) -> Client:
    return login(world.alice)


@pytest.fixture
def bob_client(world: World) -> Client:
    return login(world.bob)


@pytest.fixture
def staff_client(world: World) -> Client:
    return login(world.admin)
