"""The Nodes page's node keys (/nodes/keys/, staff): add a node and see its key once, rotate (new key
once, old refused), revoke; non-staff get 403; a bad name is a form error at its field."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from scheduler.models import NodeKey
from scheduler.services.node_keys import NodeKeyRejected, node_key_authenticate
from tests.factories import World

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shown_key(html: str) -> str:
    found = re.search(r'id="new-node-key-secret">(tpn_[^<]+)</pre>', html)
    assert found, html[-2000:]
    return found.group(1)


def test_the_nodes_page_links_to_the_keys_for_staff(world: World) -> None:
    assert "/nodes/keys/" in logged_in(world.admin).get("/nodes/").content.decode()
    assert "/nodes/keys/" not in logged_in(world.alice).get("/nodes/").content.decode()


def test_staff_add_a_node_and_its_key_is_shown_once(world: World) -> None:
    admin = logged_in(world.admin)
    added = admin.post("/nodes/keys/", {"node": "gpu-03"})
    assert added.status_code == 200
    secret = shown_key(added.content.decode())
    assert node_key_authenticate(secret).node_name == "gpu-03"
    listed = admin.get("/nodes/keys/").content.decode()
    assert secret not in listed and NodeKey.objects.get().prefix in listed and "gpu-03" in listed


def test_rotate_shows_the_new_key_once_and_the_old_is_refused(world: World) -> None:
    admin = logged_in(world.admin)
    old = shown_key(admin.post("/nodes/keys/", {"node": "gpu-03"}).content.decode())
    rotated = admin.post("/nodes/keys/gpu-03/rotate/")
    new = shown_key(rotated.content.decode())
    assert new != old and node_key_authenticate(new).node_name == "gpu-03"
    with pytest.raises(NodeKeyRejected):
        node_key_authenticate(old)


def test_revoke_refuses_the_key(world: World) -> None:
    admin = logged_in(world.admin)
    secret = shown_key(admin.post("/nodes/keys/", {"node": "gpu-03"}).content.decode())
    answer = admin.post("/nodes/keys/gpu-03/revoke/", follow=True)
    assert "is revoked" in answer.content.decode()
    with pytest.raises(NodeKeyRejected):
        node_key_authenticate(secret)


def test_a_bad_name_or_a_second_add_is_a_form_error(world: World) -> None:
    admin = logged_in(world.admin)
    bad = admin.post("/nodes/keys/", {"node": "GPU 3"})
    assert bad.status_code == 400 and 'data-field="node"' in bad.content.decode()
    admin.post("/nodes/keys/", {"node": "gpu-03"})
    twice = admin.post("/nodes/keys/", {"node": "gpu-03"})
    assert twice.status_code == 400 and "already has a key" in twice.content.decode()
    assert NodeKey.objects.count() == 1


def test_node_keys_are_for_staff_only(world: World) -> None:
    alice = logged_in(world.alice)
    assert alice.get("/nodes/keys/").status_code == 403
    assert alice.post("/nodes/keys/", {"node": "gpu-03"}).status_code == 403
    assert alice.post("/nodes/keys/gpu-01/rotate/").status_code == 403
    assert not NodeKey.objects.exists()
