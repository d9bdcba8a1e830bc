"""The hook interface policies plug into (engine/policies/base.py): which policies a snapshot switches
on, that policies left off leave every per-job hook out, and how several policies with one hook combine
(§2c and §2d will add policies on the same hooks)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.engine.policies import policies_for
from scheduler.engine.policies.base import CyclePolicy, PolicySet
from scheduler.engine.policies.fair_idle import FairIdleShare
from scheduler.engine.policies.min_runtime import MinimumRuntime
from scheduler.engine.policies.start_estimates import StartEstimates
from scheduler.engine.policies.starvation import StarvationGuard
from scheduler.engine.policies.within_quota import PreemptWithin
from scheduler.engine.reasons import NoIdleRoom, Reason
from scheduler.engine.types import IDLE_SHARE_FAIR, Node, Policy, Quota, Snapshot

PER_JOB = ("protected_until", "running_in_quota", "in_quota_scope", "victim_chosen", "why_no_room", "hold",
           "release_hold", "idle_order", "explain")
BASE = Snapshot((Node("n1", "A100", 8, 96000, 786432),), (Quota("root", None), Quota("t", "root")), ())


def _kinds(snapshot: Snapshot) -> list[type]:
    """The opt-in policies switched on (the §2d start estimates run in every cycle with a `now`)."""
    return [type(p) for p in policies_for(snapshot).policies if not isinstance(p, StartEstimates)]


def test_defaults_switch_nothing_on_and_leave_every_per_job_hook_out():
    for snapshot in (BASE, replace(BASE, now=100.0, policy=Policy(), policies={"general": Policy()})):
        policies = policies_for(snapshot)
        # only the start estimates, which need the cycle's time and change no decision
        assert [type(p) for p in policies.policies] == ([StartEstimates] if snapshot.now is not None else [])
        assert all(getattr(policies, hook) is None for hook in PER_JOB)


def test_each_setting_switches_on_its_policy_only():
    assert _kinds(replace(BASE, policies={"general": Policy(idle_share=IDLE_SHARE_FAIR)})) == [FairIdleShare]
    assert _kinds(replace(BASE, now=5.0, policy=Policy(min_runtime_s=60))) == [MinimumRuntime]
    assert _kinds(replace(BASE, policy=Policy(min_runtime_s=60))) == []  # no `now`: nothing is protected
    # starved_min_runtime_s protects only together with the guard that defines "starved"
    assert _kinds(replace(BASE, now=5.0, policy=Policy(starved_min_runtime_s=60))) == []
    assert _kinds(replace(BASE, now=5.0, policy=Policy(starvation_s=9, starved_min_runtime_s=60))) == [
        MinimumRuntime, StarvationGuard]
    within = replace(BASE, quotas=(Quota("root", None), Quota("t", "root", preempt_within=True)))
    assert _kinds(within) == [PreemptWithin]
    policies = policies_for(within)
    assert policies.in_quota_scope is not None and policies.protected_until is None


class _Protect(CyclePolicy):
    def __init__(self, until: float | None, tag: str) -> None:
        self.until, self.tag = until, tag

    def protected_until(self, state, victim):
        return self.until

    def explain(self, state, demand, reason: Reason) -> Reason:
        return NoIdleRoom(f"{reason.demand}+{self.tag}")  # type: ignore[attr-defined]

    def in_quota_scope(self, state, demand):
        return self.tag if self.until is not None else None


def test_several_policies_on_one_hook_combine():
    policies = PolicySet([_Protect(None, "a"), _Protect(30.0, "b"), _Protect(20.0, "c")])
    assert policies.protected_until(None, None) == 30.0  # protected until the latest
    assert policies.in_quota_scope(None, None) == "b"  # the first policy that has a scope
    assert str(policies.explain(None, None, NoIdleRoom("x"))) == "no free unreserved capacity for x+a+b+c"
    assert PolicySet([_Protect(None, "a")]).protected_until(None, None) is None
