"""Free and being-released capacity per node, indexed so best fit finds the tightest node quickly.

Each node carries two amounts placement may use:
- *free*: not held by any pod and not reserved by a nominated job;
- *being released* (`rel`): held by pods that are exiting (terminating jobs, this cycle's victims)
  and not yet reserved. It is not free: only the in-quota pass may nominate a job on it.
A reservation takes being-released capacity first, then free capacity (DESIGN §2 "Reservations");
`take(releasing_first=True)` is that rule.

The index: schedulable nodes grouped by (pool, GPU model), and within a group bucketed by free GPU
count, each bucket sorted by (free CPU, name): the order of `fit.best_fit_key`. Best fit ("least free
GPUs left, then least free CPU, then name") is then the first node with enough memory found scanning buckets upward from the pod's
GPU count, starting in each bucket at the first node with enough CPU. Nodes with capacity being
released are listed per group so the views that may use it can look at them separately.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator

from .fit import best_fit_key
from .types import Node

Take = tuple[int, int, int]  # (GPUs, CPU millicores, memory MiB)


class NodeState:
    __slots__ = (
        "name", "pool", "model", "schedulable", "cap_g", "cap_c", "cap_m",
        "free_g", "free_c", "free_m", "rel_g", "rel_c", "rel_m", "releasing", "group",
    )

    def __init__(self, node: Node) -> None:
        self.name = node.name
        self.pool = node.pool
        self.model = node.gpu_type
        self.schedulable = node.schedulable
        self.cap_g, self.cap_c, self.cap_m = node.gpus, node.cpu_m, node.memory_mib
        self.free_g, self.free_c, self.free_m = node.gpus, node.cpu_m, node.memory_mib
        self.rel_g = self.rel_c = self.rel_m = 0
        self.releasing: list[str] = []  # jobs whose pods here are exiting (named in "waiting for" reasons)
        self.group: _Group | None = None  # its (pool, model) index once `Capacity.open` made it; None: unschedulable

    def holds(self, g: int, c: int, m: int) -> bool:
        """The node's whole capacity is enough for one pod of this size."""
        return self.cap_g >= g and self.cap_c >= c and self.cap_m >= m

    def __repr__(self) -> str:
        return (
            f"NodeState({self.name}, free=({self.free_g}, {self.free_c}, {self.free_m}), "
            f"rel=({self.rel_g}, {self.rel_c}, {self.rel_m}))"
        )


class _Group:
    """The schedulable nodes of one (pool, model)."""

    __slots__ = ("nodes", "buckets", "releasing", "rel_buckets")

    def __init__(self, nodes: list[NodeState]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        top = max(n.cap_g for n in nodes)
        # buckets[g]: nodes with g free GPUs, as (free CPU, name, node) sorted ascending.
        self.buckets: list[list[tuple[int, str, NodeState]]] = [[] for _ in range(top + 1)]
        for node in self.nodes:
            self.buckets[node.free_g].append((node.free_c, node.name, node))
        for bucket in self.buckets:
            bucket.sort()  # names are unique: tuples never compare the node objects
        # Nodes with unreserved capacity being released, in the order they got it (dict: ordered set).
        self.releasing: dict[NodeState, None] = {n: None for n in self.nodes if n.rel_g or n.rel_c or n.rel_m}
        # The same nodes by what they have unreserved in all (free + being released), bucketed by GPUs
        # and sorted by (CPU, name) like `buckets`: best fit over being-released capacity looks here.
        self.rel_buckets: list[list[tuple[int, str, NodeState]]] = [[] for _ in range(top + 1)]
        for node in self.releasing:
            self.rel_buckets[node.free_g + node.rel_g].append((node.free_c + node.rel_c, node.name, node))
        for bucket in self.rel_buckets:
            bucket.sort()

    def unlist_releasing(self, node: NodeState) -> None:
        bucket = self.rel_buckets[node.free_g + node.rel_g]
        del bucket[bisect_left(bucket, (node.free_c + node.rel_c, node.name))]

    def list_releasing(self, node: NodeState) -> None:
        insort(self.rel_buckets[node.free_g + node.rel_g], (node.free_c + node.rel_c, node.name, node))

    def first_fit_releasing(self, g: int, c: int, m: int) -> NodeState | None:
        """Among nodes with capacity being released: the fewest unreserved GPUs in all (free + being
        released), then the least CPU, then the first name, that holds the pod."""
        buckets = self.rel_buckets
        probe = (c,)
        for avail_g in range(g, len(buckets)):
            bucket = buckets[avail_g]
            if not bucket:
                continue
            for i in range(bisect_left(bucket, probe), len(bucket)):
                node = bucket[i][2]
                if node.free_m + node.rel_m >= m:
                    return node
        return None

    def first_fit(self, g: int, c: int, m: int, skip: dict[NodeState, None] | None) -> NodeState | None:
        """The node with the fewest free GPUs, then the least free CPU, then the first name, that holds
        the pod on free capacity alone."""
        buckets = self.buckets
        probe = (c,)  # sorts before every (c, name, node) entry
        for free_g in range(g, len(buckets)):
            bucket = buckets[free_g]
            if not bucket:
                continue
            for i in range(bisect_left(bucket, probe), len(bucket)):
                node = bucket[i][2]
                if node.free_m >= m and (skip is None or node not in skip):
                    return node
        return None


class Capacity:
    """All nodes of the snapshot; charge running and exiting pods, then `open()` and place."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes: dict[str, NodeState] = {node.name: NodeState(node) for node in nodes}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._pool_groups: dict[str, list[tuple[str, _Group]]] = {}  # pool -> [(model, group)] by model
        self._models: dict[str, list[str]] = {}  # pool -> GPU models, by name
        # Set by the victim index once it exists: every node whose free or being-released capacity changes.
        self.watch: set[NodeState] | None = None

    # --- building ------------------------------------------------------------------------------------

    def hold(self, node_name: str, g: int, c: int, m: int) -> NodeState | None:
        """A running pod holds this much of its node (before `open`)."""
        node = self.nodes.get(node_name)
        if node is not None:
            node.free_g -= g
            node.free_c -= c
            node.free_m -= m
        return node

    def hold_releasing(self, node_name: str, g: int, c: int, m: int, job: str) -> NodeState | None:
        """A pod of a terminating job: its capacity is being released (before `open`)."""
        node = self.hold(node_name, g, c, m)
        if node is not None:
            node.rel_g += g
            node.rel_c += c
            node.rel_m += m
            if job not in node.releasing:
                node.releasing.append(job)
        return node

    def open(self) -> None:
        """Index the nodes new pods may go to. A node whose pods already exceed it (inventory shrank
        under running pods) takes nothing new this cycle, as if cordoned."""
        by_group: dict[tuple[str, str], list[NodeState]] = {}
        for node in self.nodes.values():
            if min(node.free_g, node.free_c, node.free_m) < 0:
                node.schedulable = False
            if node.schedulable:
                by_group.setdefault((node.pool, node.model), []).append(node)
        self._groups = {key: _Group(nodes) for key, nodes in sorted(by_group.items())}
        for group in self._groups.values():
            for node in group.nodes:
                node.group = group
        self._pool_groups = {}
        for (pool, model), group in self._groups.items():
            self._pool_groups.setdefault(pool, []).append((model, group))
            if len(group.buckets) > 1:  # nodes with GPUs
                self._models.setdefault(pool, []).append(model)

    # --- reading -------------------------------------------------------------------------------------

    def models(self, pool: str) -> list[str]:
        """GPU models a job of this pool may land on, in name order (the order unnamed-model jobs try)."""
        return self._models.get(pool, [])

    def _groups_for(self, pool: str, model: str | None) -> list[_Group]:
        if model is None:
            return [group for _, group in self._pool_groups.get(pool, ())]
        group = self._groups.get((pool, model))
        return [group] if group is not None else []

    def schedulable_nodes(self, pool: str, model: str | None) -> Iterator[NodeState]:
        for group in self._groups_for(pool, model):
            yield from group.nodes

    def releasing_nodes(self, pool: str, model: str | None) -> Iterator[NodeState]:
        for group in self._groups_for(pool, model):
            yield from group.releasing

    def nodes_with_room(self, pool: str, model: str | None, g: int) -> Iterator[NodeState]:
        """Schedulable nodes with at least `g` GPUs free or being released (and unreserved)."""
        for group in self._groups_for(pool, model):
            for free_g in range(g, len(group.buckets)):
                for _, _, node in group.buckets[free_g]:
                    if node not in group.releasing:
                        yield node
            for node in group.releasing:
                if node.free_g + node.rel_g >= g:
                    yield node

    def has_releasing(self, pool: str, model: str | None) -> bool:
        return any(group.releasing for group in self._groups_for(pool, model))

    def best_fit(self, pool: str, model: str | None, g: int, c: int, m: int, *, releasing: bool) -> NodeState | None:
        """Best fit for one pod; `releasing`: count unreserved being-released capacity as available too."""
        groups = self._groups_for(pool, model)
        if len(groups) == 1 and not (releasing and groups[0].releasing):
            return groups[0].first_fit(g, c, m, None)  # the common case: one model, free capacity only
        best: NodeState | None = None
        best_key: tuple[int, int, str] | None = None
        for group in groups:
            skip = group.releasing if releasing and group.releasing else None
            node = group.first_fit(g, c, m, skip)
            if node is not None:
                key = best_fit_key(node.free_g, node.free_c, g, c, node.name)
                if best_key is None or key < best_key:
                    best, best_key = node, key
            if skip:
                node = group.first_fit_releasing(g, c, m)
                if node is not None:
                    key = best_fit_key(node.free_g + node.rel_g, node.free_c + node.rel_c, g, c, node.name)
                    if best_key is None or key < best_key:
                        best, best_key = node, key
        return best

    # --- changing ------------------------------------------------------------------------------------

    def take(self, node: NodeState, g: int, c: int, m: int, *, releasing_first: bool) -> Take:
        """Give a pod (or a reservation) this much of `node`; returns the part taken from capacity
        being released, the rest comes out of free capacity."""
        if releasing_first:
            rg, rc, rm = min(g, node.rel_g), min(c, node.rel_c), min(m, node.rel_m)
            if rg or rc or rm:
                self._set_rel(node, node.rel_g - rg, node.rel_c - rc, node.rel_m - rm)
        else:
            rg = rc = rm = 0
        if g - rg or c - rc or m - rm:
            self._set_free(node, node.free_g - (g - rg), node.free_c - (c - rc), node.free_m - (m - rm))
        return rg, rc, rm

    def untake(self, node: NodeState, g: int, c: int, m: int, from_rel: Take) -> None:
        """Undo `take` (a gang that did not fit as a whole holds nothing)."""
        rg, rc, rm = from_rel
        if rg or rc or rm:
            self._set_rel(node, node.rel_g + rg, node.rel_c + rc, node.rel_m + rm)
        if g - rg or c - rc or m - rm:
            self._set_free(node, node.free_g + (g - rg), node.free_c + (c - rc), node.free_m + (m - rm))

    def release(self, node: NodeState, g: int, c: int, m: int, job: str) -> None:
        """A victim's pod: what it held is now being released (it was never free, so free is unchanged)."""
        self._set_rel(node, node.rel_g + g, node.rel_c + c, node.rel_m + m)
        if job not in node.releasing:
            node.releasing.append(job)

    def _set_free(self, node: NodeState, g: int, c: int, m: int) -> None:
        if self.watch is not None:
            self.watch.add(node)
        group = node.group
        if group is None:
            node.free_g, node.free_c, node.free_m = g, c, m
            return
        listed = node in group.releasing
        if listed:
            group.unlist_releasing(node)
        if g != node.free_g or c != node.free_c:
            bucket = group.buckets[node.free_g]
            del bucket[bisect_left(bucket, (node.free_c, node.name))]
            insort(group.buckets[g], (c, node.name, node))
        node.free_g, node.free_c, node.free_m = g, c, m
        if listed:
            group.list_releasing(node)

    def _set_rel(self, node: NodeState, g: int, c: int, m: int) -> None:
        if self.watch is not None:
            self.watch.add(node)
        group = node.group
        if group is None:
            node.rel_g, node.rel_c, node.rel_m = g, c, m
            return
        listed = node in group.releasing
        if listed:
            group.unlist_releasing(node)
        node.rel_g, node.rel_c, node.rel_m = g, c, m
        if g or c or m:
            group.releasing[node] = None  # a node already there keeps its place
            group.list_releasing(node)
        elif listed:
            del group.releasing[node]
