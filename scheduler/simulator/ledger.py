"""GPU bookkeeping of a replay, and the pruning bound it gives (see replay.py's module doc).

The ledger counts GPUs by (pool, model): capacity, held by pods (running or terminating), being
released (terminating) and borrowed (running Not in Quota); and per quota and model what counts
against its guarantee (inq, DESIGN §2). A quota with children also has an own level: what it keeps
beside their guarantees (`ownmin`) and what its own jobs count against it, as the engine's quota tree
has. From these, `bound` says how many jobs of a class of identical pending jobs could at most be
admitted or nominated in one cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.engine.quota import effective_min, own_min
from scheduler.engine.types import GPU_PREFIX, IDLE_OFF, IDLE_ONLY, Node, Pod, Quota


class JobClass:
    """Pending jobs identical to the engine, in queue order, and what bounds their admissions."""

    __slots__ = ("queue", "gpus", "prunable", "quota", "quota_path", "models", "in_quota", "idle", "priority", "fits")

    def __init__(
        self,
        quota: str,
        pods: tuple[Pod, ...],
        path: tuple[str, ...],
        models: tuple[tuple[str, str], ...],
        idle: str,
        priority: int,
        fits: bool,
    ) -> None:
        self.queue: list[tuple[float, str, int]] = []  # (queue time, name, job index)
        self.quota = quota
        self.gpus = sum(pod.gpus for pod in pods)
        # "If one fails, later ones fail" holds for gangs of equal pods; best fit over mixed pod
        # sizes is not monotone (the engine says the same), so those classes are never pruned.
        self.prunable = self.gpus > 0 and len(set(pods)) == 1
        self.quota_path = path
        self.models = models  # (pool, model) pairs the class may use
        self.in_quota = idle != IDLE_ONLY  # may be admitted against the guarantee
        self.idle = idle != IDLE_OFF  # may run on idle resources
        self.priority = priority
        self.fits = fits  # its GPUs fit its quota's guarantee (FIFO skips the others)


class Ledger:
    def __init__(self, nodes: Sequence[Node], quotas: Sequence[Quota], paths: Mapping[str, tuple[str, ...]]) -> None:
        self.capacity: dict[tuple[str, str], int] = {}
        self.node_count: dict[tuple[str, str], int] = {}  # schedulable nodes
        for node in nodes:
            if node.schedulable:
                key = (node.pool, node.gpu_type)
                self.capacity[key] = self.capacity.get(key, 0) + node.gpus
                self.node_count[key] = self.node_count.get(key, 0) + 1
        self.held = dict.fromkeys(self.capacity, 0)
        self.releasing = dict.fromkeys(self.capacity, 0)
        self.borrowed = dict.fromkeys(self.capacity, 0)
        self.models_of_pool: dict[str, tuple[str, ...]] = {}
        for pool, model in sorted(self.capacity):
            self.models_of_pool[pool] = (*self.models_of_pool.get(pool, ()), model)
        # Guarantee of each quota per model (a root stating no min holds its pool).
        self.guarantee: dict[str, dict[str, int]] = {}
        guaranteed = {quota.name: effective_min(quota, nodes) for quota in quotas}
        for quota in quotas:
            self.guarantee[quota.name] = _gpus_by_model(guaranteed[quota.name])
        self.inq: dict[str, dict[str, int]] = {q.name: {} for q in quotas}
        # The own level of each quota with children (DESIGN §2: a guarantee given to a child is the child's).
        children: dict[str, list[str]] = {}
        for quota in quotas:
            if quota.parent in guaranteed:
                children.setdefault(quota.parent, []).append(quota.name)
        self.own_guarantee: dict[str, dict[str, int]] = {
            name: _gpus_by_model(own_min(guaranteed[name], (guaranteed[kid] for kid in kids)))
            for name, kids in children.items()
        }
        self.own_inq: dict[str, dict[str, int]] = {name: {} for name in self.own_guarantee}
        self.paths = paths

    @property
    def total_gpus(self) -> int:
        return sum(self.capacity.values())

    def add(self, table: dict, key: tuple[str, str], delta: int) -> None:
        table[key] = table.get(key, 0) + delta

    def count_inq(self, quota: str, model: str, gpus: int) -> None:
        """Add `gpus` (negative: remove) to what counts against `quota`'s path on `model`."""
        for name in self.paths[quota]:
            counted = self.inq[name]
            counted[model] = counted.get(model, 0) + gpus
        own = self.own_inq.get(quota)
        if own is not None:
            own[model] = own.get(model, 0) + gpus

    def headroom(self, cls: JobClass, model: str) -> int:
        """The least guarantee left on `model` along the class's quota path, its quota's own level first."""
        room = min(self.guarantee[q].get(model, 0) - self.inq[q].get(model, 0) for q in cls.quota_path)
        own = self.own_guarantee.get(cls.quota)
        if own is not None:
            room = min(room, own.get(model, 0) - self.own_inq[cls.quota].get(model, 0))
        return room

    def may_fit_in_quota(self, cls: JobClass) -> bool:
        """Whether a job of the class could fit in quota on some model: False only for `off` classes
        with less headroom than one job's GPUs on every model. CPU, memory and `max` are left out,
        so this says True whenever the engine's own test could (DESIGN §2b: only such jobs starve)."""
        if cls.idle or not cls.gpus:
            return True
        return any(self.headroom(cls, model) >= cls.gpus for _, model in cls.models)

    def offered(self, cls: JobClass, now: float, starvation_s: float, hold: bool = False) -> int:
        """How many of the class's queue go into the snapshot: its bound, or with a starvation guard the
        starving jobs at its head that could get a drain set, if more (only they can: replay.py).

        With the starvation hold, a class's head that waited past the guard goes in as well: its
        quota's holder is the first such job of the quota whose request the guarantee could take, and
        a class shares one request, so the holder is always a class's head (engine/starvation.py)."""
        bound = self.bound(cls)
        if starvation_s <= 0 or bound >= len(cls.queue):
            return bound
        if hold and cls.in_quota and bound == 0 and now - cls.queue[0][0] > starvation_s:
            bound = 1
        if not self.may_fit_in_quota(cls):
            return bound
        return max(bound, min(starving_count(cls.queue, now, starvation_s), self.drain_sets_at_most(cls)))

    def drain_sets_at_most(self, cls: JobClass) -> int:
        """How many of the class's starving jobs could get a drain set in one cycle: drain sets are
        disjoint and hold a node at least, and once one job of the class gets none (the nodes left
        cannot hold it) no later one can, so they are at most the first `nodes` of them."""
        return sum(self.node_count.get(pool_model, 0) for pool_model in cls.models)

    def bound(self, cls: JobClass) -> int:
        """How many jobs of the class could at most be admitted or nominated in this cycle.

        In quota, a job needs guarantee headroom on every quota of its path and capacity that is
        free, being released or borrowed (reclaimable); on idle resources it needs free capacity.
        Summing over the GPU models the class may use overcounts, which only makes the bound safe.
        """
        if not cls.prunable:
            return len(cls.queue)
        in_quota = idle = 0
        for pool_model in cls.models:
            free = self.capacity.get(pool_model, 0) - self.held.get(pool_model, 0)
            if cls.in_quota:
                headroom = self.headroom(cls, pool_model[1])
                reachable = free + self.releasing.get(pool_model, 0) + self.borrowed.get(pool_model, 0)
                in_quota += max(0, min(headroom, reachable))
            if cls.idle:
                idle += max(0, free)
        return in_quota // cls.gpus + idle // cls.gpus


def _gpus_by_model(amounts: Mapping[str, int]) -> dict[str, int]:
    return {key[len(GPU_PREFIX):]: amount for key, amount in amounts.items() if key.startswith(GPU_PREFIX)}


def starving_count(queue: Sequence[tuple[float, str, int]], now: float, limit: float) -> int:
    """How many jobs at the head of a class's queue wait longer than `limit` (DESIGN §2b starving).

    The queue is in queue-time order and a class shares one priority, so those jobs are a prefix;
    the test is the engine's own (`now - queue time > limit`), found by bisection. Only they can get
    a drain set, so with them in the snapshot a pruned job changes no drain set: it would change
    nothing but its own failed attempt.
    """
    low, high = 0, len(queue)
    while low < high:
        middle = (low + high) // 2
        if now - queue[middle][0] > limit:
            low = middle + 1
        else:
            high = middle
    return low
