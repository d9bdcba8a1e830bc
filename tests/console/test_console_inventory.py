"""The Nodes page and the dashboard show inventory that disagrees, with the numbers (issue 23)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from scheduler.services.nodes import node_register
from tests.factories import World

pytestmark = pytest.mark.django_db


def test_a_node_that_registered_fewer_gpus_and_the_pool_it_leaves_short_are_shown(world: World,
                                                                                  alice_client: Client) -> None:
    for name in ("console:nodes", "console:dashboard"):  # 16 A100 promised by `general`, 16 registered
        assert "Inventory that disagrees" not in alice_client.get(reverse(name)).content.decode()
    node_register(name="gpu-01", gpu_type="A100", gpu_count=2, cpu=world.gpu1.cpu, memory_gib=world.gpu1.memory_gib,
                  heartbeat=True)  # its worker restarted declaring 2 GPUs instead of 8
    for name in ("console:nodes", "console:dashboard"):
        page = alice_client.get(reverse(name)).content.decode()
        assert "Inventory that disagrees" in page, name
        assert "gpu-01 registered 2 × A100, was 8 × A100 at " in page
        assert "pool general: quotas guarantee 16 A100, nodes register 10" in page
    nodes = alice_client.get(reverse("console:nodes")).content.decode()
    assert "was 8 × A100 until " in nodes  # on the node's own card too
    live = alice_client.get(reverse("console:nodes") + "?fragment=1").content.decode()
    assert 'class="topbar"' not in live and "pool general: quotas guarantee 16 A100, nodes register 10" in live  # the live refresh keeps it
