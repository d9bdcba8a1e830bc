"""The in-quota pass (DESIGN §2 step 1), for each pending job with idle mode `off` or `acceptable`, in
pending order: if it fits in quota (`quota`), place it on free capacity (admitted In Quota); else
nominate it on free + unreserved being-released capacity with no new victim; else reclaim (`victims`):
preempt victims and nominate it on what they release; else it stays pending with a reason.

A job that names no GPU model tries the pool's models in name order, and only the models its quota
fits; each step is tried on every model before the next step, so the job prefers landing now on any
model over nominating, and nominating over preempting. A policy may give a job other reclaim rules
(`InQuotaScope`: preempt_within's demotions and candidates) and a better reason than "no room".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .demand import Demand
from .nomination import hold_in_quota
from .placement import place_job
from .reasons import NoRoom, Reason, any_model
from .types import IDLE_ONLY
from .victims.selection import indexed, select, take, walk

if TYPE_CHECKING:
    from .policies.base import InQuotaScope
    from .state import CycleState


def in_quota_pass(state: CycleState, waiting: list[Demand]) -> None:
    scope_of = state.policies.in_quota_scope
    hold = state.policies.hold
    lend_holds = state.policies.lend_holds
    why = state.why
    for demand in waiting:
        if demand.job.idle == IDLE_ONLY:
            why[demand.job.name] = None  # still to be decided by the idle pass
            continue
        scope = scope_of(state, demand) if scope_of is not None else None
        hold_again = lend_holds(state, demand) if lend_holds is not None else None
        reason = admit_in_quota(state, demand, scope)
        if hold_again is not None:
            hold_again()
        if scope is not None and scope.demoted:
            scope.settle(admitted=reason is None)
        if reason is not None:
            why[demand.job.name] = reason
            if hold is not None:
                hold(state, demand)


def admit_in_quota(state: CycleState, demand: Demand, scope: InQuotaScope | None) -> Reason | None:
    """Admit, nominate (maybe preempting) or return why not."""
    refusal = state.refusal(demand)
    if refusal is not None:
        return refusal
    quota = demand.job.quota
    models = state.models(demand)
    fitting: list[str | None] = []
    short: list[Reason] = []
    for model in models:
        reason = state.quotas.shortfall(quota, demand.request(model))
        if reason is None:
            fitting.append(model)
        else:
            short.append(reason)
    if not fitting and scope is not None:
        fitting = next(([m] for m in models if scope.make_fit(m)), [])
    if not fitting:
        return any_model(short) if short else NoRoom(demand.describe())
    for model in fitting:
        placed = place_job(state, demand, model, releasing=False)
        if placed is not None:
            hold_in_quota(state, demand, model, placed)
            return None
    pool = demand.pool or ""
    # One model and equal pods with GPUs: the victim search itself answers "fits on free + being
    # released capacity, no victim needed" (an empty list), exactly when this placement would succeed.
    skip_releasing = (len(fitting) == 1 and indexed(demand, fitting[0])
                      and not ((scope is not None and scope.demoted) or state.keep_off))
    for model in fitting:
        if not skip_releasing and state.capacity.has_releasing(pool, model):
            placed = place_job(state, demand, model, releasing=True)
            if placed is not None:
                hold_in_quota(state, demand, model, placed)
                return None
    for model in fitting:
        victims = select(state, demand, model) if scope is None else walk(state, demand, model, scope.candidates())
        if victims is not None:
            for victim in victims:
                take(state, victim, demand)
            placed = place_job(state, demand, model, releasing=True, use_memo=False)  # room was just made
            assert placed is not None, f"victims chosen for {demand.job.name} did not make room"
            hold_in_quota(state, demand, model, placed)
            return None
    why_no_room = state.policies.why_no_room
    return (why_no_room(state, demand, fitting) if why_no_room is not None else None) or NoRoom(demand.describe())
