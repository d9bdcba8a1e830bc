"""/api/v1/ quotas, nodes, workspaces and the caller: /api/'s reads behind v1's authentication; the
pools and their policies (v1 only, read-only)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler.api import views as base
from scheduler.api.v1 import serializers as s
from scheduler.api.v1.auth import BearerTokenAuthentication
from scheduler.api.v1.views import V1, _errors
from scheduler.selectors import user_workspaces
from scheduler.selectors.pools import pool_policy_rows


class QuotaListView(V1, base.QuotaListView):
    http_method_names = ["get", "head", "options"]

    def get_permissions(self) -> list:
        return [IsAuthenticated()]

    @extend_schema(responses={200: s.QuotaSerializer(many=True), **_errors(401)},
                   summary="The quota tree, depth first, with each subtree's GPU use and jobs")
    def get(self, request: Request) -> Response:
        return super().get(request)


class QuotaDetailView(V1, base.QuotaDetailView):
    http_method_names = ["get", "head", "options"]

    @extend_schema(parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="The quota's id.")],
                   responses={200: s.QuotaSerializer, **_errors(401, 404)}, summary="One quota with its use")
    def get(self, request: Request, pk: int) -> Response:
        return super().get(request, pk)


class NodeListView(V1, base.NodeListView):
    @extend_schema(responses={200: s.NodeSerializer(many=True), **_errors(401)},
                   summary="Nodes with their GPUs and the job on each (names only of jobs the caller may see)")
    def get(self, request: Request) -> Response:
        return super().get(request)


class WorkspaceListView(V1, base.WorkspaceListView):
    @extend_schema(responses={200: s.WorkspaceSerializer(many=True), **_errors(401)},
                   summary="The caller's workspaces (staff: all) and the quotas each may submit to")
    def get(self, request: Request) -> Response:
        return super().get(request)


class PoolListView(V1, APIView):
    @extend_schema(responses={200: s.PoolSerializer(many=True), **_errors(401)},
                   summary="The pools (resource types with nodes or policies) and their scheduling policies")
    def get(self, request: Request) -> Response:
        return Response(s.PoolSerializer(pool_policy_rows(), many=True).data)


class MeView(V1, APIView):
    @extend_schema(responses={200: s.MeSerializer, **_errors(401)}, summary="Who the credentials belong to")
    def get(self, request: Request) -> Response:
        how = "token" if isinstance(request.successful_authenticator, BearerTokenAuthentication) else "session"
        names = list(user_workspaces(user=request.user).order_by("name").values_list("name", flat=True))
        return Response(s.MeSerializer({"username": request.user.get_username(), "is_staff": request.user.is_staff,
                                        "workspaces": names, "authenticated_by": how}).data)
