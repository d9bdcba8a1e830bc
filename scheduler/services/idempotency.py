"""Idempotent submissions: the first answer to a (user, Idempotency-Key) is stored and replayed.

The same key with the same body returns the stored answer without running the write again; the
same key with another body is refused (`IdempotencyConflict`, a 409 in the API). Only successful
answers are stored: a refusal creates nothing, so retrying it simply asks again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from scheduler.models import IdempotencyKey

MAX_KEY_LENGTH = 255
PURGE_BATCH = 10_000  # rows deleted per housekeeping pass: a backlog drains over a few cycles


class IdempotencyConflict(Exception):
    """The key was used before with a different request body."""


@dataclass(frozen=True)
class Answer:
    status_code: int
    body: Any
    replayed: bool = False


def request_digest(body: Any) -> str:
    """A digest of the body that ignores key order and whitespace."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotent(
    *, user: AbstractBaseUser, key: str, body: Any, write: Callable[[], tuple[int, Any, int | None]]
) -> Answer:
    """Run `write` (→ status, body, job id) once per (user, key); replay its answer afterwards.

    Runs in one transaction: the row is inserted with the write, so two concurrent requests with one
    key cannot both write — the second waits on the unique index, then replays (or conflicts).
    """
    digest = request_digest(body)
    stored = IdempotencyKey.objects.filter(user=user, key=key).first()
    if stored is not None:
        return _replay(stored, digest)
    try:
        with transaction.atomic():
            status_code, answer, job_id = write()
            if status_code >= 300:
                return Answer(status_code, answer)
            IdempotencyKey.objects.create(
                user=user, key=key, request_digest=digest, job_id=job_id, status_code=status_code, response=answer
            )
    except IntegrityError:  # a concurrent request with the same key committed first: ours rolled back
        return _replay(IdempotencyKey.objects.get(user=user, key=key), digest)
    return Answer(status_code, answer)


def _replay(stored: IdempotencyKey, digest: str) -> Answer:
    if stored.request_digest != digest:
        raise IdempotencyConflict(
            f"Idempotency-Key {stored.key!r} was used on {stored.created_at.isoformat()} with a different body."
        )
    return Answer(stored.status_code, stored.response, replayed=True)


def idempotency_keys_purge(*, now: datetime) -> int:
    """Delete keys stored more than TIDEPOOL_IDEMPOTENCY_KEEP_HOURS before `now` (the scheduler's
    housekeeping calls it each cycle); returns how many. A purged key submits anew."""
    cutoff = now - timedelta(hours=settings.TIDEPOOL_IDEMPOTENCY_KEEP_HOURS)
    # Ids grow with created_at: the oldest row by id answers "anything to purge?" from the primary key,
    # so the usual cycle costs one index lookup, not a scan of created_at (which has no index).
    oldest = IdempotencyKey.objects.order_by("pk").values_list("created_at", flat=True).first()
    if oldest is None or oldest >= cutoff:
        return 0
    ids = list(IdempotencyKey.objects.filter(created_at__lt=cutoff).order_by("pk").values_list("pk", flat=True)
               [:PURGE_BATCH])
    IdempotencyKey.objects.filter(pk__in=ids).delete()
    return len(ids)
