"""Password hashing with an iteration count the operator sets (TIDEPOOL_PASSWORD_ITERATIONS).

Django's PBKDF2 default (1,000,000 iterations in 5.2) costs about 0.5 s of CPU on a small host,
paid by every login (the API takes tokens or the session, never a password). Operators trade that cost against the
strength of stored hashes here; the algorithm name stays `pbkdf2_sha256`, so existing hashes
keep verifying and are re-hashed with the new count at the next successful login.
"""

from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher


class TidepoolPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    @property
    def iterations(self) -> int:  # type: ignore[override]
        return settings.TIDEPOOL_PASSWORD_ITERATIONS
