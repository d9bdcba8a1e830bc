"""Victim search for gangs of equal pods, indexed by node, in time that grows with the victims a job
takes rather than with all candidates (DESIGN §2 "Victim selection", same answers as `reclaim`).

The rule: take candidates in candidate order until the job fits, then walk the chosen ones back from
the last and spare each one the job still fits without. For a gang of `k` pods of one size `s`, "fits"
is a count: node n holds h_n = min over resources of floor(A_n / s) pods (at most k), where A_n is what
n has unreserved (free + being released) plus what the chosen victims hold on it; the gang fits iff
the h_n add up to k (`placement.equal_pods_held`). Give each candidate its rank in candidate order.
Then, per node, the rank at which h_n reaches j is the largest, over the resources, of the rank at
which the node's running total of victims' amounts reaches j × s minus what it has (-1: it already has
it) — a bisect into that node's prefix sums. So:

- the first prefix at which the job fits ends at rank P, the k-th smallest of those "reaches j"
  ranks over all nodes (with repeats); nodes are visited in order of a lower bound (the rank at
  which their GPUs alone reach one pod, kept in a sorted list per (pool, model, GPUs per pod)) and
  the visit stops once that bound passes P;
- walking back from the last, a chosen victim with no pod on a node that holds a pod at P is always
  spared: such nodes hold none and removing victims only lowers them. So fill-back replays only the
  victims of rank ≤ P on the few nodes holding pods at P (exactly as the walk does).

Every candidate list is built once per cycle (on the first search) and kept as victims are taken;
capacity changes (placements, reservations, releases) mark nodes whose bounds are refreshed before the
next search.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort

from .capacity import Capacity, NodeState
from .placement import equal_pods_held
from .reclaim import Victim

NEVER = 1 << 62  # a rank no candidate has: "never, with these candidates"
AT_START = -1  # "already, before any victim"


class _NodeVictims:
    """The untaken candidates with pods on one node, in candidate order, with running totals."""

    __slots__ = ("ranks", "victims", "amounts", "cum_g", "cum_c", "cum_m")

    def __init__(self) -> None:
        self.ranks: list[int] = []
        self.victims: list[Victim] = []
        self.amounts: list[tuple[int, int, int]] = []  # what each holds on this node (all its pods here)
        self.cum_g: list[int] = []
        self.cum_c: list[int] = []
        self.cum_m: list[int] = []

    def add(self, rank: int, victim: Victim, g: int, c: int, m: int) -> None:
        """Entries arrive in rank order while the index is built; pods of one victim are summed."""
        if self.ranks and self.ranks[-1] == rank:
            og, oc, om = self.amounts[-1]
            self.amounts[-1] = (og + g, oc + c, om + m)
        else:
            self.ranks.append(rank)
            self.victims.append(victim)
            self.amounts.append((g, c, m))

    def remove(self, rank: int) -> None:
        i = bisect_left(self.ranks, rank)
        if i < len(self.ranks) and self.ranks[i] == rank:
            del self.ranks[i], self.victims[i], self.amounts[i]
            self.totals()

    def totals(self) -> None:
        cg = cc = cm = 0
        self.cum_g, self.cum_c, self.cum_m = [], [], []
        for g, c, m in self.amounts:
            cg += g
            cc += c
            cm += m
            self.cum_g.append(cg)
            self.cum_c.append(cc)
            self.cum_m.append(cm)

    def reach_g(self, node: NodeState, need: int) -> int:
        """The rank from which the node's unreserved GPUs plus victims' reach `need`."""
        short = need - node.free_g - node.rel_g
        if short <= 0:
            return AT_START
        i = bisect_left(self.cum_g, short)
        return self.ranks[i] if i < len(self.ranks) else NEVER

    def reach(self, node: NodeState, g: int, c: int, m: int) -> int:
        """The rank from which all three amounts are reached (the largest of the three ranks)."""
        rank = self.reach_g(node, g)
        if rank == NEVER:
            return NEVER
        for short, cum in ((c - node.free_c - node.rel_c, self.cum_c), (m - node.free_m - node.rel_m, self.cum_m)):
            if short > 0:
                i = bisect_left(cum, short)
                if i == len(cum):
                    return NEVER
                if self.ranks[i] > rank:
                    rank = self.ranks[i]
        return rank

    def upto(self, rank: int) -> int:
        """How many entries have a rank ≤ `rank`."""
        return bisect_left(self.ranks, rank + 1)


class VictimIndex:
    """Per schedulable node, its untaken candidates; per (pool, model, GPUs per pod), nodes sorted by the
    rank at which their GPUs alone could hold one pod (a lower bound on when they could hold it)."""

    def __init__(self, ordered: list[Victim], capacity: Capacity) -> None:
        self.capacity = capacity
        self.per_node: dict[NodeState, _NodeVictims] = {}
        for rank, victim in enumerate(ordered):
            for node, g, c, m in victim.pods:
                if node.schedulable and node.pool == victim.pool:
                    entry = self.per_node.get(node)
                    if entry is None:
                        entry = self.per_node[node] = _NodeVictims()
                    entry.add(rank, victim, g, c, m)
        for entry in self.per_node.values():
            entry.totals()
        self.rank = {id(victim): rank for rank, victim in enumerate(ordered)}
        self._empty = _NodeVictims()
        # (pool, model, g) -> sorted [(bound, name, node)], and each node's bound in it
        self._bounds: dict[tuple[str, str, int], list[tuple[int, str, NodeState]]] = {}
        self._bound_of: dict[tuple[str, str, int], dict[NodeState, int]] = {}
        self._tracked: dict[tuple[str, str], list[int]] = {}  # (pool, model) -> the g values kept
        self._changed: set[NodeState] = set()
        capacity.watch = self._changed

    def entries(self, node: NodeState) -> _NodeVictims:
        return self.per_node.get(node, self._empty)

    def take(self, victim: Victim) -> None:
        rank = self.rank[id(victim)]
        for node, *_ in victim.pods:
            entry = self.per_node.get(node)
            if entry is not None:
                entry.remove(rank)
                self._changed.add(node)

    # --- the sorted lower bounds ---------------------------------------------------------------------

    def _bound_list(self, pool: str, model: str, g: int) -> list[tuple[int, str, NodeState]]:
        key = (pool, model, g)
        ordered = self._bounds.get(key)
        if ordered is None:
            of = self._bound_of[key] = {}
            ordered = []
            for node in self.capacity.schedulable_nodes(pool, model):
                bound = of[node] = self.entries(node).reach_g(node, g)
                ordered.append((bound, node.name, node))
            ordered.sort()  # names are unique: the tuples never compare nodes
            self._bounds[key] = ordered
            self._tracked.setdefault((pool, model), []).append(g)
        return ordered

    def _refresh(self) -> None:
        """Bring the bounds of every node changed since the last search up to date."""
        for node in self._changed:
            for g in self._tracked.get((node.pool, node.model), ()):
                key = (node.pool, node.model, g)
                of = self._bound_of[key]
                old = of.get(node)
                if old is None:
                    continue  # not a schedulable node of this group
                new = self.entries(node).reach_g(node, g)
                if new != old:
                    ordered = self._bounds[key]
                    del ordered[bisect_left(ordered, (old, node.name))]
                    insort(ordered, (new, node.name, node))
                    of[node] = new
        self._changed.clear()

    # --- the search ----------------------------------------------------------------------------------

    def select(self, pool: str, model: str, shape: tuple[int, int, int], count: int) -> list[Victim] | None:
        """The victims to preempt for `count` pods of `shape` (GPUs ≥ 1) on `model` nodes of `pool`, in
        candidate order; [] when they fit already; None when even every candidate would not do."""
        self._refresh()
        g, c, m = shape
        kth: list[int] = []  # the `count` smallest "holds one more pod" ranks so far, negated (max-heap)
        seen: list[tuple[NodeState, int]] = []  # visited nodes and the rank at which they hold one pod
        last = NEVER  # the k-th smallest so far: where the job first fits
        for bound, _, node in self._bound_list(pool, model, g):
            if bound > last or bound == NEVER:
                break
            entry = self.entries(node)
            for j in range(1, count + 1):
                rank = entry.reach(node, j * g, j * c, j * m)
                if j == 1:
                    seen.append((node, rank))
                if rank == NEVER:
                    break
                if len(kth) < count:
                    heapq.heappush(kth, -rank)
                elif rank < last:
                    heapq.heapreplace(kth, -rank)
                else:
                    break
                if len(kth) == count:
                    last = -kth[0]
            if last == AT_START:
                return []
        if last == NEVER:
            return None
        return self._fill_back([node for node, first in seen if first <= last], last, shape, count)

    def _fill_back(self, holding: list[NodeState], last: int, shape: tuple[int, int, int], count: int) -> list[Victim]:
        """Walk the chosen victims back from the last (rank `last`, always kept) and spare each one the job
        still fits without; only victims with a pod on a node in `holding` can matter."""
        amounts: dict[NodeState, list[int]] = {}
        victims: dict[int, Victim] = {}
        for node in holding:
            entry = self.entries(node)
            upto = entry.upto(last)
            if upto:
                amounts[node] = [node.free_g + node.rel_g + entry.cum_g[upto - 1],
                                 node.free_c + node.rel_c + entry.cum_c[upto - 1],
                                 node.free_m + node.rel_m + entry.cum_m[upto - 1]]
            else:
                amounts[node] = [node.free_g + node.rel_g, node.free_c + node.rel_c, node.free_m + node.rel_m]
            for i in range(upto):
                victims[entry.ranks[i]] = entry.victims[i]
        total = sum(equal_pods_held(shape, a, count) for a in amounts.values())
        kept = [victims[last]]
        for rank in sorted(victims, reverse=True):
            if rank == last:
                continue
            victim = victims[rank]
            change: list[tuple[list[int], int, int, int]] = []
            loss = 0
            for node, g, c, m in victim.pods:
                held = amounts.get(node)
                if held is not None:
                    before = equal_pods_held(shape, held, count)
                    held[0] -= g
                    held[1] -= c
                    held[2] -= m
                    loss += before - equal_pods_held(shape, held, count)
                    change.append((held, g, c, m))
            if total - loss >= count:
                total -= loss  # spared
            else:
                for held, g, c, m in change:
                    held[0] += g
                    held[1] += c
                    held[2] += m
                kept.append(victim)
        kept.sort(key=lambda v: self.rank[id(v)])
        return kept
