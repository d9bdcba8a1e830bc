"""Records kept beside the domain: the leases of single-instance processes, and the GPU allocation
samples the quota and dashboard charts draw."""

from __future__ import annotations

from django.db import models

from scheduler.models.core import ResourceQuota, ResourceType


class InstanceLease(models.Model):
    """One live process per role (the embedded console, a node's worker): owner id + expiry,
    renewed by the owner's heartbeat (scheduler/services/leases.py)."""

    role = models.CharField(max_length=100, unique=True)
    owner = models.CharField(max_length=200)
    expires_at = models.DateTimeField()
    renewed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.role}: {self.owner}"


class AllocationSample(models.Model):
    """GPU allocation at one moment, per quota (quota=None: the whole pool), for charts."""

    time = models.DateTimeField(db_index=True)
    resource_type = models.CharField(max_length=16, choices=ResourceType.choices, default=ResourceType.GENERAL)
    quota = models.ForeignKey(ResourceQuota, null=True, blank=True, on_delete=models.CASCADE)
    in_quota_gpus = models.PositiveIntegerField(default=0)
    not_in_quota_gpus = models.PositiveIntegerField(default=0)
    total_gpus = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["time"]
