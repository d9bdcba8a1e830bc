"""Opt-in policies of DESIGN §2b that the cycle consults (each off by default; off = §2's rules).

- Minimum runtime (`Policy.min_runtime_s`): `protected_until` says whether a Not in Quota job is still
  protected from reclaim, and until when. Protection depends only on the snapshot (`now` and the job's
  start), so protected jobs are simply left out of the candidates (the victim index included); the
  cycle keeps them aside to word the reason of a job that only they could make room for.
- Fair share of idle capacity (`Policy.idle_share = fair`): `fair_idle_order` yields the idle pass's
  jobs highest priority first, then lowest borrowed share of their quota, then pending order,
  recomputing shares after every admission.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction

from .demand import Demand
from .types import GPU_PREFIX, Job, Policy


def protected_until(job: Job, policy: Policy, now: float | None) -> float | None:
    """The time a running Not in Quota job stops being protected by `min_runtime_s`; None when it is
    not protected (policy off, no `now`, or it has run at least `min_runtime_s` — exactly that much
    included)."""
    if policy.min_runtime_s <= 0 or now is None:
        return None
    started = job.started_at if job.started_at is not None else job.submitted_at
    until = started + policy.min_runtime_s
    return until if until > now else None


def gpus_of(request: Mapping[str, int]) -> int:
    """GPUs of all models in a resource vector."""
    return sum(amount for key, amount in request.items() if key.startswith(GPU_PREFIX))


def fair_idle_order(
    demands: Iterable[Demand],
    borrowed: dict[str, int],
    min_gpus: Callable[[str], int],
    admitted_gpus: Callable[[Demand], int | None],
) -> Iterator[Demand]:
    """DESIGN §2b fair share: among the jobs not tried yet, the highest priority, then the lowest
    borrowed share of its quota (GPUs its own jobs hold Not in Quota ÷ max(1, its min GPUs)), then
    pending order (`demands` come in pending order). `borrowed` (quota -> GPUs) is updated here after
    each admission, which `admitted_gpus` reports once the caller has tried the job (None: not
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
