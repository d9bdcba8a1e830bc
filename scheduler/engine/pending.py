"""The jobs a cycle leaves pending (DESIGN §2 "else it stays pending, with a reason a person can act on"):
every job neither admitted nor nominated, in pending order (the index is its queue position), with its
reason. Whatever path a job failed on, one the pool cannot hold even when empty is told so; a policy may
add to the reason (the starvation guard: "waiting too long")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .reasons import Refused

if TYPE_CHECKING:
    from .state import CycleState


def list_pending(state: CycleState) -> None:
    decided = state.decisions
    explain = state.policies.explain
    for demand in state.queue:
        name = demand.job.name
        if name in decided.admitted or name in decided.nominated:
            continue
        decided.pending.append(name)
        why = state.why[name]
        if not isinstance(why, Refused):
            why = state.never_fits(demand) or why
        if explain is not None:
            why = explain(state, demand, why)  # type: ignore[arg-type]
        decided.reasons[name] = why  # type: ignore[assignment]
