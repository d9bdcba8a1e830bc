"""Node keys through the service (DESIGN §6): created when a node is added, shown once (only the
SHA-256 is stored), rotated (the old key refused at once), revoked; bad input refused clearly."""

from __future__ import annotations

import hashlib

import pytest
from django.core.exceptions import ValidationError

from scheduler.models import NodeKey
from scheduler.services.node_keys import (
    NodeKeyRejected,
    node_key_authenticate,
    node_key_create,
    node_key_revoke,
    node_key_rotate,
)
from scheduler.services.tokens import TokenRejected, token_authenticate

pytestmark = pytest.mark.django_db


def test_adding_a_node_makes_a_key_stored_only_as_its_digest() -> None:
    created = node_key_create(node_name="gpu-03")
    assert created.secret.startswith("tpn_") and created.secret.startswith(created.key.prefix)
    row = NodeKey.objects.get()
    assert row.node_name == "gpu-03"
    assert row.digest == hashlib.sha256(created.secret.encode()).hexdigest()
    assert created.secret not in str(NodeKey.objects.values().get())  # never stored whole
    assert node_key_authenticate(created.secret).node_name == "gpu-03"
    assert NodeKey.objects.get().last_used_at is not None


def test_a_node_with_a_live_key_is_not_added_twice() -> None:
    first = node_key_create(node_name="gpu-03")
    with pytest.raises(ValidationError) as refused:
        node_key_create(node_name="gpu-03")
    assert "already has a key" in str(refused.value) and first.key.prefix in str(refused.value)
    assert NodeKey.objects.count() == 1


@pytest.mark.parametrize("name", ["", "GPU-03", "gpu_03", "-gpu", "a" * 65, "gpu 03", "gpu\x0003"])
def test_a_bad_node_name_is_refused_naming_the_rule(name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        node_key_create(node_name=name)
    assert "lowercase letters" in str(refused.value)
    assert not NodeKey.objects.exists()


def test_rotation_refuses_the_old_key_from_that_moment() -> None:
    old = node_key_create(node_name="gpu-03")
    new = node_key_rotate(node_name="gpu-03")
    assert new.secret != old.secret
    with pytest.raises(NodeKeyRejected, match="was revoked"):
        node_key_authenticate(old.secret)
    assert node_key_authenticate(new.secret).node_name == "gpu-03"
    assert NodeKey.objects.filter(node_name="gpu-03", revoked_at=None).count() == 1


def test_revoking_refuses_the_key_and_a_second_revoke_says_there_is_none() -> None:
    created = node_key_create(node_name="gpu-03")
    node_key_revoke(node_name="gpu-03")
    with pytest.raises(NodeKeyRejected, match="was revoked"):
        node_key_authenticate(created.secret)
    with pytest.raises(ValidationError, match="no live key"):
        node_key_revoke(node_name="gpu-03")
    again = node_key_create(node_name="gpu-03")  # a revoked node can be added again
    assert node_key_authenticate(again.secret).node_name == "gpu-03"


def test_a_node_key_is_no_api_token_and_an_api_token_no_node_key(world) -> None:
    from scheduler.services.tokens import token_create

    node = node_key_create(node_name="gpu-03")
    with pytest.raises(TokenRejected):
        token_authenticate(node.secret)
    personal = token_create(user=world.admin, name="laptop")
    with pytest.raises(NodeKeyRejected, match="Unknown node key"):
        node_key_authenticate(personal.secret)
