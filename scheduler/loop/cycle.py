"""One scheduling cycle: housekeeping, snapshot from locked rows → engine → decisions applied.

Housekeeping runs first (restarts whose backoff passed, lost nodes, maximum running time, hung
jobs), then one engine cycle inside one transaction; the decisions are written by the
`cycle_apply` service, which also starts pods and publishes after commit. Only one loop may run
against a database (scheduler/loop/leader.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from scheduler.engine.cycle import run_cycle
from scheduler.engine.types import Decisions
from scheduler.loop.housekeeping import housekeeping
from scheduler.loop.snapshot import build_snapshot
from scheduler.metrics.cycle import PhaseClock, cycle_observed
from scheduler.models import Job
from scheduler.services.scheduling import allocation_record, cycle_apply
from scheduler.states import SCHEDULABLE_JOB_STATUSES


@dataclass
class CycleResult:
    admitted: int = 0
    preempted: int = 0
    nominated: int = 0
    promoted: int = 0
    pending: int = 0
    seconds: float = 0.0
    decisions: Decisions | None = None
    # Seconds per phase, in order: housekeeping, snapshot (locked rows read and turned into the engine's
    # snapshot), engine, writes (decisions written), commit, broadcasts (after commit: pods launched,
    # the console told).
    phases: dict[str, float] = field(default_factory=dict)


PHASES = ("housekeeping", "snapshot", "engine", "writes", "commit", "broadcasts")


def schedule_once(now: datetime | None = None) -> CycleResult:
    """One full cycle. Safe to call from tests and from the loop."""
    now = now or timezone.now()
    started = time.perf_counter()
    clock = PhaseClock()  # /metrics: tidepool_scheduler_cycle_phase_seconds (issue 14)
    housekeeping(now)
    clock.lap("housekeeping")
    committed: list[float] = []
    with transaction.atomic():
        # Registered first, so it runs first after the commit: when the commit itself ended.
        transaction.on_commit(lambda: committed.append(time.perf_counter()))
        jobs = list(Job.objects.select_for_update().filter(status__in=SCHEDULABLE_JOB_STATUSES).order_by("pk"))
        snapshot, index = build_snapshot(jobs, now)
        clock.lap("snapshot")
        decisions = run_cycle(snapshot)
        clock.lap("engine")
        cycle_apply(decisions=decisions, index=index, now=now)
        allocation_record(now=now)
        clock.lap("apply")
        applied = time.perf_counter()
    clock.lap("commit")  # the commit and what runs after it: pods launched, the console told
    cycle_observed(clock.phases)
    after = clock.phases["commit"]
    commit = min(after, committed[0] - applied) if committed else after  # no commit callback when nested
    phases = {
        "housekeeping": clock.phases["housekeeping"],
        "snapshot": clock.phases["snapshot"],
        "engine": clock.phases["engine"],
        "writes": clock.phases["apply"],
        "commit": commit,
        "broadcasts": after - commit,
    }
    return CycleResult(
        admitted=len(decisions.admitted),
        preempted=len(decisions.preempted),
        nominated=len(decisions.nominated),
        promoted=len(decisions.promoted),
        pending=len(decisions.pending),
        seconds=time.perf_counter() - started,
        decisions=decisions,
        phases=phases,
    )
