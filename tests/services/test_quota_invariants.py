"""Quota tree invariants: each refusal names the field and the limit, and changes nothing."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from scheduler.models import ResourceQuota, Workspace
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create, quota_update

pytestmark = pytest.mark.django_db


def _state() -> list[tuple]:
    return list(
        ResourceQuota.objects.order_by("name").values_list(
            "name", "parent_id", "resource_type", "min_gpus", "min_cpu", "min_memory_gib", "max_gpus", "max_cpu"
        )
    )


@pytest.fixture
def tree():
    root = quota_create(name="root", min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536)
    team_a = quota_create(name="team-a", parent=root, min_gpus={"A100": 8}, min_cpu=96, min_memory_gib=768)
    return root, team_a


def refused(call, field: str, *fragments: str) -> str:
    before = _state()
    with pytest.raises(ValidationError) as caught:
        call()
    messages = caught.value.message_dict
    assert field in messages, messages
    text = " ".join(messages[field])
    for fragment in fragments:
        assert fragment in text, text
    assert _state() == before, "a refused write changed the quotas"
    return text


def test_children_min_within_parent_on_create(tree):
    root, _ = tree
    refused(
        lambda: quota_create(name="team-b", parent=root, min_gpus={"A100": 9}),
        "min_gpus",
        "17", "above root's min of 16",
    )


def test_children_min_within_parent_per_resource_cpu(tree):
    root, _ = tree
    refused(lambda: quota_create(name="team-b", parent=root, min_cpu=100), "min_cpu", "196", "192")


def test_parent_min_cannot_drop_below_children(tree):
    root, _ = tree
    refused(lambda: quota_update(quota=root, min_gpus={"A100": 4}), "min_gpus", "children of root", "8", "4")


def test_child_update_over_parent(tree):
    _, team_a = tree
    refused(lambda: quota_update(quota=team_a, min_memory_gib=2000), "min_memory_gib", "2000", "1536")


def test_min_not_above_max(tree):
    root, _ = tree
    refused(
        lambda: quota_create(name="team-b", parent=root, min_gpus={"A100": 4}, max_gpus={"A100": 2}),
        "max_gpus",
        "min 4", "max 2",
    )
    refused(lambda: quota_create(name="team-c", parent=root, min_cpu=10, max_cpu=5), "max_cpu", "min 10", "max 5")


def test_max_may_leave_resources_uncapped(tree):
    root, _ = tree
    quota = quota_create(name="team-b", parent=root, min_gpus={"A100": 4}, max_gpus={"A100": 12})
    assert quota.max_vector() == {"gpu:A100": 12}
    assert quota.max_cpu is None


def test_tree_stays_in_one_resource_type(tree):
    root, _ = tree
    refused(
        lambda: quota_create(name="lj", parent=root, resource_type="lingjun"),
        "resource_type",
        "lingjun", "general", "its parent's pool",
    )


def test_child_quota_inherits_its_parents_pool():
    node_register(name="lj-1", resource_type="lingjun", gpu_type="H800", gpu_count=8, cpu=128, memory_gib=1024)
    lj_root = quota_create(name="lj-root", resource_type="lingjun", min_gpus={"H800": 8})
    child = quota_create(name="lj-child", parent=lj_root, min_gpus={"H800": 4})  # no pool stated
    same = quota_create(name="lj-same", parent=lj_root, resource_type="lingjun", min_gpus={"H800": 2})
    assert (child.resource_type, same.resource_type) == ("lingjun", "lingjun")
    assert quota_create(name="plain-root").resource_type == "general"


def test_min_cpu_and_memory_in_proportion_to_gpus_unless_named():
    node_register(name="p-1", gpu_type="V100", gpu_count=8, cpu=96, memory_gib=768)
    node_register(name="p-2", gpu_type="V100", gpu_count=8, cpu=32, memory_gib=256)
    # The pool: 16 GPUs, 128 cores, 1024 GiB → 8 cores and 64 GiB per GPU.
    share = quota_create(name="share", min_gpus={"V100": 4})
    assert (share.min_cpu, share.min_memory_gib) == (32, 256)
    named = quota_create(name="named", min_gpus={"V100": 4}, min_cpu=10, min_memory_gib=None)
    assert (named.min_cpu, named.min_memory_gib) == (10, 256)
    quota_update(quota=named, min_gpus={"V100": 2}, min_cpu=None)
    named.refresh_from_db()
    assert (named.min_cpu, named.min_memory_gib) == (16, 256)  # memory stays as it was


def test_resource_type_of_quota_with_children_cannot_change(tree):
    root, _ = tree
    refused(lambda: quota_update(quota=root, resource_type="lingjun"), "resource_type", "children or jobs")


def test_lingjun_gpus_only_in_lingjun_quotas():
    node_register(name="lj-1", resource_type="lingjun", gpu_type="H800", gpu_count=8, cpu=128, memory_gib=1024)
    refused(
        lambda: quota_create(name="gen", resource_type="general", min_gpus={"H800": 8}),
        "min_gpus",
        "H800 GPUs are lingjun resources",
    )
    assert quota_create(name="lj", resource_type="lingjun", min_gpus={"H800": 8}).pk


def test_no_negative_resources():
    refused(lambda: quota_create(name="neg", min_gpus={"A100": -1}), "min_gpus", "cannot be negative")
    refused(lambda: quota_create(name="neg", min_cpu=-2), "min_cpu", "cannot be negative")
    refused(lambda: quota_create(name="neg", min_memory_gib="-1"), "min_memory_gib", "cannot be negative")


def test_gpu_counts_are_whole_numbers():
    refused(lambda: quota_create(name="frac", min_gpus={"A100": 1.5}), "min_gpus", "whole number")


def test_no_cycles(tree):
    root, team_a = tree
    refused(lambda: quota_update(quota=root, parent=team_a, min_gpus={"A100": 16}), "parent", "subtree")


def test_workspaces_are_associated(tree):
    _, team_a = tree
    space = Workspace.objects.create(name="vision")
    quota_update(quota=team_a, workspaces=[space])
    assert list(space.quotas.all()) == [team_a]


def test_root_without_min_is_guaranteed_its_pool_in_services_and_engine():
    """One home for the tree rules: a root that states no min is guaranteed its pool's capacity, so a
    child may take up to the pool; the services and the engine give the same verdict on the same trees."""
    from scheduler.engine.quota import tree_problems
    from scheduler.engine_rows import engine_nodes_of_pool, engine_quota

    node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    node_register(name="gpu-2", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    root = quota_create(name="root")  # no min: the pool's 16 A100, 192 cores, 1536 GiB
    quota_create(name="team-a", parent=root, min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536)

    def engine_verdict() -> list[tuple[str, str, str]]:
        rows = list(ResourceQuota.objects.all())
        names = {row.pk: row.name for row in rows}
        return tree_problems([engine_quota(row, names) for row in rows], engine_nodes_of_pool("general"))

    assert engine_verdict() == []
    # One GPU more than the pool: both refuse.
    refused(lambda: quota_create(name="team-b", parent=root, min_gpus={"A100": 1}), "min_gpus",
            "17", "above root's min of 16")
    ResourceQuota.objects.create(name="team-b", parent=root, min_gpus={"A100": 1})  # bypass the services
    assert [(name, field) for name, field, _ in engine_verdict()] == [("team-b", "min")]
