"""Resizes of elastic jobs (DESIGN §2c), counted by the process that runs the loop, in the registry the
cycle's histogram is served from (`metrics.cycle.CYCLE_REGISTRY`, docs/metrics.md)."""

from __future__ import annotations

from django.db import transaction
from prometheus_client import Counter

from scheduler.metrics.cycle import CYCLE_REGISTRY

RESIZES = Counter(
    "tidepool_job_resizes_total",
    "Resizes of elastic jobs: kind=shrink (extra pods reclaimed, the job kept running) or kind=grow (extra pods "
    "placed on idle resources). Neither is a preemption nor a restart.",
    ["kind"],
    registry=CYCLE_REGISTRY,
)


def resize_observed(kind: str) -> None:
    """Count one resize once the cycle that decided it has committed."""
    transaction.on_commit(lambda: RESIZES.labels(kind=kind).inc())
