"""`Authorization: Bearer tp_…` with a personal API token (scheduler.services.tokens).

A token request never touches a session: DRF authenticates it per request, nothing logs the user
in, and no session cookie is read or set for it. Session requests keep DRF's CSRF check.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from scheduler.services.tokens import TokenRejected, token_authenticate


def bearer_secret(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None for another scheme."""
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return secret.strip()


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        secret = bearer_secret(request.META.get("HTTP_AUTHORIZATION", ""))
        if secret is None:
            return None
        if not secret:
            raise AuthenticationFailed("Empty bearer token.")
        try:
            token = token_authenticate(secret)
        except TokenRejected as error:
            raise AuthenticationFailed(str(error)) from None
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="tidepool"'  # makes DRF answer 401 (not 403) without credentials


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "scheduler.api.v1.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (console: Settings → API tokens), e.g. `Bearer tp_…`.",
        }


AUTHENTICATION = [BearerTokenAuthentication, SessionAuthentication]
