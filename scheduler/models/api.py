"""Models of the API's clients: personal API tokens, idempotency keys of submissions, and the GPU
utilisation samples node workers record (served by /api/v1/)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from scheduler.models.core import Job, Pod


class ApiToken(models.Model):
    """A personal API token. Only the SHA-256 of the secret is stored; `prefix` names it in lists."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=64)
    prefix = models.CharField(max_length=16, help_text="The token's first characters, shown in lists.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the whole token, hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class IdempotencyKey(models.Model):
    """The first answer to a POST /api/v1/jobs/ carrying an Idempotency-Key, per user and key."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical request body.")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="unique_idempotency_key_per_user")]


class GpuSample(models.Model):
    """One NVML reading of one GPU a pod holds (sampled by its node worker; none where NVML is absent)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="gpu_samples")
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="gpu_samples")
    time = models.DateTimeField()
    gpu_index = models.PositiveSmallIntegerField()
    utilization_percent = models.FloatField()
    memory_used_mib = models.PositiveIntegerField()
    memory_total_mib = models.PositiveIntegerField()

    class Meta:
        ordering = ["time", "gpu_index"]
        indexes = [models.Index(fields=["job", "time"])]
