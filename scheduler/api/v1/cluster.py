"""/api/v1/ quotas, nodes, workspaces, pools and the caller: reads, and a node's drain for staff
(staff change quotas and pools, and cordon nodes, on the console's pages)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler.api.v1 import serializers as s
from scheduler.api.v1.auth import BearerTokenAuthentication
from scheduler.api.v1.views import V1, _errors
from scheduler.models import Node
from scheduler.selectors import node_grid, quota_tree, user_workspaces
from scheduler.selectors.pools import pool_policy_rows
from scheduler.services.nodes import node_drain


def _quota_rows(pk: int | None = None) -> Any:
    """The quota tree serialized (or its quota `pk`); parents are named, so the tree is read whole."""
    tree = quota_tree()
    names = {usage.quota.pk: usage.quota.name for usage in tree}
    if pk is None:
        return s.QuotaSerializer(tree, many=True, context={"names": names}).data
    usage = next((u for u in tree if u.quota.pk == pk), None)
    if usage is None:
        raise Http404
    return s.QuotaSerializer(usage, context={"names": names}).data


class QuotaListView(V1, APIView):
    @extend_schema(responses={200: s.QuotaSerializer(many=True), **_errors(401)},
                   summary="The quota tree, depth first, with each subtree's GPU use and jobs")
    def get(self, request: Request) -> Response:
        return Response(_quota_rows())


class QuotaDetailView(V1, APIView):
    @extend_schema(parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="The quota's id.")],
                   responses={200: s.QuotaSerializer, **_errors(401, 404)}, summary="One quota with its use")
    def get(self, request: Request, pk: int) -> Response:
        return Response(_quota_rows(pk))


class NodeListView(V1, APIView):
    @extend_schema(responses={200: s.NodeSerializer(many=True), **_errors(401)},
                   summary="Nodes with their GPUs and the job on each (names only of jobs the caller may see)")
    def get(self, request: Request) -> Response:
        return Response(s.NodeSerializer(node_grid(user=request.user), many=True).data)


class NodeDrainView(V1, APIView):
    @extend_schema(request=None,
                   parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, description="The node's name.")],
                   responses={200: s.NodeSerializer, **_errors(401),
                              403: OpenApiResponse(s.ErrorSerializer, description="The caller is not staff (or a "
                                                   "session request came without a CSRF token)."),
                              404: OpenApiResponse(s.ErrorSerializer, description="No node of that name.")},
                   summary="Drain a node (staff): cordon it; its jobs are preempted with their grace period and "
                           "restart elsewhere")
    def post(self, request: Request, name: str) -> Response:
        if not request.user.is_staff:
            raise PermissionDenied("Draining a node is for staff (the console's Nodes page shows who is).")
        node = Node.objects.filter(name=name).first()
        if node is None:
            raise Http404
        node_drain(node=node)
        row = next(row for row in node_grid(user=request.user) if row.node.pk == node.pk)
        return Response(s.NodeSerializer(row).data)


class WorkspaceListView(V1, APIView):
    @extend_schema(responses={200: s.WorkspaceSerializer(many=True), **_errors(401)},
                   summary="The caller's workspaces (staff: all) and the quotas each may submit to")
    def get(self, request: Request) -> Response:
        workspaces = user_workspaces(user=request.user).prefetch_related("quotas").order_by("name")
        return Response(s.WorkspaceSerializer(workspaces, many=True).data)


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
