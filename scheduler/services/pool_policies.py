"""Pool policy writes (DESIGN §2b): a pool's idle share, minimum runtime and starvation guard, and
the starvation hold that extends the guard (Tidepool's, docs/scheduling.md; only with the guard on);
its default time limit (§2d) and how often its elastic jobs may grow (`grow_interval_s`, §2c).

The console's pool page calls `pool_policy_set`; the Django admin edits the same `PoolPolicy` row.
A pool without a row uses the defaults (§2's rules), so a save that changes nothing writes
nothing. A change is recorded in Django's admin log (`LogEntry`: who, when, what, shown in the
row's admin history and on the console's pool page, like the admin's own edits) and wakes the
scheduler after commit: the next cycle reads it (`scheduler/loop/snapshot.py: pool_policies`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from scheduler import validation
from scheduler.models import PoolPolicy, ResourceType
from scheduler.publish import wake_scheduler_on_commit

log = logging.getLogger("tidepool.policies")

POLICY_FIELDS = ("idle_share", "min_runtime_s", "starvation_s", "starvation_hold", "starved_min_runtime_s",
                 "default_time_limit_s", "grow_interval_s")
POLICY_LABELS = {"idle_share": "Idle share", "min_runtime_s": "Minimum runtime", "starvation_s": "Starvation guard",
                 "starvation_hold": "Starvation hold", "starved_min_runtime_s": "Minimum runtime after starving",
                 "default_time_limit_s": "Default time limit", "grow_interval_s": "Grow interval"}
DEFAULTS: dict[str, Any] = {"idle_share": PoolPolicy.IdleShare.FIFO.value, "min_runtime_s": 0, "starvation_s": 0,
                            "starvation_hold": False, "starved_min_runtime_s": 0, "default_time_limit_s": 0,
                            "grow_interval_s": validation.DEFAULT_GROW_INTERVAL_S}


@dataclass(frozen=True)
class PoolPolicySaved:
    """What `pool_policy_set` did: the pool's policy (unsaved, pk None, when it is the defaults and
    the pool has no row) and the changes it recorded, in words (empty: nothing changed)."""

    policy: PoolPolicy
    changes: tuple[str, ...]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _pool(value: Any) -> str:
    if value not in ResourceType.values:
        pools = " or ".join(ResourceType.values)
        raise validation.refuse("resource_type", f"There is no pool {_short(value)}: use {pools}.")
    return value


def _idle_share(value: Any) -> str:
    if value not in PoolPolicy.IdleShare.values:
        raise validation.refuse(
            "idle_share", f"Idle share {_short(value)} is unknown: use fifo (in pending order) or fair (fair share)."
        )
    return value


def policy_values(
    *, idle_share: Any, min_runtime_s: Any, starvation_s: Any, starvation_hold: Any = False,
    starved_min_runtime_s: Any = 0, default_time_limit_s: Any = 0,
    grow_interval_s: Any = validation.DEFAULT_GROW_INTERVAL_S,
) -> dict[str, Any]:
    """The policies checked against validation's bounds; a ValidationError keyed by field. The hold and
    the minimum runtime after starving extend the starvation guard, so either is refused (at its own
    field) while the guard is off."""
    values = {
        "idle_share": _idle_share(idle_share),
        "min_runtime_s": validation.policy_seconds(min_runtime_s, "min_runtime_s", "Minimum runtime"),
        "starvation_s": validation.policy_seconds(starvation_s, "starvation_s", "Starvation guard"),
        "starvation_hold": validation.policy_flag(starvation_hold, "starvation_hold", "Starvation hold"),
        "starved_min_runtime_s": validation.policy_seconds(starved_min_runtime_s, "starved_min_runtime_s",
                                                           "Minimum runtime after starving"),
        # DESIGN §2d: the time limit of jobs that set no maximum running time (0: none)
        "default_time_limit_s": validation.policy_seconds(default_time_limit_s, "default_time_limit_s",
                                                          "Default time limit"),
        # DESIGN §2c: an elastic job grows at most this often (0: every cycle; at most a day)
        "grow_interval_s": validation.grow_interval_seconds(grow_interval_s),
    }
    problems = validation.guard_extension_problems(
        starvation_s=values["starvation_s"], starvation_hold=values["starvation_hold"],
        starved_min_runtime_s=values["starved_min_runtime_s"])
    if problems:
        field, problem = next(iter(problems.items()))  # the first one, as for every other field
        raise validation.refuse(field, problem)
    return values


def _shown(field: str, value: Any) -> str:
    if field == "starvation_hold":
        return "on" if value else "off"
    return str(value) if field == "idle_share" else f"{value} s"


def _changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        f"{POLICY_LABELS[field]}: {_shown(field, before[field])} → {_shown(field, after[field])}"
        for field in POLICY_FIELDS
        if before[field] != after[field]
    )


@transaction.atomic
def pool_policy_set(
    *,
    user: AbstractBaseUser,
    resource_type: Any,
    idle_share: Any,
    min_runtime_s: Any,
    starvation_s: Any,
    starvation_hold: Any = False,
    starved_min_runtime_s: Any = 0,
    default_time_limit_s: Any = 0,
    grow_interval_s: Any = validation.DEFAULT_GROW_INTERVAL_S,
) -> PoolPolicySaved:
    """Set a pool's §2b policies, its default time limit (§2d) and its grow interval (§2c). Refuses an
    unknown pool, an unknown idle share, a duration below 0 or above 30 days, a grow interval above a day,
    a hold that is not on or off, or the hold or a minimum runtime after starving with the starvation
    guard off (0) with a ValidationError keyed by the field; nothing is written then."""
    pool = _pool(resource_type)
    values = policy_values(idle_share=idle_share, min_runtime_s=min_runtime_s, starvation_s=starvation_s,
                           starvation_hold=starvation_hold, starved_min_runtime_s=starved_min_runtime_s,
                           default_time_limit_s=default_time_limit_s, grow_interval_s=grow_interval_s)
    policy = PoolPolicy.objects.select_for_update().filter(resource_type=pool).first()
    before = {field: getattr(policy, field) for field in POLICY_FIELDS} if policy else dict(DEFAULTS)
    changes = _changes(before, values)
    if not changes:
        return PoolPolicySaved(policy or PoolPolicy(resource_type=pool, **values), ())
    created = policy is None
    if created:
        # get_or_create: a row another request created meanwhile is taken, not duplicated.
        policy, created = PoolPolicy.objects.select_for_update().get_or_create(resource_type=pool, defaults=values)
    for field, value in values.items():
        setattr(policy, field, value)
    policy.save()
    message = "; ".join(changes) + " (console)"
    LogEntry.objects.log_actions(user.pk, [policy], ADDITION if created else CHANGE, message, single_object=True)
    log.info("pool %s policies changed by %s: %s", pool, user.get_username(), "; ".join(changes))
    wake_scheduler_on_commit()
    return PoolPolicySaved(policy, changes)
