"""HTTP Basic remembers a correct password briefly (scheduler/api/authentication.py): the hash is paid
once per process and key, never for a wrong password, and requests arriving together hash once."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.exceptions import AuthenticationFailed

from scheduler.api.authentication import CachedBasicAuthentication, remembered
from tests.factories import UserFactory

User = get_user_model()


@pytest.fixture
def hashes(monkeypatch) -> list[str]:
    """Counts password checks (each is a full PBKDF2 in production); each takes 0.2 s here."""
    calls: list[str] = []
    original = User.check_password

    def counted(self, raw: str) -> bool:
        calls.append(raw)
        time.sleep(0.2)
        return original(self, raw)

    monkeypatch.setattr(User, "check_password", counted)
    remembered.clear()
    yield calls
    remembered.clear()


def authenticate(username: str, password: str):
    return CachedBasicAuthentication().authenticate_credentials(username, password)


@pytest.mark.django_db
def test_a_correct_password_is_hashed_once_and_a_changed_one_is_refused_at_once(hashes):
    carol = UserFactory(username="carol")
    carol.set_password("first secret")
    carol.save()
    assert authenticate("carol", "first secret")[0] == carol
    assert authenticate("carol", "first secret")[0] == carol
    assert hashes == ["first secret"]
    carol.set_password("second secret")
    carol.save()
    with pytest.raises(AuthenticationFailed):
        authenticate("carol", "first secret")
    assert authenticate("carol", "second secret")[0] == carol


@pytest.mark.django_db
def test_a_wrong_password_is_hashed_every_time(hashes):
    carol = UserFactory(username="carol")
    carol.set_password("right")
    carol.save()
    for _ in range(3):
        with pytest.raises(AuthenticationFailed):
            authenticate("carol", "wrong")
    assert hashes == ["wrong"] * 3


@pytest.mark.django_db(transaction=True)
def test_requests_arriving_together_hash_once(hashes):
    carol = UserFactory(username="carol")
    carol.set_password("secret")
    carol.save()
    users: list[object] = []

    def request() -> None:
        from django.db import connection

        try:
            users.append(authenticate("carol", "secret")[0])
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert users == [carol] * 8
    assert hashes == ["secret"]
