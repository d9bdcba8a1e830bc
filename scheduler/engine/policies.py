"""Opt-in policies of DESIGN §2b that the cycle consults (each off by default; off = §2's rules).

- Minimum runtime (`Policy.min_runtime_s`, and `starved_min_runtime_s` for a run that began after the
  job's wait passed `starvation_s`, Tidepool's extension): `protected_until` says whether a Not in
  Quota job is still protected from reclaim, and until when. Protection depends only on the snapshot
  (`now`, the job's start and queue time), so protected jobs are simply left out of the candidates
  (the victim index included); the cycle keeps them aside to word the reason of a job that only they
  could make room for.
- `PolicySteps`: the two steps of the cycle (`_Cycle` inherits them) that use these.
- Fair share of idle capacity (`Policy.idle_share = fair`): `fair_idle_order` yields the idle pass's
  jobs highest priority first, then lowest borrowed share of their quota, then pending order,
  recomputing shares after every admission.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from itertools import chain
from typing import TYPE_CHECKING

from .demand import Demand
from .reasons import ProtectedVictims
from .reclaim import VictimQueue
from .types import GPU_PREFIX, IDLE_SHARE_FAIR, Job, Policy

if TYPE_CHECKING:
    from .cycle import _Cycle


def protected_until(job: Job, policy: Policy, now: float | None) -> float | None:
    """The time a running Not in Quota job stops being protected by `min_runtime_s` — or by
    `starved_min_runtime_s` when this run began after its wait (from the first submission, as §2b's)
    passed `starvation_s`; None when it is not protected (policies off, no `now`, or it has run at
    least that long — exactly that much included)."""
    if now is None:
        return None
    started = job.started_at if job.started_at is not None else job.submitted_at
    runtime = policy.min_runtime_s
    if policy.starved_min_runtime_s > 0 and policy.starvation_s > 0 and started - job.submitted_at > policy.starvation_s:
        # It waited past the guard before this run: without this, the freshest borrower is the first
        # victim of the next reclaim (§2's safe-point order), and the guard's work is undone at once.
        runtime = max(runtime, policy.starved_min_runtime_s)
    if runtime <= 0:
        return None
    until = started + runtime
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


class PolicySteps:
    """The cycle's steps for `idle_share` and `min_runtime_s`."""

    def _idle_order(self: _Cycle, still_pending: list[Demand]) -> Iterable[Demand]:
        """Pending order, except in pools whose idle share is fair (DESIGN §2b; pools never share
        capacity, so each pool's jobs may come in their own order)."""
        fair = [d for d in still_pending if self.snapshot.policy_of(d.pool or "").idle_share == IDLE_SHARE_FAIR]
        if not fair:
            return still_pending
        borrowed: dict[str, int] = {}  # quota -> GPUs its own jobs hold Not in Quota, victims left out
        for victim in self.victims.ordered + [v for v, _ in self.protected]:
            if victim.job.name not in self.decisions.preempted:
                borrowed[victim.quota] = borrowed.get(victim.quota, 0) + gpus_of(victim.request)

        def min_gpus(quota: str) -> int:
            qnode = self.quotas.get(quota)
            return gpus_of(qnode.min) if qnode is not None else 0

        def admitted_gpus(demand: Demand) -> int | None:
            return demand.gpus if demand.job.name in self.decisions.admitted else None
        chosen = {d.job.name for d in fair}
        rest = [d for d in still_pending if d.job.name not in chosen]
        return chain(rest, fair_idle_order(fair, borrowed, min_gpus, admitted_gpus))  # lazy: shares move

    def _protected_reason(self: _Cycle, demand: Demand, fitting: list[str | None]) -> ProtectedVictims | None:
        """DESIGN §2b min_runtime_s: the job would fit if protected jobs were candidates too; the reason
        names the earliest time one of those (with a pod where it could be placed) stops being protected."""
        if not self.protected:
            return None
        if self._with_protected is None:
            self._with_protected = VictimQueue(self.victims.untaken() + [v for v, _ in self.protected])
        times: list[float] = []
        for model in fitting:
            if self.no_protected_room.known_to_fail(demand, model):
                continue
            if self._walk(demand, model, self._with_protected) is None:
                self.no_protected_room.failed(demand, model)
                continue
            could_host = self._host_test(demand, model)
            times += [t for v, t in self.protected if v.pool == demand.pool and any(could_host(p[0]) for p in v.pods)]
        return ProtectedVictims(demand.describe(), min(times)) if times else None
