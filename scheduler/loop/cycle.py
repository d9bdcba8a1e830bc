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
    marks = [time.perf_counter()]
    housekeeping(now)
    marks.append(time.perf_counter())
    with transaction.atomic():
        # Registered first, so it runs first after the commit: the end of the commit itself.
        transaction.on_commit(lambda: marks.append(time.perf_counter()))
        jobs = list(Job.objects.select_for_update().filter(status__in=SCHEDULABLE_JOB_STATUSES).order_by("pk"))
        snapshot, index = build_snapshot(jobs, now)
        marks.append(time.perf_counter())
        decisions = run_cycle(snapshot)
        marks.append(time.perf_counter())
        cycle_apply(decisions=decisions, index=index, now=now)
        allocation_record(now=now)
        marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    if len(marks) < len(PHASES) + 1:  # nested in an outer transaction (tests): no commit happened here
        marks.insert(-1, marks[-1])
    return CycleResult(
        admitted=len(decisions.admitted),
        preempted=len(decisions.preempted),
        nominated=len(decisions.nominated),
        promoted=len(decisions.promoted),
        pending=len(decisions.pending),
        seconds=marks[-1] - marks[0],
        decisions=decisions,
        phases={phase: marks[i + 1] - marks[i] for i, phase in enumerate(PHASES)},
    )
