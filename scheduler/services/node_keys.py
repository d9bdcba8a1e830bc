"""Node keys (DESIGN §6): created when an admin adds a node, shown once, rotated, revoked, checked.

A key reads `tpn_<8 characters>_<43 characters>`; its first 12 characters are its prefix, shown in
lists. Only its SHA-256 is stored, the digest personal API tokens use (`tokens.token_digest`): a
database that leaks gives no key. A node name has at most one live key: adding a node that has one
is refused (rotate it instead); rotating revokes the live key and makes a new one in one transaction,
so an agent still holding the old key is refused from that moment.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduler.models import NodeKey
from scheduler.services.tokens import LAST_USED_RESOLUTION, token_digest
from scheduler.validation import NAME_RE

NODE_KEY_PREFIX = "tpn_"
NODE_KEY_PREFIX_LENGTH = len(NODE_KEY_PREFIX) + 8
NODE_NAME_MAX = 64  # Node.name's column


class NodeKeyRejected(Exception):
    """The key is unknown or revoked; the message says which."""


@dataclass(frozen=True)
class NewNodeKey:
    key: NodeKey
    secret: str  # the whole key: shown once, never stored


def check_node_name(name: object) -> str:
    """`name` as a node name (lowercase letters, digits, dashes; at most 64), or a ValidationError."""
    if not isinstance(name, str) or len(name) > NODE_NAME_MAX or not NAME_RE.fullmatch(name):
        raise ValidationError({"node": f"A node name is 1–{NODE_NAME_MAX} lowercase letters (a–z), digits or dashes, "
                                       "starting and ending with a letter or digit."})
    return name


def live_node_key(node_name: str) -> NodeKey | None:
    return NodeKey.objects.filter(node_name=node_name, revoked_at=None).first()


def _make(node_name: str, created_by: AbstractBaseUser | None) -> NewNodeKey:
    secret = f"{NODE_KEY_PREFIX}{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    key = NodeKey.objects.create(node_name=node_name, prefix=secret[:NODE_KEY_PREFIX_LENGTH],
                                 digest=token_digest(secret), created_by=created_by)
    return NewNodeKey(key=key, secret=secret)


@transaction.atomic
def node_key_create(*, node_name: str, created_by: AbstractBaseUser | None = None) -> NewNodeKey:
    """Add a node: its first key. Refused when the name already has a live key (rotate it)."""
    node_name = check_node_name((node_name or "").strip() if isinstance(node_name, str) else node_name)
    current = NodeKey.objects.select_for_update().filter(node_name=node_name, revoked_at=None).first()
    if current is not None:
        raise ValidationError({"node": f"Node {node_name} already has a key ({current.prefix}…): rotate it to "
                                       "get a new one, or revoke it."})
    return _make(node_name, created_by)


@transaction.atomic
def node_key_rotate(*, node_name: str, created_by: AbstractBaseUser | None = None) -> NewNodeKey:
    """A new key for the node; its live key (if any) is revoked in the same transaction."""
    node_name = check_node_name(node_name)
    NodeKey.objects.select_for_update().filter(node_name=node_name, revoked_at=None).update(
        revoked_at=timezone.now())
    return _make(node_name, created_by)


@transaction.atomic
def node_key_revoke(*, node_name: str) -> NodeKey:
    """Revoke the node's live key: its agent is refused from now on (its pods keep running, and
    the node is marked lost once its heartbeats stop). Refused when it has none."""
    node_name = check_node_name(node_name)
    key = NodeKey.objects.select_for_update().filter(node_name=node_name, revoked_at=None).first()
    if key is None:
        raise ValidationError({"node": f"Node {node_name} has no live key to revoke."})
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    return key


def node_key_authenticate(secret: str) -> NodeKey:
    """The live key `secret` is; raises NodeKeyRejected saying why it cannot be used."""
    key = NodeKey.objects.filter(digest=token_digest(secret.strip())).first()
    if key is None:
        raise NodeKeyRejected("Unknown node key.")
    if key.revoked_at is not None:
        raise NodeKeyRejected(f"Node key {key.prefix}… of node {key.node_name} was revoked.")
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        NodeKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def node_log_ticket_key(key: NodeKey) -> bytes:
    """The key that signs the console's log tickets to this node and the node's answers
    (node/remote/log_tickets.py): derived from SECRET_KEY and the node key's digest, so the console
    needs to store nothing, a database reader cannot forge it, and a rotation changes it."""
    return hmac.new(settings.SECRET_KEY.encode(), b"tidepool-node-log-ticket\0" + key.digest.encode(),
                    hashlib.sha256).digest()


def node_key_log_port_set(*, key: NodeKey, log_port: int | None) -> None:
    """Where the agent holding `key` serves its pods' logs (its node's address, this port)."""
    if key.log_port != log_port:
        NodeKey.objects.filter(pk=key.pk).update(log_port=log_port)
        key.log_port = log_port
