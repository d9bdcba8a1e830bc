"""The cycle's failure memos.

Free capacity only shrinks during a cycle, and free + being-released + reclaimable capacity only shrinks
during the in-quota pass (a victim's capacity moves from "reclaimable" to "being released"). For a gang
of equal pods, fitting is a count that can only shrink with capacity, so once `n` such pods failed in a
pool/model, `n` or more fail again for the rest of the cycle: skipping them is exact, and it is what
keeps a long queue on a full cluster fast. Gangs of mixed pod sizes are always tried (best fit on mixed
sizes is not monotone). Being-released capacity grows when a victim is chosen (`Memos.released` forgets
its nodes' groups then), and the candidates grow when preempt_within's demotions stand (`Memos.reclaim`
forgets the pool). When jobs must keep off different nodes (drain sets) the reasoning breaks, and the
starvation guard switches the memos off (`Memos.off`).
"""

from __future__ import annotations

from collections.abc import Iterable

from .demand import Demand


class FailureMemo:
    """Smallest failed gang size per (pool, model, pod size), for gangs of equal pods (see the module doc)."""

    __slots__ = ("_failed", "_on")

    def __init__(self) -> None:
        # (pool, model) -> pod size -> smallest gang size that failed
        self._failed: dict[tuple[str | None, str | None], dict[tuple[int, int, int], int]] = {}
        self._on = True

    def known_to_fail(self, demand: Demand, model: str | None) -> bool:
        if demand.shape is None:
            return False
        sizes = self._failed.get((demand.pool, model))
        if sizes is None:
            return False
        failed = sizes.get(demand.shape)
        return failed is not None and failed <= demand.count

    def failed(self, demand: Demand, model: str | None) -> None:
        if demand.shape is not None and self._on:
            sizes = self._failed.setdefault((demand.pool, model), {})
            sizes[demand.shape] = min(sizes.get(demand.shape, demand.count), demand.count)

    def off(self) -> None:
        """Remember nothing from now on (drain sets: each job may use other nodes)."""
        self._failed.clear()
        self._on = False

    def forget_pool(self, pool: str) -> None:
        """Candidates were added in this pool (jobs demoted by preempt_within): forget its failures."""
        for key in [key for key in self._failed if key[0] == pool]:
            del self._failed[key]

    def forget(self, groups: Iterable[tuple[str, str]]) -> None:
        """Capacity was added on nodes of these (pool, model)s: what failed there (or on any model of the
        pool, for jobs without GPUs) may fit now."""
        for pool, model in groups:
            self._failed.pop((pool, None), None)
            self._failed.pop((pool, model), None)


class Memos:
    """The cycle's memos, one per question: placing on free capacity, on free + being-released capacity,
    reclaiming (free + being-released + the candidates), and reclaiming protected candidates too (§2b
    min_runtime_s's reason)."""

    __slots__ = ("free", "released", "reclaim", "protected")

    def __init__(self) -> None:
        self.free = FailureMemo()
        self.released = FailureMemo()
        self.reclaim = FailureMemo()
        self.protected = FailureMemo()

    def off(self) -> None:
        for memo in (self.free, self.released, self.reclaim, self.protected):
            memo.off()
