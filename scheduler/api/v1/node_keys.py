"""/api/v1/node-keys/: staff add a node (its first key), rotate and revoke node keys (DESIGN §6).

A key's secret is in the answer to its creation or rotation only; lists show its prefix. The key is
what the node's agent holds (TIDEPOOL_NODE_KEY): it opens /api/node/v1/ for that node and nothing else.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler.api.v1 import serializers as s
from scheduler.api.v1.inputs import service_error
from scheduler.api.v1.views import V1, _errors
from scheduler.models import NodeKey
from scheduler.selectors.node_keys import node_key_list
from scheduler.services.node_keys import NewNodeKey, node_key_create, node_key_revoke, node_key_rotate


class NodeKeySerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node_name", help_text="The node the key acts as.")
    live = serializers.SerializerMethodField(help_text="Not revoked: an agent holding it is served.")

    class Meta:
        model = NodeKey
        fields = ["node", "prefix", "created_at", "last_used_at", "revoked_at", "live"]
        extra_kwargs = {
            "prefix": {"help_text": "The key's first characters, to tell keys apart (the key itself is never stored)."},
            "created_at": {"help_text": "When it was made (the node added, or its key rotated)."},
            "last_used_at": {"help_text": "Last request of its agent (to the minute); null: never used."},
            "revoked_at": {"help_text": "When it was revoked or rotated away; null: live."},
        }

    def get_live(self, key: NodeKey) -> bool:
        return key.revoked_at is None


class NewNodeKeySerializer(NodeKeySerializer):
    key = serializers.CharField(help_text="The whole key, shown this once: give it to the node's agent "
                                          "(TIDEPOOL_NODE_KEY). Only its SHA-256 is stored.")

    class Meta(NodeKeySerializer.Meta):
        fields = [*NodeKeySerializer.Meta.fields, "key"]


class AddNodeSerializer(serializers.Serializer):
    node = serializers.CharField(max_length=200, help_text="The new node's name (lowercase letters, digits, dashes).")


STAFF_ONLY = OpenApiResponse(s.ErrorSerializer, description="The caller is not staff (or a session request "
                                                            "came without a CSRF token).")
NODE = OpenApiParameter("node", str, OpenApiParameter.PATH, description="The node's name.")


def _staff(request: Request) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("Node keys are for staff (the console's Nodes page shows who is).")


def _shown_once(created: NewNodeKey) -> Response:
    created.key.key = created.secret
    return Response(NewNodeKeySerializer(created.key).data, status=status.HTTP_201_CREATED)


class NodeKeyListView(V1, APIView):
    @extend_schema(responses={200: NodeKeySerializer(many=True), **_errors(401), 403: STAFF_ONLY},
                   summary="Node keys (staff): live ones and those revoked in the last 30 days, prefix only")
    def get(self, request: Request) -> Response:
        _staff(request)
        return Response(NodeKeySerializer(node_key_list(), many=True).data)

    @extend_schema(request=AddNodeSerializer, responses={201: NewNodeKeySerializer, **_errors(400, 401),
                                                         403: STAFF_ONLY},
                   summary="Add a node (staff): its key, shown this once; refused when the node has a live key")
    def post(self, request: Request) -> Response:
        _staff(request)
        body = AddNodeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            return _shown_once(node_key_create(node_name=body.validated_data["node"], created_by=request.user))
        except DjangoValidationError as error:
            raise service_error(error) from None


class NodeKeyActionView(V1, APIView):
    action: str = ""

    def post(self, request: Request, node: str) -> Any:
        _staff(request)
        try:
            if self.action == "rotate":
                return _shown_once(node_key_rotate(node_name=node, created_by=request.user))
            return Response(NodeKeySerializer(node_key_revoke(node_name=node)).data)
        except DjangoValidationError as error:
            raise service_error(error) from None


class NodeKeyRotateView(NodeKeyActionView):
    action = "rotate"

    @extend_schema(request=None, parameters=[NODE],
                   responses={201: NewNodeKeySerializer, **_errors(400, 401), 403: STAFF_ONLY},
                   summary="Rotate a node's key (staff): a new key, shown this once; the old one is refused from now")
    def post(self, request: Request, node: str) -> Any:
        return super().post(request, node)


class NodeKeyRevokeView(NodeKeyActionView):
    action = "revoke"

    @extend_schema(request=None, parameters=[NODE],
                   responses={200: NodeKeySerializer, **_errors(400, 401), 403: STAFF_ONLY},
                   summary="Revoke a node's key (staff): its agent is refused from now on")
    def post(self, request: Request, node: str) -> Any:
        return super().post(request, node)
