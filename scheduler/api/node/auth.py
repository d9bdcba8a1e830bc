"""`Authorization: Bearer tpn_…` with a node's key (scheduler.services.node_keys): the node API's only
authentication. A personal API token or a console session is refused here, and a node key is
refused by /api/v1/ (it is no API token), so a node's key reaches nothing but its node's endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from scheduler.api.v1.auth import bearer_secret
from scheduler.models import NodeKey
from scheduler.services.node_keys import NodeKeyRejected, node_key_authenticate


@dataclass(frozen=True)
class NodeAgent:
    """Who a node API request comes from: the agent of one node (request.user)."""

    node_name: str
    is_authenticated: bool = True
    is_staff: bool = False
    is_superuser: bool = False
    is_active: bool = True

    def get_username(self) -> str:
        return f"node:{self.node_name}"


class NodeKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        secret = bearer_secret(request.META.get("HTTP_AUTHORIZATION", ""))
        if not secret:
            return None
        try:
            key = node_key_authenticate(secret)
        except NodeKeyRejected as error:
            raise AuthenticationFailed(str(error)) from None
        return NodeAgent(key.node_name), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="tidepool-node"'  # 401 (not 403) without credentials


class IsNodeAgent(BasePermission):
    message = "The node API takes a node's key (Authorization: Bearer tpn_…), nothing else."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, NodeKey) and isinstance(request.user, NodeAgent)
