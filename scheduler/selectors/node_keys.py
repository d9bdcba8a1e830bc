"""Node keys as staff see them (the Nodes page's keys, GET /api/v1/node-keys/): prefix only."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from scheduler.models import NodeKey

REVOKED_SHOWN = timedelta(days=30)  # a revoked key stays listed this long, so a revocation can be checked


def node_key_list() -> QuerySet[NodeKey]:
    """Live keys, and keys revoked in the last 30 days, by node name then newest first."""
    recent = timezone.now() - REVOKED_SHOWN
    return NodeKey.objects.filter(Q(revoked_at=None) | Q(revoked_at__gte=recent)).select_related("created_by")
