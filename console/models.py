"""The console's own table: submission tokens that make a replayed job form create one job."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

# Tokens only have to outlive a browser's retries; older ones are pruned on each submission.
TOKEN_LIFETIME = timedelta(days=1)


class SubmissionToken(models.Model):
    """One per submitted job form. The unique token is what serialises two POSTs of the same form:
    the second insert waits for the first transaction and then fails, and the view answers it with
    the job the first one created."""

    token = models.UUIDField(unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey("scheduler.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.token} → job {self.job_id}"

    @classmethod
    def prune(cls, now: datetime | None = None) -> None:
        cls.objects.filter(created_at__lt=(now or timezone.now()) - TOKEN_LIFETIME).delete()
