"""Victim ordering, take-until-fits with fill-back, and the counting shortcut for equal pods."""

from __future__ import annotations

import random

import pytest

from scheduler.engine.capacity import Capacity
from scheduler.engine.placement import scan_place
from scheduler.engine.types import IDLE_ONLY, RUNNING, Job, Node, Pod
from scheduler.engine.victims.candidates import Victim
from scheduler.engine.victims.ordering import candidates_ordering
from scheduler.engine.victims.selection import CountingFit, GreedyFit, select_victims


def _job(name, priority=1, started_at=0.0):
    return Job(name=name, quota="q", pods=(Pod("w", gpus=1),), priority=priority, idle=IDLE_ONLY, phase=RUNNING,
               started_at=started_at, nodes=("n1",))


def test_victim_order_priority_then_latest_start_then_name():
    jobs = [
        _job("old-low", priority=1, started_at=10),
        _job("new-low-b", priority=1, started_at=50),
        _job("new-low-a", priority=1, started_at=50),
        _job("new-high", priority=5, started_at=90),
    ]
    ordered = sorted(jobs, key=candidates_ordering)
    assert [j.name for j in ordered] == ["new-low-a", "new-low-b", "old-low", "new-high"]


class _Needs:
    """A fit that holds once the chosen victims free `need` units in total on one node."""

    def __init__(self, need):
        self.need = need
        self.freed: dict[str, int] = {}

    def add(self, victim, sign=1):
        for node, g, _, _ in victim.pods:
            self.freed[node] = self.freed.get(node, 0) + sign * g

    def fits(self):
        return any(amount >= self.need for amount in self.freed.values())


def _victim(name, *pods):
    return Victim(job=_job(name), quota="q", pool="general", request={}, pods=tuple((n, g, 0, 0) for n, g in pods))


def test_take_until_fits_then_spare_from_the_last_back():
    # order: v1 (n1), v2 (n2), v3 (n1): fits on n1 after v3; walking back v2 is spared, v1 is needed
    victims = [_victim("v1", ("n1", 4)), _victim("v2", ("n2", 4)), _victim("v3", ("n1", 4))]
    chosen = select_victims(victims, _Needs(8))
    assert [v.job.name for v in chosen] == ["v1", "v3"]


def test_fill_back_walks_latest_first():
    # After v3 (6) either v1 (2) or v2 (2) is enough, not neither. Walking back from the last, v2 is
    # looked at first and spared, after which v1 is needed (first to last would spare v1 instead).
    victims = [_victim("v1", ("n1", 2)), _victim("v2", ("n1", 2)), _victim("v3", ("n1", 6))]
    chosen = select_victims(victims, _Needs(8))
    assert [v.job.name for v in chosen] == ["v1", "v3"]


def test_no_victims_when_even_all_would_not_do():
    assert select_victims([_victim("v1", ("n1", 4)), _victim("v2", ("n2", 4))], _Needs(8)) is None


def test_candidates_are_not_consumed_past_the_fit():
    seen = []

    def candidates():
        for victim in [_victim("v1", ("n1", 8)), _victim("v2", ("n1", 8))]:
            seen.append(victim.job.name)
            yield victim

    assert [v.job.name for v in select_victims(candidates(), _Needs(8))] == ["v1"]
    assert seen == ["v1"]


@pytest.mark.parametrize("seed", range(100))
def test_counting_fit_agrees_with_best_fit_for_equal_pods(seed):
    """For equal pods the gang fits iff the nodes hold that many pods in all; compare with running
    best fit itself as victims are added and removed."""
    rng = random.Random(seed)
    nodes = [Node(f"n{i}", "A100", rng.choice((4, 8)), rng.choice((16000, 64000)), 65536) for i in range(5)]
    capacity = Capacity(nodes)
    victims = []
    for i in range(8):
        node = rng.choice(nodes).name
        g, c = rng.randint(1, 3), rng.choice((0, 4000))
        if capacity.nodes[node].free_g >= g and capacity.nodes[node].free_c >= c:
            capacity.hold(node, g, c, 0)
            victims.append(Victim(job=_job(f"v{i}"), quota="q", pool="general", request={},
                                  pods=((capacity.nodes[node], g, c, 0),)))
    capacity.open()
    shape = (rng.randint(1, 4), rng.choice((0, 2000, 8000)), rng.choice((0, 4096)))
    count = rng.randint(1, 4)
    order = tuple((i, *shape) for i in range(count))

    def could_host(node):
        return node.holds(*shape)

    counting = CountingFit(shape, count, capacity.nodes_with_room("general", "A100", shape[0]), could_host)
    greedy = GreedyFit(order, capacity.schedulable_nodes("general", "A100"), could_host)
    assert counting.fits() == greedy.fits() == scan_place(order, greedy.available)
    for victim in victims:
        counting.add(victim)
        greedy.add(victim)
        assert counting.fits() == greedy.fits()
    for victim in reversed(victims):
        counting.add(victim, sign=-1)
        greedy.add(victim, sign=-1)
        assert counting.fits() == greedy.fits()
