"""Shared by the v1 API tests: token clients and a valid submission."""

from __future__ import annotations

from typing import Any

from django.test import Client

from scheduler.services.tokens import token_create


def bearer(user: Any, **kwargs: Any) -> Client:
    """A client that authenticates every request with a new personal token of `user` (no session)."""
    secret = token_create(user=user, name="test", **kwargs).secret
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def submission(**overrides: Any) -> dict[str, Any]:
    body = {
        "name": "resnet",
        "workspace": "vision",
        "quota": "team-vision",
        "command": "python train.py",
        "roles": [{"name": "worker", "pod_count": 2, "gpus": 4, "cpu": 8, "memory_gib": 64}],
        "idle_mode": "acceptable",
        "priority": 3,
    }
    body.update(overrides)
    return body
