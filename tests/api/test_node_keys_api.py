"""Node keys through /api/v1/node-keys/ (staff): add a node (key shown once), list (prefix only),
rotate, revoke; refused to non-staff and with clear errors."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.models import NodeKey
from tests.api.v1_helpers import bearer
from tests.factories import World

pytestmark = pytest.mark.django_db


def add(client: Client, node: str):
    return client.post("/api/v1/node-keys/", {"node": node}, content_type="application/json")


def test_staff_add_a_node_and_see_its_key_once(world: World) -> None:
    admin = bearer(world.admin)
    answer = add(admin, "gpu-03")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["node"] == "gpu-03" and body["live"] and body["key"].startswith(body["prefix"])
    listed = admin.get("/api/v1/node-keys/").json()
    assert [(k["node"], k["prefix"], k["live"]) for k in listed] == [("gpu-03", body["prefix"], True)]
    assert "key" not in listed[0] and body["key"] not in admin.get("/api/v1/node-keys/").content.decode()
    pods = Client(HTTP_AUTHORIZATION=f"Bearer {body['key']}").get("/api/node/v1/pods/")
    assert pods.status_code == 200 and pods.json() == {"node": "gpu-03", "pods": []}


def test_adding_twice_and_bad_names_are_400s_naming_the_field(world: World) -> None:
    admin = bearer(world.admin)
    assert add(admin, "gpu-03").status_code == 201
    twice = add(admin, "gpu-03")
    assert twice.status_code == 400 and "already has a key" in twice.json()["node"][0]
    bad = add(admin, "GPU 03")
    assert bad.status_code == 400 and "lowercase letters" in bad.json()["node"][0]
    assert admin.post("/api/v1/node-keys/", {}, content_type="application/json").status_code == 400
    assert NodeKey.objects.count() == 1


def test_rotate_gives_a_new_key_once_and_refuses_the_old(world: World) -> None:
    admin = bearer(world.admin)
    old = add(admin, "gpu-03").json()["key"]
    rotated = admin.post("/api/v1/node-keys/gpu-03/rotate/")
    assert rotated.status_code == 201
    new = rotated.json()["key"]
    assert new != old
    assert Client(HTTP_AUTHORIZATION=f"Bearer {old}").get("/api/node/v1/pods/").status_code == 401
    assert Client(HTTP_AUTHORIZATION=f"Bearer {new}").get("/api/node/v1/pods/").status_code == 200


def test_revoke_refuses_the_key_and_shows_it_revoked(world: World) -> None:
    admin = bearer(world.admin)
    key = add(admin, "gpu-03").json()["key"]
    revoked = admin.post("/api/v1/node-keys/gpu-03/revoke/")
    assert revoked.status_code == 200 and not revoked.json()["live"] and revoked.json()["revoked_at"]
    assert "key" not in revoked.json()
    assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/api/node/v1/pods/").status_code == 401
    again = admin.post("/api/v1/node-keys/gpu-03/revoke/")
    assert again.status_code == 400 and "no live key" in again.json()["node"][0]


def test_node_keys_are_for_staff_only(world: World) -> None:
    alice = bearer(world.alice)
    assert alice.get("/api/v1/node-keys/").status_code == 403
    assert add(alice, "gpu-03").status_code == 403
    assert alice.post("/api/v1/node-keys/gpu-01/rotate/").status_code == 403
    assert alice.post("/api/v1/node-keys/gpu-01/revoke/").status_code == 403
    assert not NodeKey.objects.exists()
