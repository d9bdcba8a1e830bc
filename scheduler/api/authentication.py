"""HTTP Basic for the API, with correct passwords remembered briefly.

Checking a password is PBKDF2 (TIDEPOOL_PASSWORD_ITERATIONS, config/hashers.py): about 0.5 s of
CPU at Django's default, paid by every Basic request. A script polling the API would spend the
console's CPU on hashing. This class remembers, per process and for
TIDEPOOL_BASIC_AUTH_CACHE_SECONDS, that a (username, password) pair was correct — keyed by an
HMAC of both under a random per-process key, so no password is kept — together with the user's
stored hash: a changed password, a deactivated user or a deleted one is a miss at once.
Wrong passwords are never remembered: each still pays the full hash.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict

from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.authentication import BasicAuthentication

_KEY = secrets.token_bytes(32)
_MAX_ENTRIES = 1024


class _Remembered:
    def __init__(self) -> None:
        self._entries: OrderedDict[bytes, tuple[float, int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> tuple[int, str] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, user_id, password_hash = entry
            if expires < time.monotonic():
                del self._entries[key]
                return None
            return user_id, password_hash

    def put(self, key: bytes, user_id: int, password_hash: str, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic() + ttl, user_id, password_hash)
            self._entries.move_to_end(key)
            while len(self._entries) > _MAX_ENTRIES:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


remembered = _Remembered()


def _key(userid: str, password: str) -> bytes:
    return hmac.new(_KEY, f"{userid}\x00{password}".encode(), hashlib.sha256).digest()


class _KeyLocks:
    """One lock per credentials key, so that the requests of a client arriving together (50 at a
    console's start) hash its password once and not once each; the others then hit the cache.
    Wrong passwords are never cached: their attempts on one key are hashed one after the other."""

    def __init__(self) -> None:
        self._locks: dict[bytes, list] = {}  # key -> [lock, holders]
        self._guard = threading.Lock()

    def __call__(self, key: bytes) -> _KeyLock:
        return _KeyLock(self, key)


class _KeyLock:
    def __init__(self, locks: _KeyLocks, key: bytes) -> None:
        self.locks, self.key = locks, key

    def __enter__(self) -> None:
        with self.locks._guard:
            entry = self.locks._locks.setdefault(self.key, [threading.Lock(), 0])
            entry[1] += 1
        entry[0].acquire()

    def __exit__(self, *exc: object) -> None:
        with self.locks._guard:
            entry = self.locks._locks[self.key]
            entry[0].release()
            entry[1] -= 1
            if not entry[1]:
                del self.locks._locks[self.key]


key_locks = _KeyLocks()


class CachedBasicAuthentication(BasicAuthentication):
    def authenticate_credentials(self, userid, password, request=None):
        ttl = settings.TIDEPOOL_BASIC_AUTH_CACHE_SECONDS
        if ttl <= 0:
            return super().authenticate_credentials(userid, password, request)
        key = _key(userid, password)
        user = self._remembered_user(key)
        if user is not None:
            return user, None
        with key_locks(key):
            user = self._remembered_user(key)  # hashed by a request that held the lock before us
            if user is not None:
                return user, None
            user, auth = super().authenticate_credentials(userid, password, request)
            remembered.put(key, user.pk, user.password, ttl)
        return user, auth

    @staticmethod
    def _remembered_user(key: bytes):
        hit = remembered.get(key)
        if hit is None:
            return None
        user_id, password_hash = hit
        user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
        return user if user is not None and user.password == password_hash else None
