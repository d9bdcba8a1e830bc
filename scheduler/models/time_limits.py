"""A job's start estimate and time limit as stored and read (DESIGN §2d): `Job` takes these fields from
`JobTimeLimits` (an abstract model, so that core.py stays within its size), and `PoolPolicy` its
`default_time_limit_s` from `PoolTimeLimits`."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from scheduler.estimates import estimate_text, time_limit_note
from scheduler.states import JobStatus


class JobTimeLimits(models.Model):
    # Written with the queue position each cycle while pending: the earliest start the plan found, or
    # none with why (`estimate_unknown`: no_limit, far_back or never; engine/types.py UNKNOWN_*); beside a
    # start, `estimate_unknown` is "rough" for a rough one (ESTIMATE_ROUGH, engine/plan_rough.py).
    estimated_start_at = models.DateTimeField(null=True, blank=True, help_text="Start estimate while pending (§2d).")
    estimate_unknown = models.CharField(max_length=16, blank=True, help_text="Why there is no start estimate.")

    class Meta:
        abstract = True

    @property
    def start_estimate(self) -> str:
        """"starts in about 2 h 10 min", or why it is unknown, while the job waits in the queue; ""."""
        if getattr(self, "queue_position", None) is None or not getattr(self, "is_waiting", False):
            return ""
        return estimate_text(self.estimated_start_at, self.estimate_unknown, timezone.now())

    @property
    def time_limit_note(self) -> str:
        """"time limit in 4 min" while running near its maximum running time; ""."""
        minutes = getattr(self, "max_running_minutes", None)
        if getattr(self, "status", None) != JobStatus.RUNNING or not minutes:
            return ""
        return time_limit_note(getattr(self, "started_at", None), 60.0 * minutes, timezone.now())


class PoolTimeLimits(models.Model):
    default_time_limit_s = models.PositiveIntegerField(
        default=0, help_text="The time limit of jobs that set no maximum running time (DESIGN §2d; 0: none).",
    )

    class Meta:
        abstract = True
