"""One scheduling cycle (DESIGN §2): `run_cycle(snapshot) -> Decisions`, a short ordered list of steps over
one explicit `CycleState`. Each rule lives in a module named after it; each §2b policy is a module of
`policies/` that the steps call through its hooks (`policies.base`).

0. `policies.before_cycle`: on the snapshot (the starvation guard's drain sets);
1. nominated jobs of earlier cycles (`nomination`);
2. the in-quota pass (`in_quota`): place, else nominate on being-released capacity, else reclaim
   (`victims`), else pending;
3. the idle pass (`idle`): place Not in Quota on free unreserved capacity within `max`;
4. promotion (`promotion`);
5. growth (§2c, `policies.grow`: `policies.elastic`);
6. the pending jobs and their reasons (`pending`);
7. the plan (§2d start estimates, `policies.plan`: no policy yet).
"""

from __future__ import annotations

import gc

from .idle import idle_pass
from .in_quota import in_quota_pass
from .nomination import renew_nominations
from .pending import list_pending
from .plan import EXACT_PER_POOL, ROUGH_PER_POOL
from .policies import policies_for
from .promotion import promote
from .state import CycleState
from .types import Decisions, Snapshot


def run_cycle(snapshot: Snapshot, *, estimates: int = EXACT_PER_POOL, rough: int = ROUGH_PER_POOL) -> Decisions:
    """Decide one cycle. Pure: the snapshot is not changed, and the same snapshot (in any job order) gives
    the same decisions. The cyclic garbage collector is paused for the cycle: a cycle allocates hundreds of
    thousands of acyclic objects, and at 5,000 nodes the collections they trigger took a third of the time.
    `estimates`: how many pending jobs per pool get an exact §2d start estimate (0: no plan; the decisions
    are the same either way), `rough`: how many after those get a rough one (`plan_rough.py`)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return decide(CycleState(snapshot, policies_for(snapshot, estimates=estimates, rough=rough)))
    finally:
        if collecting:
            gc.enable()


def decide(state: CycleState) -> Decisions:
    """The steps, in order, each in pending order within itself."""
    policies = state.policies
    policies.before_cycle(state)  # before nominated jobs are served
    waiting = renew_nominations(state)
    in_quota_pass(state, waiting)
    idle_pass(state, [d for d in waiting if d.job.name in state.why])
    promote(state)
    policies.grow(state)
    policies.end_of_cycle(state)
    list_pending(state)
    policies.plan(state)
    return state.decisions
