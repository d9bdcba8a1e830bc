"""Start estimates (DESIGN §2d) on the `plan` hook: not opt-in, every cycle with a `now` runs it (the
rule is `engine/plan.py`). It changes no decision; it only adds `Decisions.estimates`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plan import ROUGH_PER_POOL, plan_starts
from .base import CyclePolicy

if TYPE_CHECKING:
    from ..state import CycleState


class StartEstimates(CyclePolicy):
    def __init__(self, exact_per_pool: int, rough_per_pool: int = ROUGH_PER_POOL) -> None:
        self.exact_per_pool = exact_per_pool
        self.rough_per_pool = rough_per_pool

    def plan(self, state: CycleState) -> None:
        plan_starts(state, self.exact_per_pool, self.rough_per_pool)
