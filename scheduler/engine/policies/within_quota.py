"""Priority preemption inside a quota (DESIGN §2b, quota setting `preempt_within`).

For a job J of such a quota Q in the in-quota pass (`Demotions`, J's `InQuotaScope`):
- demotion: when J does not fit in quota because of `min` (never because of `max`), Q's own running
  In Quota jobs of priority strictly below J's are demoted in candidate order until J fits, then
  `fill_back` keeps In Quota each one without which J still fits. Demoted jobs keep running, Not in
  Quota; if J ends neither admitted nor nominated, the demotions are undone;
- reclaim for J walks the Not in Quota candidates (J's demoted jobs among them, in their place), then
  Q's remaining running In Quota jobs of priority below J's. The node index knows neither, so J always
  walks; once a demotion stands the cycle's candidates grow, so the index and the reclaim memo are
  rebuilt for the jobs after J, and the demoted jobs may be promoted back (whatever their idle mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..victims.candidates import Victim, VictimQueue
from ..victims.fill_back import fill_back
from ..victims.ordering import candidates_ordering
from .base import CyclePolicy

if TYPE_CHECKING:
    from ..demand import Demand
    from ..quota import QuotaTree
    from ..resources import Resources
    from ..state import CycleState


class PreemptWithin(CyclePolicy):
    def __init__(self, quotas: set[str]) -> None:
        self.quotas = quotas
        self.in_quota: dict[str, list[Victim]] = {}  # quota -> its running In Quota jobs, still In Quota
        self.demoted: dict[str, Victim] = {}  # demoted this cycle (and not undone)

    def running_in_quota(self, state: CycleState, victim: Victim) -> None:
        if victim.quota in self.quotas:
            self.in_quota.setdefault(victim.quota, []).append(victim)

    def in_quota_scope(self, state: CycleState, demand: Demand) -> Demotions | None:
        return Demotions(self, state, demand) if demand.job.quota in self.quotas else None

    def end_of_cycle(self, state: CycleState) -> None:
        """A demoted job that is preempted or promoted back in the same cycle is not listed as demoted."""
        decided = state.decisions
        gone = set(decided.preempted) | set(decided.promoted)
        decided.demoted = sorted(name for name in self.demoted if name not in gone)

    def lower(self, state: CycleState, demand: Demand) -> list[Victim]:
        """Q's running In Quota jobs of priority below J's, not demoted nor preempted yet."""
        return [v for v in self.in_quota.get(demand.job.quota, ()) if v.job.priority < demand.job.priority
                and v.job.name not in self.demoted and v.job.name not in state.decisions.preempted]


class _QuotaFit:
    """`fill_back`'s fit over demotions: adding a job demotes it (frees its guarantee), removing it keeps
    it In Quota; J fits when its quota's `min` lets it in."""

    __slots__ = ("quotas", "quota", "request")

    def __init__(self, quotas: QuotaTree, quota: str, request: Resources) -> None:
        self.quotas, self.quota, self.request = quotas, quota, request

    def add(self, victim: Victim, sign: int = 1) -> None:
        if sign > 0:
            self.quotas.demote(self.quota, victim.request)
        else:
            self.quotas.promote(self.quota, victim.request)

    def fits(self) -> bool:
        return self.quotas.min_shortfall(self.quota, self.request) is None


class Demotions:
    """J's scope in the in-quota pass (`base.InQuotaScope`)."""

    def __init__(self, policy: PreemptWithin, state: CycleState, demand: Demand) -> None:
        self.policy, self.state, self.demand = policy, state, demand
        self.demoted: list[Victim] = []

    def make_fit(self, model: str | None) -> bool:
        """Demote Q's lower-priority In Quota jobs until J fits in quota on `model`; says whether it does.
        Nothing is demoted when it does not."""
        state, demand = self.state, self.demand
        quota, request = demand.job.quota, demand.request(model)
        if state.quotas.max_shortfall(quota, request) is not None:
            return False  # blocked by max: no demotion
        fit = _QuotaFit(state.quotas, quota, request)
        chosen: list[Victim] = []
        for victim in sorted(self.policy.lower(state, demand), key=lambda v: candidates_ordering(v.job)):
            fit.add(victim)
            chosen.append(victim)
            if fit.fits():
                break
        else:
            for victim in chosen:
                fit.add(victim, -1)
            return False
        for victim in fill_back(chosen, fit):
            victim.in_quota = False
            self.demoted.append(victim)
            self.policy.demoted[victim.job.name] = victim
        return True

    def candidates(self) -> VictimQueue:
        """J's candidates: the Not in Quota ones (untaken, unprotected, J's demoted jobs in their place),
        then Q's remaining In Quota jobs of lower priority."""
        state = self.state
        protected_until = state.policies.protected_until
        borrowers = state.victims.untaken() + [
            v for v in self.demoted if v.job.name not in state.decisions.preempted
            and (protected_until is None or protected_until(state, v) is None)
        ]
        return VictimQueue(borrowers, then=self.policy.lower(state, self.demand))

    def settle(self, admitted: bool) -> None:
        """Undo J's demotions if it was neither admitted nor nominated; else they stand: the demoted jobs
        join the cycle's Not in Quota candidates (or the protected ones) and may be promoted back."""
        state, quota = self.state, self.demand.job.quota
        if not admitted:
            for victim in self.demoted:
                state.quotas.promote(quota, victim.request)
                victim.in_quota = True
                del self.policy.demoted[victim.job.name]
            return
        protected_until = state.policies.protected_until
        joining: list[Victim] = []
        for victim in self.demoted:
            if victim.job.name in state.decisions.preempted:
                continue
            until = protected_until(state, victim) if protected_until is not None else None
            if until is None:
                joining.append(victim)
            else:
                state.protected.append((victim, until))
            state.promotable.append((victim.job, victim.request))
        policy = self.policy
        policy.in_quota[quota] = [v for v in policy.in_quota[quota] if v.job.name not in policy.demoted]
        state.victims = VictimQueue(state.victims.untaken() + joining)
        state.victim_index = None
        state.memos.reclaim.forget_pool(self.demand.pool or "")
