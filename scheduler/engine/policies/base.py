"""The hooks through which a policy (DESIGN §2b, and §2c/§2d's to come) changes a cycle.

A policy is a `CyclePolicy` made for one cycle (it may keep state of its own for that cycle); it
overrides the hooks it needs, and every hook it leaves alone is §2's rule. The cycle and the rule
modules call the hooks of `PolicySet`, which holds only the active policies: for a per-job hook no
active policy has, the attribute is None and the caller skips it, so policies left off cost nothing.

Hooks, in the order a cycle reaches them:
- `before_cycle(state)`: on the snapshot, before nominated jobs are served (starvation: drain sets);
- `protected_until(state, victim)`: a running Not in Quota job is no reclaim candidate until then
  (None: it is one) (minimum runtime);
- `running_in_quota(state, victim)`: a running In Quota job, as a possible victim (preempt_within);
- `in_quota_scope(state, demand)`: a job of the in-quota pass gets other reclaim rules (`InQuotaScope`:
  demotions, more candidates) (preempt_within);
- `victim_chosen(state, victim)`: a victim was taken;
- `why_no_room(state, demand, models)`: a better reason than "no room" (minimum runtime);
- `lend_holds(state, demand)`: before the in-quota pass tries a job: what is held for others that it may use
  meanwhile, given back by the callable it returns (§2d backfill on starvation_hold's holds);
- `hold(state, demand)`: the in-quota pass left the job pending; `release_hold(state, demand)`: the idle
  pass admitted it (starvation_hold);
- `idle_order(state, demands)`: the idle pass's order (fair idle share);
- `grow(state)`: after promotion (§2c growth, `elastic`);
- `end_of_cycle(state)`: the passes are done (ends holds; lists demotions);
- `explain(state, demand, reason)`: a pending job's final reason (starvation: "waiting too long");
- `plan(state)`: after the decisions (§2d start estimates, to come).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..demand import Demand
    from ..reasons import Reason
    from ..state import CycleState
    from ..victims.candidates import Victim, VictimQueue


class InQuotaScope(Protocol):
    """One job's reclaim under a policy's rules (preempt_within): what it demoted, how it may make itself
    fit in quota, its candidates, and what happens once it is decided."""

    demoted: list[Victim]

    def make_fit(self, model: str | None) -> bool: ...

    def candidates(self) -> VictimQueue: ...

    def settle(self, admitted: bool) -> None: ...


class CyclePolicy:
    """A policy for one cycle; each hook's default is §2's rule (nothing changes)."""

    def before_cycle(self, state: CycleState) -> None:
        return None

    def protected_until(self, state: CycleState, victim: Victim) -> float | None:
        return None

    def running_in_quota(self, state: CycleState, victim: Victim) -> None:
        return None

    def in_quota_scope(self, state: CycleState, demand: Demand) -> InQuotaScope | None:
        return None

    def victim_chosen(self, state: CycleState, victim: Victim) -> None:
        return None

    def why_no_room(self, state: CycleState, demand: Demand, models: list[str | None]) -> Reason | None:
        return None

    def lend_holds(self, state: CycleState, demand: Demand) -> Callable[[], None] | None:
        return None

    def hold(self, state: CycleState, demand: Demand) -> None:
        return None

    def release_hold(self, state: CycleState, demand: Demand) -> None:
        return None

    def idle_order(self, state: CycleState, demands: list[Demand]) -> Iterable[Demand]:
        return demands

    def grow(self, state: CycleState) -> None:
        return None

    def end_of_cycle(self, state: CycleState) -> None:
        return None

    def explain(self, state: CycleState, demand: Demand, reason: Reason) -> Reason:
        return reason

    def plan(self, state: CycleState) -> None:
        return None


def _overriding(policies: Iterable[CyclePolicy], hook: str) -> list[Callable[..., Any]]:
    default = getattr(CyclePolicy, hook)
    return [getattr(p, hook) for p in policies if getattr(type(p), hook) is not default]


class PolicySet:
    """The active policies of a cycle, hook by hook. Per-job hooks are attributes: None when no active
    policy has the hook, else one callable (several policies with one hook are combined: the latest
    protection, the first scope or reason, every notification, each order and explanation in turn).
    Once-a-cycle hooks are methods."""

    def __init__(self, policies: Iterable[CyclePolicy] = ()) -> None:
        self.policies = tuple(policies)
        hooks = {name: _overriding(self.policies, name) for name in (
            "before_cycle", "protected_until", "running_in_quota", "in_quota_scope", "victim_chosen", "why_no_room",
            "lend_holds", "hold", "release_hold", "idle_order", "grow", "end_of_cycle", "explain", "plan")}
        self._cycle_hooks = {name: hooks[name] for name in ("before_cycle", "grow", "end_of_cycle", "plan")}
        self.protected_until: Callable[[CycleState, Victim], float | None] | None = _latest(hooks["protected_until"])
        self.running_in_quota: Callable[[CycleState, Victim], None] | None = _every(hooks["running_in_quota"])
        self.in_quota_scope: Callable[[CycleState, Demand], InQuotaScope | None] | None = _first(
            hooks["in_quota_scope"])
        self.victim_chosen: Callable[[CycleState, Victim], None] | None = _every(hooks["victim_chosen"])
        self.why_no_room: Callable[[CycleState, Demand, list[str | None]], Reason | None] | None = _first(
            hooks["why_no_room"])
        self.lend_holds: Callable[[CycleState, Demand], Callable[[], None] | None] | None = _first(
            hooks["lend_holds"])
        self.hold: Callable[[CycleState, Demand], None] | None = _every(hooks["hold"])
        self.release_hold: Callable[[CycleState, Demand], None] | None = _every(hooks["release_hold"])
        self.idle_order: Callable[[CycleState, list[Demand]], Iterable[Demand]] | None = _in_turn(
            hooks["idle_order"])
        self.explain: Callable[[CycleState, Demand, Reason], Reason] | None = _in_turn(hooks["explain"])

    def before_cycle(self, state: CycleState) -> None:
        for hook in self._cycle_hooks["before_cycle"]:
            hook(state)

    def grow(self, state: CycleState) -> None:
        for hook in self._cycle_hooks["grow"]:
            hook(state)

    def end_of_cycle(self, state: CycleState) -> None:
        for hook in self._cycle_hooks["end_of_cycle"]:
            hook(state)

    def plan(self, state: CycleState) -> None:
        for hook in self._cycle_hooks["plan"]:
            hook(state)


def _every(hooks: list[Callable[..., None]]) -> Callable[..., None] | None:
    if len(hooks) <= 1:
        return hooks[0] if hooks else None

    def every(*args: Any) -> None:
        for hook in hooks:
            hook(*args)
    return every


def _first(hooks: list[Callable[..., Any]]) -> Callable[..., Any] | None:
    if len(hooks) <= 1:
        return hooks[0] if hooks else None

    def first(*args: Any) -> Any:
        return next((answer for hook in hooks if (answer := hook(*args)) is not None), None)
    return first


def _latest(hooks: list[Callable[..., float | None]]) -> Callable[..., float | None] | None:
    if len(hooks) <= 1:
        return hooks[0] if hooks else None

    def latest(*args: Any) -> float | None:
        times = [t for hook in hooks if (t := hook(*args)) is not None]
        return max(times) if times else None
    return latest


def _in_turn(hooks: list[Callable[..., Any]]) -> Callable[..., Any] | None:
    """Each hook takes the previous one's answer as its last argument (an order, a reason)."""
    if len(hooks) <= 1:
        return hooks[0] if hooks else None

    def in_turn(state: Any, *args: Any) -> Any:
        *rest, value = args
        for hook in hooks:
            value = hook(state, *rest, value)
        return value
    return in_turn
