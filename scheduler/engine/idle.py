"""The idle pass (DESIGN §2 step 2): each job still pending with idle mode `acceptable` or `only`, in
pending order (or a policy's, `idle_order`), is placed on free, unreserved capacity within `max`, Not in
Quota. It never preempts; capacity of victims whose pods have not exited yet is not free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .demand import Demand
from .placement import node_names_in_pod_order, place_job
from .reasons import BothPaths, IdleOnly, NoIdleRoom, Reason, Refused, any_model
from .types import IDLE_OFF, IDLE_ONLY, Admission

if TYPE_CHECKING:
    from .state import CycleState


def idle_pass(state: CycleState, still_pending: list[Demand]) -> None:
    order = state.policies.idle_order
    release_hold = state.policies.release_hold
    why = state.why
    for demand in order(state, still_pending) if order is not None else still_pending:
        name = demand.job.name
        earlier = why[name]
        if demand.job.idle == IDLE_OFF or isinstance(earlier, Refused):
            continue  # quota only, or nothing can place it (its reason says why)
        reason = admit_idle(state, demand)
        if reason is None:
            del why[name]
            if release_hold is not None:
                release_hold(state, demand)
        elif isinstance(reason, Refused):
            why[name] = reason
        elif demand.job.idle == IDLE_ONLY:
            why[name] = IdleOnly(reason)
        else:
            why[name] = BothPaths(earlier, reason)  # type: ignore[arg-type]


def admit_idle(state: CycleState, demand: Demand) -> Reason | None:
    """Admit Not in Quota on free unreserved capacity, or return why not."""
    refusal = state.refusal(demand)
    if refusal is not None:
        return refusal
    maxed: list[Reason] = []
    models = state.models(demand)
    quota = demand.job.quota
    for model in models:
        reason = state.quotas.max_shortfall(quota, demand.request(model))
        if reason is not None:
            maxed.append(reason)
            continue
        placed = place_job(state, demand, model, releasing=False)
        if placed is not None:
            state.quotas.charge(quota, demand.request(model), in_quota=False)
            state.decisions.admitted[demand.job.name] = Admission(
                in_quota=False, nodes=node_names_in_pod_order(placed), gpu_type=model
            )
            return None
    if models and len(maxed) == len(models):
        return any_model(maxed)
    return NoIdleRoom(demand.describe())
