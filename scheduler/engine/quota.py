"""The quota tree and its arithmetic (DESIGN §2).

Per quota Q, for Q's whole subtree:
- `inq`: resources of In Quota jobs (running, admitted In Quota this cycle, nominated);
- `used`: everything the subtree's jobs hold (In Quota or not), the figure `max` caps.
Terminating jobs and this cycle's victims count in neither: their capacity is on its way back.

A job *fits in quota* when for Q and every ancestor `inq + request <= min` (a key left out of `min`
counts as 0), `own(Q) + request <= ownmin(Q)`, and, where Q or an ancestor has a `max`,
`used + request <= max` (a key left out of `max` is not capped). Every quota keeps its chain (itself,
then its ancestors) so a check costs O(depth) and never walks the tree. What is kept is `room` =
`min − inq` per resource, so the check is one comparison per resource and level.

A guarantee given to a child is the child's: a quota with children keeps only `ownmin` = its `min`
minus its children's `min` for the jobs submitted to exactly it. That is one more level at the head of
its chain (`QuotaNode.own`), charged only by those jobs, so every walk of the chain (checks, charges,
promotion, demotion, holds) applies the rule with no code of its own. A leaf's `ownmin` is its `min`
and its own use its subtree's, so a leaf has no such level.

Victims and `max`: a Not in Quota victim chosen this cycle keeps counting in `used` until the cycle
ends (its pods still run); an In Quota victim stops counting against its quota once chosen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .reasons import MaxReached, QuotaFull
from .resources import Resources, add_into, describe_amount, vector
from .types import Node, Quota


@dataclass(slots=True, eq=False)
class QuotaNode:
    name: str
    parent: str | None
    pool: str
    min: dict[str, int]
    max: dict[str, int] | None
    chain: tuple[QuotaNode, ...] = ()  # itself first, then each ancestor up to the root
    room: dict[str, int] = field(default_factory=dict)  # min − inq: what In Quota jobs may still take
    held: dict[str, int] = field(default_factory=dict)  # starvation_hold: taken from `room` for starving jobs
    used: dict[str, int] = field(default_factory=dict)
    own: bool = False  # the level of what a parent keeps for its own jobs (`ownmin`), not a quota of its own
    own_level: QuotaNode | None = None  # a parent's own level (its chain's head), None for a leaf

    def __post_init__(self) -> None:
        self.room = dict(self.min)

    @property
    def inq(self) -> dict[str, int]:
        """What In Quota jobs hold in the subtree (`min − room`), resources held only."""
        amounts = {key: self.min.get(key, 0) - self.room.get(key, 0) for key in {*self.min, *self.room}}
        return {key: amount for key, amount in amounts.items() if amount}


def pool_capacity(nodes: Iterable[Node], pool: str) -> dict[str, int]:
    """Installed capacity of a pool (cordoned nodes included: a cordon does not shrink guarantees)."""
    total: dict[str, int] = {}
    for node in nodes:
        if node.pool == pool:
            add_into(total, vector(node.gpus, node.gpu_type, node.cpu_m, node.memory_mib))
    return total


def own_min(quota_min: Resources, children_min: Iterable[Resources]) -> dict[str, int]:
    """`ownmin` (DESIGN §2): what a quota keeps for the jobs submitted to exactly it, per resource —
    its `min` less its children's (never below 0; a tree whose children ask more is refused anyway)."""
    kept = dict(quota_min)
    for child in children_min:
        add_into(kept, child, sign=-1)
    return {key: max(0, amount) for key, amount in kept.items()}


def states_no_min(quota: Quota) -> bool:
    """No `min` at all, or every amount in it 0 (how the database stores "none")."""
    return not any(quota.min.values())


def effective_min(quota: Quota, nodes: Iterable[Node]) -> dict[str, int]:
    """A root quota that states no `min` is guaranteed its whole pool ("a root's min is the pool's
    capacity"); a stated one is taken as written, so a scenario can model a smaller guarantee."""
    if quota.parent is None and states_no_min(quota):
        return pool_capacity(nodes, quota.pool)
    return dict(quota.min)


class QuotaTree:
    def __init__(self, quotas: Iterable[Quota], nodes: Iterable[Node] = ()) -> None:
        quotas = list(quotas)
        nodes = list(nodes)
        self._nodes: dict[str, QuotaNode] = {
            q.name: QuotaNode(
                name=q.name,
                parent=q.parent,
                pool=q.pool,
                min=effective_min(q, nodes),
                max=dict(q.max) if q.max is not None else None,
            )
            for q in quotas
        }
        for qnode in self._nodes.values():
            chain = [qnode]
            while chain[-1].parent is not None and chain[-1].parent in self._nodes:
                chain.append(self._nodes[chain[-1].parent])
                if len(chain) > len(self._nodes):
                    raise ValueError(f"quota {qnode.name}: its parents form a cycle")
            qnode.chain = tuple(chain)
        children: dict[str, list[QuotaNode]] = {}
        for qnode in self._nodes.values():
            if qnode.parent in self._nodes:
                children.setdefault(qnode.parent, []).append(qnode)
        for name, kids in children.items():
            parent = self._nodes[name]
            own = QuotaNode(name=name, parent=None, pool=parent.pool, max=None, own=True,
                            min=own_min(parent.min, (kid.min for kid in kids)))
            parent.chain = (own, *parent.chain)  # only the parent's own jobs pass through its own level
            parent.own_level = own
        self.holders: dict[str, tuple[str, Resources]] = {}  # starvation_hold: job -> (quota, request)
        self.holding: dict[str, tuple[str, dict[str, int]]] = {}  # job -> (quota, what it holds now)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def get(self, name: str) -> QuotaNode | None:
        return self._nodes.get(name)

    def pool(self, name: str) -> str | None:
        qnode = self._nodes.get(name)
        return qnode.pool if qnode is not None else None

    # --- checks: each returns None when the request fits, else the reason it does not ----------------

    def min_shortfall(self, name: str, request: Resources) -> QuotaFull | None:
        items = request.items()
        for qnode in self._nodes[name].chain:
            room = qnode.room
            for key, need in items:
                if need > room.get(key, 0):
                    return QuotaFull(qnode.name, key, need, room.get(key, 0), qnode.min.get(key, 0),
                                     qnode.held.get(key, 0), own=qnode.own)
        return None

    def could_fit(self, name: str, request: Resources) -> bool:
        """The request is within the `min` of the quota and every ancestor, and within what the quota
        keeps for its own jobs: it fits in quota once they hold nothing else."""
        return all(need <= qnode.min.get(key, 0) for qnode in self._nodes[name].chain for key, need in request.items())

    def max_shortfall(self, name: str, request: Resources) -> MaxReached | None:
        for qnode in self._nodes[name].chain:
            if qnode.max is None:
                continue
            for key, need in request.items():
                limit = qnode.max.get(key)
                if limit is None:
                    continue
                used = qnode.used.get(key, 0)
                if used + need > limit:
                    return MaxReached(qnode.name, key, need, limit - used, limit)
        return None

    def shortfall(self, name: str, request: Resources) -> QuotaFull | MaxReached | None:
        """Fits in quota (DESIGN §2): the guarantee of Q and its ancestors, then any `max` on the way."""
        return self.min_shortfall(name, request) or self.max_shortfall(name, request)

    # --- accounting ------------------------------------------------------------------------------------

    # The sums are kept up to date job by job (never recomputed from the jobs); the loops are written out
    # because they run for every admission, nomination and preemption of a cycle.

    def charge(self, name: str, request: Resources, *, in_quota: bool) -> None:
        """A job now holds `request` in this subtree (running, admitted or nominated)."""
        items = request.items()
        for qnode in self._nodes[name].chain:
            used = qnode.used
            for key, amount in items:
                used[key] = used.get(key, 0) + amount
            if in_quota:
                room = qnode.room
                for key, amount in items:
                    room[key] = room.get(key, 0) - amount

    def promote(self, name: str, request: Resources) -> None:
        """A Not in Quota job becomes In Quota: its use is already in `used`."""
        for qnode in self._nodes[name].chain:
            add_into(qnode.room, request, sign=-1)

    # --- starvation_hold (engine/policies/starvation.py): `holders` (job -> (quota, request)), per cycle

    def hold_for(self, job: str) -> None:
        """A holder tried by the in-quota pass and still pending takes what is left of its request's
        guarantee in its quota and every ancestor (per resource, at most the least room on the chain):
        later jobs and promotions cannot. Never more than is free: other quotas' guarantees stay whole."""
        if job not in self.holders or job in self.holding:
            return
        name, request = self.holders[job]
        chain = self._nodes[name].chain
        taken = {}
        for key, need in request.items():
            amount = min(need, *(max(0, qnode.room.get(key, 0)) for qnode in chain))
            if amount > 0:
                taken[key] = amount
        for qnode in chain:
            add_into(qnode.room, taken, sign=-1)
            add_into(qnode.held, taken)
        self.holding[job] = (name, taken)

    def unhold_for(self, job: str) -> None:
        """Give back what `hold_for` took for the job."""
        name, taken = self.holding.pop(job, (None, None))
        if name is not None:
            for qnode in self._nodes[name].chain:
                add_into(qnode.room, taken)
                add_into(qnode.held, taken, sign=-1)

    def end_holds(self) -> None:
        for job in list(self.holding):
            self.unhold_for(job)

    def demote(self, name: str, request: Resources) -> None:
        """An In Quota job becomes Not in Quota (preempt_within): it keeps its use, frees its guarantee."""
        for qnode in self._nodes[name].chain:
            add_into(qnode.room, request)

    def release(self, name: str, request: Resources) -> None:
        """A Not in Quota victim stops counting: its capacity is being released."""
        items = request.items()
        for qnode in self._nodes[name].chain:
            used = qnode.used
            for key, amount in items:
                used[key] = used.get(key, 0) - amount


@dataclass(frozen=True, slots=True)
class TreeViolation:
    """One broken rule of a quota tree; `tree_problems` and the quota services render it."""

    quota: str
    rule: str  # unknown_parent | other_pool | cycle | min_over_max | children_over_parent
    other: str = ""  # the parent (unknown_parent, other_pool, children_over_parent)
    key: str = ""  # the resource (min_over_max, children_over_parent)
    amount: int = 0  # the quota's min, or the children's min in all
    limit: int = 0  # the max, or the parent's (effective) min
    pool: str = ""  # other_pool: the quota's pool, then its parent's
    other_pool: str = ""


def tree_violations(quotas: Iterable[Quota], nodes: Iterable[Node]) -> list[TreeViolation]:
    """Every broken rule of the tree: a parent must exist and be in the same pool, parents never form
    a cycle, `min` never exceeds `max`, and children's `min` add up to no more than their parent's
    (a root stating no `min` is guaranteed its pool's capacity). The one home of these rules."""
    quotas = list(quotas)
    nodes = list(nodes)
    by_name = {q.name: q for q in quotas}
    found: list[TreeViolation] = []
    for q in quotas:
        if q.parent is None:
            continue
        parent = by_name.get(q.parent)
        if parent is None:
            found.append(TreeViolation(q.name, "unknown_parent", other=q.parent))
        elif parent.pool != q.pool:
            found.append(TreeViolation(q.name, "other_pool", other=parent.name, pool=q.pool,
                                       other_pool=parent.pool))
    for q in quotas:
        seen = {q.name}
        parent = by_name.get(q.parent) if q.parent else None
        while parent is not None:
            if parent.name in seen:
                found.append(TreeViolation(q.name, "cycle"))
                break
            seen.add(parent.name)
            parent = by_name.get(parent.parent) if parent.parent else None
    for q in quotas:
        for key, amount in sorted(q.min.items()):
            if q.max is not None and key in q.max and amount > q.max[key]:
                found.append(TreeViolation(q.name, "min_over_max", key=key, amount=amount, limit=q.max[key]))
    children: dict[str, list[Quota]] = {}
    for q in quotas:
        if q.parent in by_name:
            children.setdefault(q.parent, []).append(q)
    for parent_name, kids in children.items():
        parent_min = effective_min(by_name[parent_name], nodes)
        total: dict[str, int] = {}
        for kid in kids:
            add_into(total, kid.min)
        for key, amount in sorted(total.items()):
            if amount > parent_min.get(key, 0):
                found.append(TreeViolation(kids[-1].name, "children_over_parent", other=parent_name, key=key,
                                           amount=amount, limit=parent_min.get(key, 0)))
    return found


def tree_problems(quotas: Iterable[Quota], nodes: Iterable[Node]) -> list[tuple[str, str, str]]:
    """What makes a quota tree invalid, as (quota name, field, message); empty when it is sound."""
    problems: list[tuple[str, str, str]] = []
    for v in tree_violations(quotas, nodes):
        if v.rule == "unknown_parent":
            problems.append((v.quota, "parent", f"unknown quota '{v.other}'"))
        elif v.rule == "other_pool":
            problems.append((v.quota, "resource_type",
                             f"quota is in pool {v.pool} but its parent {v.other} is in {v.other_pool}"))
        elif v.rule == "cycle":
            problems.append((v.quota, "parent", "quota parents form a cycle"))
        elif v.rule == "min_over_max":
            problems.append((v.quota, "min", f"min {describe_amount(v.key, v.amount)} is over max "
                                             f"{describe_amount(v.key, v.limit)}"))
        else:
            problems.append((v.quota, "min", f"children of {v.other} have a min of {describe_amount(v.key, v.amount)} "
                                             f"in all, over its min of {describe_amount(v.key, v.limit)}"))
    return problems
