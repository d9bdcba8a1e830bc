"""Fair share of idle capacity (DESIGN §2b `idle_share: fair`).

The idle pass repeatedly takes, among the jobs not yet tried, the one with the highest priority, then
the lowest borrowed share of its quota, then pending order. A quota's borrowed share = GPUs (all models)
its own jobs hold Not in Quota — running, not chosen as victims this cycle, plus those admitted Not in
Quota earlier in this pass — ÷ max(1, its `min` GPUs). Pools never share capacity, so each pool's jobs
may come in their own order: jobs of fifo pools keep pending order, ahead of the fair ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from itertools import chain
from typing import TYPE_CHECKING

from ..types import GPU_PREFIX, IDLE_SHARE_FAIR
from .base import CyclePolicy

if TYPE_CHECKING:
    from ..demand import Demand
    from ..state import CycleState


def gpus_of(request: Mapping[str, int]) -> int:
    """GPUs of all models in a resource vector."""
    return sum(amount for key, amount in request.items() if key.startswith(GPU_PREFIX))


def fair_idle_order(
    demands: Iterable[Demand],
    borrowed: dict[str, int],
    min_gpus: Callable[[str], int],
    admitted_gpus: Callable[[Demand], int | None],
) -> Iterator[Demand]:
    """The fair order over `demands` (given in pending order). `borrowed` (quota -> GPUs) is updated here
    after each admission, which `admitted_gpus` reports once the caller has tried the job (None: not
    admitted). Shares only grow during the pass, so a heap entry whose share is stale is pushed again
    with the current one instead of being taken."""

    def share(quota: str) -> Fraction:
        return Fraction(borrowed.get(quota, 0), max(1, min_gpus(quota)))

    heap = [(-d.job.priority, share(d.job.quota), i, d) for i, d in enumerate(demands)]
    heapq.heapify(heap)
    while heap:
        priority, was, i, demand = heapq.heappop(heap)
        now = share(demand.job.quota)
        if now != was:
            heapq.heappush(heap, (priority, now, i, demand))
            continue
        yield demand
        gpus = admitted_gpus(demand)
        if gpus:
            borrowed[demand.job.quota] = borrowed.get(demand.job.quota, 0) + gpus


class FairIdleShare(CyclePolicy):
    def idle_order(self, state: CycleState, demands: list[Demand]) -> Iterable[Demand]:
        fair = [d for d in demands if state.snapshot.policy_of(d.pool or "").idle_share == IDLE_SHARE_FAIR]
        if not fair:
            return demands
        decided = state.decisions
        borrowed: dict[str, int] = {}  # quota -> GPUs its own jobs hold Not in Quota, victims left out
        for victim in state.victims.ordered + [v for v, _ in state.protected]:
            shrunk = decided.shrunk.get(victim.job.name)
            if victim.job.name not in decided.preempted and (shrunk is None or victim.extra not in shrunk.indexes):
                borrowed[victim.quota] = borrowed.get(victim.quota, 0) + gpus_of(victim.request)

        def min_gpus(quota: str) -> int:
            qnode = state.quotas.get(quota)
            return gpus_of(qnode.min) if qnode is not None else 0

        def admitted_gpus(demand: Demand) -> int | None:
            return demand.gpus if demand.job.name in decided.admitted else None

        chosen = {d.job.name for d in fair}
        rest = [d for d in demands if d.job.name not in chosen]
        return chain(rest, fair_idle_order(fair, borrowed, min_gpus, admitted_gpus))  # lazy: shares move
