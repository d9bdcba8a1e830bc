"""Elastic jobs' resizes (DESIGN §2c): one row per shrink or growth, with the work it cost.

A resize is neither a preemption nor a failure: it is counted apart (`Job.shrink_count`, `grow_count`)
and its cost is measured as a preemption's is: every worker restarts from the last checkpoint, so the
GPU time since that checkpoint (or since the run's last start or resize) is lost, on every pod the job
ran before the resize.
"""

from __future__ import annotations

from django.db import models

from scheduler.models.core import Job


class JobResize(models.Model):
    class Kind(models.TextChoices):
        SHRINK = "shrink", "Shrunk"
        GROW = "grow", "Grew"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="resizes")
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=Kind.choices)
    time = models.DateTimeField(db_index=True)
    from_pods = models.PositiveIntegerField()
    to_pods = models.PositiveIntegerField()
    indexes = models.JSONField(default=list, help_text="The elastic role's pod indexes removed or added.")
    reason = models.CharField(max_length=500, help_text="Names no other job: members see it.")
    staff_reason = models.CharField(max_length=500, blank=True)
    gpus = models.PositiveIntegerField(default=0, help_text="GPUs the job held before the resize.")
    lost_gpu_seconds = models.FloatField(null=True, blank=True, help_text="GPU time since the last checkpoint.")
    lost_steps = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: no progress reported.")

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.job.name}: {self.from_pods} -> {self.to_pods} pods"
