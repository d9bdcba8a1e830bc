"""The cycle's failure memo: see the module docstring of `cycle` ("Failure memo")."""

from __future__ import annotations

from collections.abc import Iterable

from .demand import Demand


class FailureMemo:
    """Smallest failed gang size per (pool, model, pod size), for gangs of equal pods (see module doc)."""

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
