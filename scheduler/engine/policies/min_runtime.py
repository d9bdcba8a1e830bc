"""Minimum runtime (DESIGN §2b `min_runtime_s`, and Tidepool's `starved_min_runtime_s`).

A Not in Quota job whose current run started after `now − min_runtime_s` is no reclaim candidate (one
that has run exactly that long is). With `starved_min_runtime_s`, a run that began after the job's wait
(from its first submission) passed `starvation_s` is protected that long instead, if longer: without it
the freshest borrower is the first victim of the next reclaim (§2's safe-point order), and the
starvation guard's work is undone at once. Protection depends only on the snapshot, so protected jobs
are simply left out of the candidates (`CycleState.protected` keeps them, with until when); a job that
only they could make room for is told the earliest time one of them stops being protected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..reasons import ProtectedVictims
from ..types import Job, Policy
from ..victims.candidates import Victim, VictimQueue
from ..victims.selection import host_test, walk
from .base import CyclePolicy

if TYPE_CHECKING:
    from ..demand import Demand
    from ..state import CycleState


def protected_until(job: Job, policy: Policy, now: float | None) -> float | None:
    """The time a running Not in Quota job stops being protected; None when it is not protected (policies
    off, no `now`, or it has run at least that long — exactly that much included)."""
    if now is None:
        return None
    started = job.run_started_at  # an elastic job's run began at its last resize (§2c)
    runtime = policy.min_runtime_s
    if policy.starved_min_runtime_s > 0 and policy.starvation_s > 0 and started - job.submitted_at > policy.starvation_s:
        runtime = max(runtime, policy.starved_min_runtime_s)
    if runtime <= 0:
        return None
    until = started + runtime
    return until if until > now else None


def is_on(policy: Policy) -> bool:
    return policy.min_runtime_s > 0 or (policy.starved_min_runtime_s > 0 and policy.starvation_s > 0)


class MinimumRuntime(CyclePolicy):
    def __init__(self) -> None:
        # The candidates with the protected ones among them, for the reason; rebuilt when the cycle's
        # candidates are replaced (preempt_within's demotions joined them).
        self.with_protected: VictimQueue | None = None
        self.built_from: VictimQueue | None = None

    def protected_until(self, state: CycleState, victim: Victim) -> float | None:
        return protected_until(victim.job, state.snapshot.policy_of(victim.pool), state.now)

    def victim_chosen(self, state: CycleState, victim: Victim) -> None:
        if self.with_protected is not None:
            self.with_protected.take(victim)

    def why_no_room(self, state: CycleState, demand: Demand, models: list[str | None]) -> ProtectedVictims | None:
        """The job would fit if protected jobs were candidates too: the earliest time one of those (with a
        pod where it could be placed) stops being protected."""
        if not state.protected:
            return None
        if self.with_protected is None or self.built_from is not state.victims:
            self.with_protected = VictimQueue(state.victims.untaken() + [v for v, _ in state.protected])
            self.built_from = state.victims
        times: list[float] = []
        memo = state.memos.protected
        for model in models:
            if memo.known_to_fail(demand, model):
                continue
            if walk(state, demand, model, self.with_protected) is None:
                memo.failed(demand, model)
                continue
            could_host = host_test(state, demand, model)
            times += [t for v, t in state.protected if v.pool == demand.pool and any(could_host(p[0]) for p in v.pods)]
        return ProtectedVictims(demand.describe(), min(times)) if times else None
