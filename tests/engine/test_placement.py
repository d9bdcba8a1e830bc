"""Gang best fit: the indexed search must choose exactly what the plain rule over all nodes chooses."""

from __future__ import annotations

import random

import pytest

from scheduler.engine.capacity import Capacity
from scheduler.engine.demand import demand_of, placement_order
from scheduler.engine.placement import node_names_in_pod_order, place, scan_place
from scheduler.engine.types import Job, Node, Pod


def _capacity(nodes, held=(), releasing=()):
    capacity = Capacity(nodes)
    for name, g, c, m in held:
        capacity.hold(name, g, c, m)
    for name, g, c, m in releasing:
        capacity.hold_releasing(name, g, c, m, "exiting")
    capacity.open()
    return capacity


def _brute_force(states, pods, model, releasing):
    """DESIGN's rule written as plainly as possible: for each pod (largest first), the node leaving
    the fewest free GPUs, then the least free CPU, then the first name."""
    left = {
        s.name: [s.free_g + (s.rel_g if releasing else 0), s.free_c + (s.rel_c if releasing else 0),
                 s.free_m + (s.rel_m if releasing else 0)]
        for s in states if s.schedulable and (model is None or s.model == model)
    }
    chosen = {}
    for index, g, c, m in placement_order(pods):
        fitting = [(a[0] - g, a[1] - c, name) for name, a in left.items() if a[0] >= g and a[1] >= c and a[2] >= m]
        if not fitting:
            return None
        _, _, best = min(fitting)
        left[best][0] -= g
        left[best][1] -= c
        left[best][2] -= m
        chosen[index] = best
    return tuple(chosen[i] for i in range(len(pods)))


@pytest.mark.parametrize("seed", range(200))
def test_indexed_best_fit_matches_the_plain_rule(seed):
    rng = random.Random(seed)
    nodes = [
        Node(name=f"n{i:02d}", gpu_type=rng.choice(("A100", "H100")), gpus=rng.choice((4, 8)),
             cpu_m=rng.choice((32000, 64000)), memory_mib=rng.choice((65536, 131072)),
             schedulable=rng.random() > 0.1)
        for i in range(rng.randint(1, 12))
    ]
    held = []
    releasing = []
    for node in nodes:
        for target in (held, releasing):
            if rng.random() < 0.5:
                target.append((node.name, rng.randint(0, node.gpus // 2), rng.choice((0, 8000, 12000)),
                               rng.choice((0, 16384))))
    capacity = _capacity(nodes, held, releasing)
    pods = tuple(
        Pod(role="w", gpus=rng.choice((0, 1, 2, 4)), cpu_m=rng.choice((0, 2000, 8000)),
            memory_mib=rng.choice((0, 8192, 32768)))
        for _ in range(rng.randint(1, 4))
    )
    job = Job(name="j", quota="q", pods=pods)
    model = rng.choice(("A100", "H100", None))
    use_releasing = rng.random() < 0.5
    expected = _brute_force(list(capacity.nodes.values()), pods, model, use_releasing)
    before = {s.name: (s.free_g, s.free_c, s.free_m, s.rel_g, s.rel_c, s.rel_m) for s in capacity.nodes.values()}
    placed = place(capacity, demand_of(job, "general"), model, releasing=use_releasing)
    if expected is None:
        assert placed is None
        after = {s.name: (s.free_g, s.free_c, s.free_m, s.rel_g, s.rel_c, s.rel_m) for s in capacity.nodes.values()}
        assert after == before, "a gang that did not fit must hold nothing"
    else:
        assert placed is not None and node_names_in_pod_order(placed) == expected
    # the hypothetical-capacity variant (reclaim, submission) agrees on whether it fits
    available = {
        s: (s.free_g + s.rel_g * use_releasing, s.free_c + s.rel_c * use_releasing, s.free_m + s.rel_m * use_releasing)
        for s in _capacity(nodes, held, releasing).nodes.values() if s.schedulable and model in (None, s.model)
    }
    assert scan_place(placement_order(pods), available) == (expected is not None)


def test_pods_in_size_order_equal_pods_keep_theirs():
    pods = (
        Pod("a", gpus=1, cpu_m=1000),
        Pod("b", gpus=2, cpu_m=500),
        Pod("c", gpus=2, cpu_m=500, memory_mib=10),
        Pod("d", gpus=2, cpu_m=500),
        Pod("e", gpus=2, cpu_m=900),
    )
    assert [i for i, *_ in placement_order(pods)] == [4, 2, 1, 3, 0]


def test_reservation_takes_being_released_capacity_first():
    capacity = _capacity([Node("n1", "A100", 8, 64000, 65536)], releasing=[("n1", 4, 16000, 0)])
    node = capacity.nodes["n1"]
    assert (node.free_g, node.rel_g) == (4, 4)
    from_rel = capacity.take(node, 6, 20000, 1024, releasing_first=True)
    assert from_rel == (4, 16000, 0)
    assert (node.free_g, node.free_c, node.free_m) == (2, 44000, 64512)  # 48000 free before
    assert (node.rel_g, node.rel_c, node.rel_m) == (0, 0, 0)
    capacity.untake(node, 6, 20000, 1024, from_rel)
    assert (node.free_g, node.rel_g, node.rel_c) == (4, 4, 16000)


def test_node_over_capacity_takes_nothing_new():
    """Inventory shrank under running pods: the node is skipped until they leave."""
    capacity = _capacity([Node("n1", "A100", 4, 64000, 65536), Node("n2", "A100", 8, 64000, 65536)],
                         held=[("n1", 6, 0, 0)])
    assert capacity.best_fit("general", "A100", 0, 0, 0, releasing=False).name == "n2"
