"""Node inventory invariants."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from scheduler.models import Node
from scheduler.services.nodes import node_register, node_set_schedulable

pytestmark = pytest.mark.django_db


def _nodes() -> list[tuple]:
    return list(Node.objects.order_by("name").values_list("name", "resource_type", "gpu_type", "gpu_count"))


def test_lingjun_gpus_only_on_lingjun_nodes():
    node_register(name="lj-1", resource_type="lingjun", gpu_type="H800", gpu_count=8, cpu=128, memory_gib=1024)
    before = _nodes()
    with pytest.raises(ValidationError) as caught:
        node_register(name="gen-1", resource_type="general", gpu_type="H800", gpu_count=8, cpu=96, memory_gib=768)
    assert "H800 GPUs are lingjun resources" in caught.value.message_dict["gpu_type"][0]
    assert _nodes() == before


def test_no_negative_node_resources():
    before = _nodes()
    with pytest.raises(ValidationError) as caught:
        node_register(name="bad", gpu_type="A100", gpu_count=8, cpu=-1, memory_gib=10)
    assert "cpu cannot be negative" in caught.value.message_dict["cpu"][0]
    assert _nodes() == before


def test_gpus_need_a_model():
    with pytest.raises(ValidationError) as caught:
        node_register(name="bad", gpu_type="", gpu_count=8, cpu=1, memory_gib=10)
    assert "no GPU model" in caught.value.message_dict["gpu_type"][0]
    assert not Node.objects.exists()


def test_register_is_an_upsert_and_cordon_keeps_inventory():
    node = node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    again = node_register(name="gpu-1", gpu_type="A100", gpu_count=4, cpu=96, memory_gib=768, heartbeat=True)
    assert again.pk == node.pk and again.gpu_count == 4 and again.last_heartbeat is not None
    cordoned = node_set_schedulable(node=again, schedulable=False)
    assert not cordoned.accepts_pods and cordoned.gpu_count == 4
