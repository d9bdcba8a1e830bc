"""Inventory that disagrees (issue 23): a node registering other resources than before keeps what it
had and says so; a pool whose quotas guarantee more GPUs than its nodes register is named, with the numbers."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Node, ResourceQuota
from scheduler.selectors.inventory import inventory_warnings, node_change_warnings, pool_guarantee_warnings
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create

pytestmark = pytest.mark.django_db


def register(gpus: int, gpu_type: str = "A100", cpu: int = 32, memory_gib: int = 256) -> Node:
    return node_register(name="gpu-03", gpu_type=gpu_type, gpu_count=gpus, cpu=cpu, memory_gib=memory_gib,
                         heartbeat=True)


def test_a_node_that_registers_fewer_gpus_keeps_what_it_had_and_logs_it(caplog):
    first = register(8)
    assert first.previous_inventory is None and first.inventory_changed_at is None
    register(8)  # the same again: nothing to say
    assert Node.objects.get(name="gpu-03").previous_inventory is None and node_change_warnings() == []
    with caplog.at_level(logging.WARNING, logger="tidepool.nodes"):
        node = register(2)
    assert node.previous_inventory == {"gpu_type": "A100", "gpu_count": 8, "cpu": 32.0, "memory_gib": 256.0}
    assert node.inventory_changed_at is not None and node.gpu_count == 2
    assert "node gpu-03 registered 2 × A100, was 8 × A100" in caplog.text
    [warning] = node_change_warnings()
    assert warning.kind == "node" and warning.subject == "gpu-03"
    when = timezone.localtime(node.inventory_changed_at).strftime("%Y-%m-%d %H:%M")
    assert warning.text.startswith(f"gpu-03 registered 2 × A100, was 8 × A100 at {when}")


def test_cpu_and_memory_are_named_only_when_they_changed():
    register(8)
    register(8, cpu=16, memory_gib=128)
    [warning] = node_change_warnings()
    assert "registered 8 × A100 · 16 CPU · 128 GiB, was 8 × A100 · 32 CPU · 256 GiB" in warning.text


def test_a_change_is_shown_for_a_week():
    register(8)
    register(4)
    assert node_change_warnings(now=timezone.now() + timedelta(days=6))
    assert node_change_warnings(now=timezone.now() + timedelta(days=8)) == []


def test_a_pool_guaranteeing_more_than_its_nodes_register_is_named_with_the_numbers():
    node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=64, memory_gib=512)
    node_register(name="gpu-02", gpu_type="A100", gpu_count=8, cpu=64, memory_gib=512)
    node_register(name="gpu-03", gpu_type="A100", gpu_count=8, cpu=64, memory_gib=512)
    quota_create(name="general", min_gpus={"A100": 24}, min_cpu=0, min_memory_gib=0)
    assert pool_guarantee_warnings() == []  # 24 promised, 24 registered
    quota_create(name="extra", min_gpus={"A100": 8}, min_cpu=0, min_memory_gib=0)  # a second root
    [warning] = pool_guarantee_warnings()
    assert (warning.kind, warning.subject) == ("pool", "general")
    assert warning.text == "pool general: quotas guarantee 32 A100, nodes register 24"
    assert [w.text for w in inventory_warnings()] == [warning.text]


def test_childrens_guarantees_count_where_they_add_up_to_more_than_their_root():
    node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=64, memory_gib=512)
    root = quota_create(name="general", min_gpus={"A100": 4}, min_cpu=0, min_memory_gib=0)
    assert pool_guarantee_warnings() == []
    Node.objects.filter(name="gpu-01").update(gpu_count=4)
    assert pool_guarantee_warnings() == []  # 4 promised, 4 there
    # Children of a root promising 4 whose own minimums add up to 6: 6 are promised.
    ResourceQuota.objects.create(name="a", parent=root, min_gpus={"A100": 3})
    ResourceQuota.objects.create(name="b", parent=root, min_gpus={"A100": 3})
    assert [w.text for w in pool_guarantee_warnings()] == ["pool general: quotas guarantee 6 A100, nodes register 4"]
