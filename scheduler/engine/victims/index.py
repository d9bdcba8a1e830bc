"""Victim search for gangs of equal pods, indexed by node, in time that grows with the victims a job
takes rather than with all candidates (DESIGN §2 "Victim selection", the same answers as the walk in
`selection`).

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
  which their GPUs alone reach one pod, kept in a heap per (pool, model, GPUs per pod)) and
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
from bisect import bisect_left
from itertools import accumulate

from ..capacity import Capacity, NodeState
from ..placement import equal_pods_held
from .candidates import Victim
from .fill_back import fill_back

NEVER = 1 << 62  # a rank no candidate has: "never, with these candidates"
AT_START = -1  # "already, before any victim"


class _NodeVictims:
    """The untaken candidates with pods on one node, in candidate order, with running totals."""

    __slots__ = ("ranks", "victims", "gs", "cs", "ms", "cum_g", "cum_c", "cum_m")

    def __init__(self) -> None:
        self.ranks: list[int] = []
        self.victims: list[Victim] = []
        # what each holds on this node (all its pods here), and the running totals of those
        self.gs: list[int] = []
        self.cs: list[int] = []
        self.ms: list[int] = []
        self.cum_g: list[int] = []
        self.cum_c: list[int] = []
        self.cum_m: list[int] = []

    def add(self, rank: int, victim: Victim, g: int, c: int, m: int) -> None:
        """Entries arrive in rank order while the index is built; pods of one victim are summed."""
        if self.ranks and self.ranks[-1] == rank:
            self.gs[-1] += g
            self.cs[-1] += c
            self.ms[-1] += m
        else:
            self.ranks.append(rank)
            self.victims.append(victim)
            self.gs.append(g)
            self.cs.append(c)
            self.ms.append(m)

    def remove(self, rank: int) -> None:
        i = bisect_left(self.ranks, rank)
        if i < len(self.ranks) and self.ranks[i] == rank:
            del self.ranks[i], self.victims[i], self.gs[i], self.cs[i], self.ms[i]
            self.totals()

    def totals(self) -> None:
        self.cum_g = list(accumulate(self.gs))
        self.cum_c = list(accumulate(self.cs))
        self.cum_m = list(accumulate(self.ms))

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
        # (pool, model, g) -> heap of (bound, name, version, node), and each node's (bound, version)
        self._bounds: dict[tuple[str, str, int], list[tuple[int, str, int, NodeState]]] = {}
        self._bound_of: dict[tuple[str, str, int], dict[NodeState, tuple[int, int]]] = {}  # (bound, version)
        # (pool, model) -> (g, bound of each node, heap) of each g kept
        self._tracked: dict[tuple[str, str], list[tuple[int, dict[NodeState, tuple[int, int]], list]]] = {}
        self._changed: set[NodeState] = set()
        self._visited: list[tuple[list, dict[NodeState, tuple[int, int]], tuple[int, str, int, NodeState]]] = []
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

    # --- the lower bounds, in a heap per (pool, model, g) --------------------------------------------
    # A node's entry is (bound, name, version, node); a change pushes a new entry with the next version
    # and the old one is dropped when it comes to the top (cheaper than keeping a sorted list sorted).

    def _heap(self, pool: str, model: str, g: int) -> list[tuple[int, str, int, NodeState]]:
        key = (pool, model, g)
        heap = self._bounds.get(key)
        if heap is None:
            of = self._bound_of[key] = {}
            heap = []
            for node in self.capacity.schedulable_nodes(pool, model):
                bound = self.entries(node).reach_g(node, g)
                of[node] = (bound, 0)
                heap.append((bound, node.name, 0, node))
            heapq.heapify(heap)
            self._bounds[key] = heap
            self._tracked.setdefault((pool, model), []).append((g, of, heap))
        return heap

    def _refresh(self) -> None:
        """Bring the bounds of every node changed since the last search up to date."""
        tracked = self._tracked
        for node in self._changed:
            lists = tracked.get((node.pool, node.model))
            if not lists:
                continue
            entry = self.per_node.get(node, self._empty)
            has_g = node.free_g + node.rel_g
            for g, of, heap in lists:
                old = of.get(node)
                if old is None:
                    continue  # not a schedulable node of this group
                short = g - has_g
                if short <= 0:
                    new = AT_START
                else:
                    i = bisect_left(entry.cum_g, short)
                    new = entry.ranks[i] if i < len(entry.ranks) else NEVER
                if new != old[0]:
                    version = old[1] + 1
                    of[node] = (new, version)
                    heapq.heappush(heap, (new, node.name, version, node))
        self._changed.clear()
        # Entries the last search took off its heap go back now, unless their node changed since (a newer
        # entry was just pushed for it).
        for heap, of, entry in self._visited:
            if of[entry[3]][1] == entry[2]:
                heapq.heappush(heap, entry)
        self._visited.clear()

    # --- the search ----------------------------------------------------------------------------------

    def select(self, pool: str, model: str, shape: tuple[int, int, int], count: int) -> list[Victim] | None:
        """The victims to preempt for `count` pods of `shape` (GPUs ≥ 1) on `model` nodes of `pool`, in
        candidate order; [] when they fit already; None when even every candidate would not do."""
        self._refresh()
        g, c, m = shape
        kth: list[int] = []  # the `count` smallest "holds one more pod" ranks so far, negated (max-heap)
        seen: list[tuple[NodeState, int]] = []  # visited nodes and the rank at which they hold one pod
        last = NEVER  # the k-th smallest so far: where the job first fits
        heap = self._heap(pool, model, g)
        of = self._bound_of[(pool, model, g)]
        visited = self._visited  # valid entries taken off the heap, put back by the next `_refresh`
        while heap:
            bound, _, version, node = heap[0]
            if of[node][1] != version:
                heapq.heappop(heap)  # superseded by a newer entry of the node
                continue
            if bound > last or bound == NEVER:
                break
            visited.append((heap, of, heapq.heappop(heap)))
            if count == 1:  # one pod: the node that can hold it soonest
                rank = self.per_node.get(node, self._empty).reach(node, g, c, m)
                seen.append((node, rank))
                if rank < last:
                    last = rank
            else:
                last = self._visit(node, shape, count, kth, seen, last)
            if last == AT_START:
                break
        if last == AT_START:
            return []
        if last == NEVER:
            return None
        return self._fill_back([node for node, first in seen if first <= last], last, shape, count)

    def _visit(self, node: NodeState, shape: tuple[int, int, int], count: int, kth: list[int],
               seen: list[tuple[NodeState, int]], last: int) -> int:
        """Add the ranks at which `node` holds 1, 2, ... pods to the `count` smallest kept in `kth` (a
        max-heap of negated ranks) and note the first in `seen`; returns the new k-th smallest."""
        g, c, m = shape
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
        return last

    def _fill_back(self, holding: list[NodeState], last: int, shape: tuple[int, int, int], count: int) -> list[Victim]:
        """Fill back (`fill_back`) over the chosen victims (ranks up to `last`, the last one always kept);
        only victims with a pod on a node in `holding` can matter."""
        if len(holding) == 1:
            node = holding[0]
            entry = self.per_node[node]
            upto = entry.upto(last)
            kept = fill_back(range(upto), _NodeFit(node, entry, upto, shape, count))
            return [entry.victims[i] for i in kept]
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
        return fill_back([victims[rank] for rank in sorted(victims)], _HoldingFit(amounts, shape, count))


class _HoldingFit:
    """`fill_back`'s fit over the nodes that hold the gang's pods: pods of `shape` they hold in all."""

    __slots__ = ("amounts", "shape", "count", "total")

    def __init__(self, amounts: dict[NodeState, list[int]], shape: tuple[int, int, int], count: int) -> None:
        self.amounts, self.shape, self.count = amounts, shape, count
        self.total = sum(equal_pods_held(shape, a, count) for a in amounts.values())

    def add(self, victim: Victim, sign: int = 1) -> None:
        shape, count = self.shape, self.count
        for node, g, c, m in victim.pods:
            held = self.amounts.get(node)
            if held is not None:
                before = equal_pods_held(shape, held, count)
                held[0] += sign * g
                held[1] += sign * c
                held[2] += sign * m
                self.total += equal_pods_held(shape, held, count) - before

    def fits(self) -> bool:
        return self.total >= self.count


class _NodeFit:
    """`fill_back`'s fit when one node holds the pods: only what the chosen entries (indexes into the
    node's candidates) hold on it counts."""

    __slots__ = ("entry", "shape", "count", "g", "c", "m")

    def __init__(self, node: NodeState, entry: _NodeVictims, upto: int, shape: tuple[int, int, int], count: int
                 ) -> None:
        self.entry, self.shape, self.count = entry, shape, count
        self.g = node.free_g + node.rel_g + entry.cum_g[upto - 1]
        self.c = node.free_c + node.rel_c + entry.cum_c[upto - 1]
        self.m = node.free_m + node.rel_m + entry.cum_m[upto - 1]

    def add(self, i: int, sign: int = 1) -> None:
        entry = self.entry
        self.g += sign * entry.gs[i]
        self.c += sign * entry.cs[i]
        self.m += sign * entry.ms[i]

    def fits(self) -> bool:
        if self.count == 1:
            need_g, need_c, need_m = self.shape
            return self.g >= need_g and self.c >= need_c and self.m >= need_m
        return equal_pods_held(self.shape, (self.g, self.c, self.m), self.count) >= self.count
