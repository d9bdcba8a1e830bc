"""Priority preemption inside a quota (DESIGN §2b, quota setting `preempt_within`): the in-quota pass's
steps for a job J of such a quota Q, mixed into the cycle (`_Cycle` inherits `WithinQuota`).

- Demotion: when J does not fit in quota because of `min` (never because of `max`), Q's own running
  In Quota jobs of priority strictly below J's are demoted, in candidate order, until J fits; then,
  from the last taken back to the first, each one without which J still fits stays In Quota. Demoted
  jobs keep running, Not in Quota. If J ends neither admitted nor nominated, they are undone.
- Reclaim for J walks the Not in Quota candidates (the jobs J just demoted among them, in their
  place), then Q's remaining running In Quota jobs of priority below J's (`VictimQueue(..., then=)`).
  The node index knows neither, so J always takes the walk; and once a demotion stands, the cycle's
  candidates grow, so the index and the reclaim memo are rebuilt for the jobs after J.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .policies import protected_until
from .reclaim import Victim, VictimQueue, candidates_ordering

if TYPE_CHECKING:
    from .cycle import _Cycle
    from .demand import Demand


class WithinQuota:
    """The preempt_within steps of `_Cycle` (see the module doc)."""

    def _within(self: _Cycle, demand: Demand) -> bool:
        return demand.job.quota in self.within_quotas

    def _demote_for(self: _Cycle, demand: Demand, model: str | None, taken: list[Victim]) -> bool:
        """Demote Q's lower-priority In Quota jobs until J fits in quota on `model`; fills `taken` with
        the demoted ones (in order) and says whether J fits. Nothing is demoted when it does not."""
        quota, request = demand.job.quota, demand.request(model)
        if self.quotas.max_shortfall(quota, request) is not None:
            return False  # blocked by max: no demotion
        lower = sorted((v for v in self.in_quota_victims.get(quota, ()) if v.job.priority < demand.job.priority
                        and v.job.name not in self.demoted_now and v.job.name not in self.decisions.preempted),
                       key=lambda v: candidates_ordering(v.job))
        chosen: list[Victim] = []
        for victim in lower:
            self.quotas.demote(quota, victim.request)
            chosen.append(victim)
            if self.quotas.min_shortfall(quota, request) is None:
                break
        else:
            for victim in chosen:
                self.quotas.promote(quota, victim.request)
            return False
        spared: set[int] = set()  # fill back: the last one was needed
        for i in range(len(chosen) - 2, -1, -1):
            self.quotas.promote(quota, chosen[i].request)
            if self.quotas.min_shortfall(quota, request) is None:
                spared.add(i)  # stays In Quota
            else:
                self.quotas.demote(quota, chosen[i].request)
        taken.extend(v for i, v in enumerate(chosen) if i not in spared)
        for victim in taken:
            self.demoted_now[victim.job.name] = victim
        return True

    def _within_queue(self: _Cycle, demand: Demand, demoted: list[Victim]) -> VictimQueue:
        """J's candidates: the Not in Quota ones (untaken, unprotected, J's demoted jobs in their place),
        then Q's remaining In Quota jobs of lower priority."""
        now, policy = self.snapshot.now, self.snapshot.policy_of(demand.pool or "")
        borrowers = self.victims.untaken() + [
            v for v in demoted if protected_until(v.job, policy, now) is None and v.job.name not in self.decisions.preempted
        ]
        then = [v for v in self.in_quota_victims.get(demand.job.quota, ()) if v.job.priority < demand.job.priority
                and v.job.name not in self.demoted_now and v.job.name not in self.decisions.preempted]
        return VictimQueue(borrowers, then=then)

    def _settle_demotions(self: _Cycle, demand: Demand, demoted: list[Victim], admitted: bool) -> None:
        """Undo J's demotions if it was neither admitted nor nominated; else they stand: the demoted jobs
        join the cycle's Not in Quota candidates (or the protected ones) and may be promoted back."""
        quota = demand.job.quota
        if not admitted:
            for victim in demoted:
                self.quotas.promote(quota, victim.request)
                del self.demoted_now[victim.job.name]
            return
        policy = self.snapshot.policy_of(demand.pool or "")
        standing = [v for v in demoted if v.job.name not in self.decisions.preempted]
        joining: list[Victim] = []
        for victim in standing:
            until = protected_until(victim.job, policy, self.snapshot.now)
            if until is None:
                joining.append(victim)
            else:
                self.protected.append((victim, until))
            self.promotable.append((victim.job, victim.request))
        self.in_quota_victims[quota] = [v for v in self.in_quota_victims[quota] if v.job.name not in self.demoted_now]
        self.victims = VictimQueue(self.victims.untaken() + joining)
        self._victim_index = None
        self._with_protected = None
        self.no_reclaim_room.forget_pool(demand.pool or "")
