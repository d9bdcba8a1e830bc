"""A frozen copy of the victim search as it was before the indexed one (commit ed46318), kept to
check that the new search chooses exactly the same victims. Do not optimise or "fix" this file:
its only job is to stay what the engine did then.

It reads the cycle's live state (node capacities, the untaken candidates in candidate order) and
answers one question: which victims would the old `_Cycle._select_victims` have chosen for this
job on this model right now (None: reclaiming everything would not make room).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from scheduler.engine.placement import equal_pods_held, scan_place


class CountingFit:
    def __init__(self, shape, count, base, could_host) -> None:
        self.shape = shape
        self.count = count
        self.could_host = could_host
        self.available = {}
        self.total = sum(self._holds(n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m) for n in base)

    def _holds(self, g, c, m):
        return equal_pods_held(self.shape, (g, c, m), self.count)

    def add(self, victim, sign=1):
        for node, g, c, m in victim.pods:
            amounts = self.available.get(node)
            if amounts is None:
                if not self.could_host(node):
                    continue
                amounts = self.available[node] = [
                    node.free_g + node.rel_g, node.free_c + node.rel_c, node.free_m + node.rel_m
                ]
            before = self._holds(*amounts)
            amounts[0] += sign * g
            amounts[1] += sign * c
            amounts[2] += sign * m
            self.total += self._holds(*amounts) - before

    def fits(self):
        return self.total >= self.count


class GreedyFit:
    def __init__(self, order, nodes, could_host):
        self.order = order
        self.available = {
            n: [n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m] for n in nodes if could_host(n)
        }

    def add(self, victim, sign=1):
        for node, g, c, m in victim.pods:
            amounts = self.available.get(node)
            if amounts is not None:
                amounts[0] += sign * g
                amounts[1] += sign * c
                amounts[2] += sign * m

    def fits(self):
        return scan_place(self.order, self.available)


def select_victims(candidates, fit):
    if fit.fits():
        return []
    chosen = []
    for victim in candidates:
        fit.add(victim)
        chosen.append(victim)
        if fit.fits():
            break
    else:
        return None
    spared = set()
    for i in range(len(chosen) - 2, -1, -1):
        fit.add(chosen[i], sign=-1)
        if fit.fits():
            spared.add(i)
        else:
            fit.add(chosen[i])
    return [victim for i, victim in enumerate(chosen) if i not in spared]


def reference_select_victims(
    nodes: Iterable, candidates_in_order: Sequence, is_taken: Callable, demand, model
) -> list | None:
    """The old `_Cycle._select_victims` without its failure memo (which only skips calls that fail).

    `nodes`: every NodeState of the cycle; `candidates_in_order`: every running Not in Quota job of
    the snapshot (a Victim) in candidate order; `is_taken(victim)`: already preempted this cycle.
    """
    pool = demand.pool or ""
    shape = demand.shape
    sizes = [size[1:] for size in demand.order] if shape is None else [shape]

    def in_group(node) -> bool:
        return node.schedulable and node.pool == pool and (model is None or node.model == model)

    def could_host(node) -> bool:
        return in_group(node) and any(node.holds(*size) for size in sizes)

    # The old VictimQueue kept per (pool, model) the victims with a pod on a node of that model
    # (model None: all of the pool), untaken, and yielded those with a pod on a node that could host.
    def candidates():
        for victim in candidates_in_order:
            if victim.pool != pool or is_taken(victim):
                continue
            if model is not None and not any(node.model == model for node, *_ in victim.pods):
                continue
            if any(could_host(pod[0]) for pod in victim.pods):
                yield victim

    nodes = list(nodes)
    if shape is not None:
        with_room = [n for n in nodes if in_group(n) and n.free_g + n.rel_g >= shape[0]]
        fit = CountingFit(shape, demand.count, with_room, could_host)
    else:
        fit = GreedyFit(demand.order, [n for n in nodes if in_group(n)], could_host)
    return select_victims(candidates(), fit)
