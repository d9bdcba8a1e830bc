"""A user's API tokens, as the console's token page lists them (prefix only; the secret is never stored)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from scheduler.models import ApiToken


def user_tokens(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    if not user.is_authenticated:
        return ApiToken.objects.none()
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")
