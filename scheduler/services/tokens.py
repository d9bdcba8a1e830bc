"""Personal API tokens: created, revoked and checked here; only a SHA-256 of each token is stored.

A token reads `tp_<8 characters>_<43 characters>`; the first 11 characters (`tp_` and the 8) are its
prefix, shown in lists so a user can tell tokens apart. The whole token is shown once, at creation.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduler.models import ApiToken

TOKEN_PREFIX = "tp_"
PREFIX_LENGTH = len(TOKEN_PREFIX) + 8
LAST_USED_RESOLUTION = timedelta(minutes=1)  # `last_used_at` is written at most once a minute per token


class TokenRejected(Exception):
    """The token is unknown, expired or revoked; the message says which."""


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # the whole token: shown once, never stored


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_create(*, user: AbstractBaseUser, name: str, expires_at: datetime | None = None) -> NewToken:
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "Name the token (e.g. the laptop or pipeline that uses it)."})
    if len(name) > 64:
        raise ValidationError({"name": f"A token name is at most 64 characters (got {len(name)})."})
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": "The expiry must be in the future (or empty: never)."})
    secret = f"{TOKEN_PREFIX}{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        user=user, name=name, prefix=secret[:PREFIX_LENGTH], digest=token_digest(secret), expires_at=expires_at
    )
    return NewToken(token=token, secret=secret)


@transaction.atomic
def token_revoke(*, user: AbstractBaseUser, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens (revoking twice changes nothing)."""
    token = ApiToken.objects.select_for_update().filter(pk=token_id, user=user).first()
    if token is None:
        raise ValidationError({"token": f"You have no token {token_id}."})
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def token_authenticate(secret: str) -> ApiToken:
    """The token `secret` names, with its user; raises TokenRejected saying why it cannot be used."""
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(secret.strip())).first()
    if token is None:
        raise TokenRejected("Unknown API token.")
    now = timezone.now()
    if token.revoked_at is not None:
        raise TokenRejected(f"API token {token.prefix}… was revoked.")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRejected(f"API token {token.prefix}… expired at {token.expires_at.isoformat()}.")
    if not token.user.is_active:
        raise TokenRejected("The token's user is inactive.")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
