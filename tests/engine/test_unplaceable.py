"""placement.unplaceable_reason: refusing at submission a job its pool could never hold."""

from __future__ import annotations

from scheduler.engine.placement import unplaceable_reason
from scheduler.engine.types import Node, Pod

NODES = (
    Node("g1", "A100", 8, 96000, 786432),
    Node("g2", "A100", 8, 64000, 524288),
    Node("g3", "H100", 4, 128000, 1048576),
    Node("g4", "H100", 8, 256000, 2097152, schedulable=False),  # cordoned: does not count
    Node("l1", "A100", 16, 96000, 786432, pool="lingjun"),  # another pool: does not count
)


def test_fits_returns_none():
    assert unplaceable_reason([Pod("w", 8, "A100", 96000, 786432)], NODES, "general") is None
    assert unplaceable_reason([Pod("w", 8, None)] * 2, NODES, "general") is None
    assert unplaceable_reason([Pod("w", 0, None, 128000)], NODES, "general") is None


def test_too_many_gpus_names_the_model_and_the_largest_node():
    assert unplaceable_reason([Pod("w", 16, "A100")], NODES, "general") == (
        "no general node has 16 A100; the largest has 8"
    )
    assert unplaceable_reason([Pod("w", 6, "H100")], NODES, "general") == (
        "no general node has 6 H100; the largest has 4"
    )
    assert unplaceable_reason([Pod("w", 16)], NODES, "general") == "no general node has 16 GPUs; the largest has 8"


def test_cpu_and_memory_are_named_in_cores_and_gib():
    assert unplaceable_reason([Pod("w", 8, "A100", cpu_m=128000)], NODES, "general") == (
        "no general node with 8 A100 has 128 CPU cores; the largest has 96"
    )
    assert unplaceable_reason([Pod("w", 0, None, cpu_m=200000)], NODES, "general") == (
        "no general node has 200 CPU cores; the largest has 128"
    )
    assert unplaceable_reason([Pod("w", 8, "A100", memory_mib=1024 * 1024)], NODES, "general") == (
        "no general node with 8 A100 has 1024 GiB memory; the largest has 768"
    )


def test_unknown_model_and_empty_pool():
    assert unplaceable_reason([Pod("w", 1, "V100")], NODES, "general") == "no general node has V100 GPUs"
    assert unplaceable_reason([Pod("w", 1, "A100")], NODES, "gpu-less") == "the gpu-less pool has no schedulable nodes"


def test_gang_bigger_than_the_pool():
    reason = unplaceable_reason([Pod("w", 8, "A100")] * 3, NODES, "general")
    assert reason == "the general pool cannot hold all 3 pods at once, even when empty (24 A100 asked, 16 in the pool)"


def test_one_model_per_job():
    reason = unplaceable_reason([Pod("m", 1, "A100"), Pod("w", 1, "H100")], NODES, "general")
    assert reason == "pods ask for different GPU models (A100, H100); all pods of a job use one model"
    # unnamed pods: four of 4 GPUs fit the two A100 nodes; a fifth would need the H100 node too
    assert unplaceable_reason([Pod("w", 4)] * 4, NODES, "general") is None
    assert unplaceable_reason([Pod("w", 4)] * 5, NODES, "general") == (
        "the general pool cannot hold all 5 pods at once, even when empty (20 GPUs asked, 16 in the pool)"
    )
