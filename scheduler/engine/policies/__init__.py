"""The opt-in policies of DESIGN §2b, each a module behind the hooks of `base` (§2c elastic growth and
§2d backfill/start estimates are to come the same way):

- `fair_idle`: fair share of idle capacity (`idle_share: fair`);
- `min_runtime`: minimum runtime (`min_runtime_s`, `starved_min_runtime_s`);
- `within_quota`: priority preemption inside a quota (quota setting `preempt_within`);
- `elastic`: §2c growth of running elastic jobs (on whenever one could grow; shrinks are victim units);
- `starvation`: the starvation guard (`starvation_s`, `starvation_hold`), with §2d backfill onto drain sets;
- `start_estimates`: §2d start estimates (`engine/plan.py`), not opt-in: on in every cycle with a `now`.

`policies_for(snapshot)` makes the active ones for one cycle; with every setting at its default the set
holds only the start estimates (when the snapshot has a `now`), which change no decision: the cycle is §2's.
"""

from __future__ import annotations

from ..plan import EXACT_PER_POOL, ROUGH_PER_POOL
from ..types import IDLE_SHARE_FAIR, Snapshot
from .base import CyclePolicy, PolicySet
from .elastic import ElasticGrowth, has_elastic
from .fair_idle import FairIdleShare
from .min_runtime import MinimumRuntime, is_on
from .start_estimates import StartEstimates
from .starvation import StarvationGuard
from .within_quota import PreemptWithin


def policies_for(snapshot: Snapshot, *, estimates: int = EXACT_PER_POOL, rough: int = ROUGH_PER_POOL) -> PolicySet:
    """The policies some pool or quota of the snapshot switches on, fresh for one cycle; `estimates`: the
    pending jobs per pool the §2d plan estimates exactly (0: no plan), `rough`: how many after those it
    estimates roughly."""
    pools = (snapshot.policy, *snapshot.policies.values())
    active: list[CyclePolicy] = []
    if any(p.idle_share == IDLE_SHARE_FAIR for p in pools):
        active.append(FairIdleShare())
    if snapshot.now is not None and any(is_on(p) for p in pools):
        active.append(MinimumRuntime())
    within = {q.name for q in snapshot.quotas if q.preempt_within}
    if within:
        active.append(PreemptWithin(within))
    if snapshot.now is not None and any(p.starvation_s > 0 for p in pools):
        active.append(StarvationGuard())
    if has_elastic(snapshot):  # §2c growth
        active.append(ElasticGrowth())
    if snapshot.now is not None and estimates > 0:  # §2d start estimates: always on, they need the cycle's time
        active.append(StartEstimates(estimates, rough))
    return PolicySet(active)
