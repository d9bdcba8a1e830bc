"""A node's own key (DESIGN §6): the one credential a node agent holds.

Only the SHA-256 of the key is stored (the same digest as personal API tokens, services/tokens.py);
`prefix` names it in lists. A key is bound to a node *name*, so it exists before the node first
registers (an admin adds the node, hands its key over, then starts the agent there).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class NodeKey(models.Model):
    node_name = models.SlugField(max_length=64, db_index=True,
                                 help_text="The node this key acts as (its agent registers under this name).")
    prefix = models.CharField(max_length=16, help_text="The key's first characters, shown in lists.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the whole key, hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    log_port = models.PositiveIntegerField(
        null=True, blank=True, help_text="Where the agent holding this key serves its pods' logs (the node's "
        "address, this port), as it registered; null: not registered yet.")

    class Meta:
        ordering = ["node_name", "-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.node_name} ({self.prefix}…)"
