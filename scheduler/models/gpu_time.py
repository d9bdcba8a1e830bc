"""A job's GPU time as its attempts hold GPUs (`Job` takes these methods from `JobGpuTime`).

A plain job holds all its GPUs from its attempt's start. An elastic job (DESIGN §2c) starts on its base
and holds more or fewer GPUs after each resize, so its attempt is counted segment by segment: from the
start to the first resize, between resizes, and from the last one on, each at the GPUs held then. Each
`JobResize` row records the GPUs held just before it (its pods not being taken away), which is what the
segment before it held; after the last one the job holds that plus or minus the elastic role's pods it
added or removed. Counting the attempt at the job's maximum, as before, overstated a shrunk or not yet
grown job's GPU-hours.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.utils import timezone


class JobGpuTime(models.Model):
    class Meta:
        abstract = True

    def held_gpus(self) -> int:
        """GPUs the current attempt holds now: all of them for a plain job; an elastic job's fixed roles' and
        its elastic role's running pods' (its minimum before any resize of this attempt)."""
        roles = list(self.roles.all())  # type: ignore[attr-defined]
        elastic = next((role for role in roles if role.min_pod_count is not None), None)
        everything = sum(role.pod_count * role.gpus for role in roles)
        if elastic is None:
            return everything
        resizes = self._attempt_resizes()
        if not resizes:
            return everything - (elastic.pod_count - elastic.min_pod_count) * elastic.gpus
        last = resizes[-1]
        return last.gpus + (last.to_pods - last.from_pods) * elastic.gpus

    def attempt_gpu_seconds(self, now: datetime | None = None) -> float:
        """GPU time of the current attempt from its start until `now` (default: now); 0 before any start."""
        began = self.started_at  # type: ignore[attr-defined]
        if began is None:
            return 0.0
        now = now or timezone.now()
        total = 0.0
        if any(role.min_pod_count is not None for role in self.roles.all()):  # type: ignore[attr-defined]
            for resize in self._attempt_resizes():
                if resize.time >= now:  # `now` lies in the segment this resize ended: it held resize.gpus
                    return total + resize.gpus * max(0.0, (now - began).total_seconds())
                total += resize.gpus * max(0.0, (resize.time - began).total_seconds())
                began = max(began, resize.time)
        return total + self.held_gpus() * max(0.0, (now - began).total_seconds())

    def _attempt_resizes(self) -> list:
        """This attempt's resizes, oldest first (prefetched `resizes` are used when there)."""
        attempt = self.attempt  # type: ignore[attr-defined]
        resizes = [r for r in self.resizes.all() if r.attempt == attempt]  # type: ignore[attr-defined]
        return sorted(resizes, key=lambda r: (r.time, r.pk))
