"""The REST API. Reads through scheduler.selectors (which apply permissions), writes through the
services; a service's ValidationError becomes a 400 keyed by the same field names."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from scheduler.api import serializers as s
from scheduler.api.logs import LogUnavailable, follow_window, tail_window
from scheduler.models import Node, Pod, ResourceQuota
from scheduler.selectors import (
    DEFAULT_JOB_SORT,
    JOB_SORTS,
    STATUS_GROUPS,
    JobFilters,
    job_detail,
    job_for_user,
    job_list,
    node_grid,
    quota_tree,
    submitted_job_detail,
    user_quotas,
    user_workspaces,
    with_row_data,
)
from scheduler.services.jobs import job_restart, job_stop, job_submit
from scheduler.services.nodes import node_drain, node_set_schedulable
from scheduler.services.quotas import quota_create, quota_delete, quota_update
from scheduler.states import JOB_STATUS_VALUES
from scheduler.validation import parse_id, query_text


def service_error(error: DjangoValidationError) -> ValidationError:
    """A service refusal as DRF's 400, keyed by field ("roles[0].gpus", "min_gpus", …)."""
    if hasattr(error, "error_dict"):
        return ValidationError(error.message_dict)
    return ValidationError({"non_field_errors": error.messages})


def flat_errors(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested serializer errors keyed the way the services key theirs: "roles[0].pod_count"."""
    if isinstance(errors, dict):
        flat: dict[str, list[str]] = {}
        for key, value in errors.items():
            if key == "non_field_errors" and prefix:
                name = prefix
            elif isinstance(key, int):  # a list serializer's item
                name = f"{prefix}[{key}]"
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in flat_errors(value, name).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    if isinstance(errors, list) and any(isinstance(item, dict | list) for item in errors):
        flat = {}
        for index, item in enumerate(errors):
            for field, messages in flat_errors(item, f"{prefix}[{index}]").items():
                flat.setdefault(field, []).extend(messages)
        return flat
    messages = errors if isinstance(errors, list) else [errors]
    return {prefix or "non_field_errors": [str(message) for message in messages]} if messages else {}


def validated(serializer: serializers.Serializer) -> dict[str, Any]:
    """The serializer's data, or a 400 keyed by flat field names."""
    if not serializer.is_valid():
        raise ValidationError(flat_errors(serializer.errors))
    return dict(serializer.validated_data)


def _int(value: str | None, field: str) -> int | None:
    """A whole-number query parameter: ASCII digits within a 64-bit column, else a 400 naming it."""
    if value in (None, ""):
        return None
    number = parse_id(value)
    if number is None:
        raise ValidationError({field: f"{field} must be a whole number, got {value[:40]!r}."})
    return number


def _text(request: Request, field: str) -> str:
    """A text query parameter; a NUL byte or an absurd length is a 400 naming it."""
    try:
        return query_text(request.query_params.get(field, ""), field)
    except DjangoValidationError as error:
        raise service_error(error) from None


class ApiRoot(APIView):
    def get(self, request: Request) -> Response:
        return Response(
            {
                "jobs": reverse("api:jobs", request=request),
                "quotas": reverse("api:quotas", request=request),
                "nodes": reverse("api:nodes", request=request),
                "workspaces": reverse("api:workspaces", request=request),
            }
        )


class JobListView(GenericAPIView):
    """GET: visible jobs, filtered (status, quota, workspace, idle_mode, mine, q) and sorted; POST: submit."""

    serializer_class = s.JobSerializer

    def get(self, request: Request) -> Response:
        params = request.query_params
        status_value = _text(request, "status")
        filters = JobFilters(
            status=status_value,
            quota_id=self._resolve(_text(request, "quota"), user_quotas(user=request.user)),
            workspace_id=self._resolve(_text(request, "workspace"), user_workspaces(user=request.user)),
            idle_mode=_text(request, "idle_mode"),
            mine=params.get("mine") in {"1", "true", "yes"},
            name=_text(request, "q"),
        )
        if status_value and status_value not in STATUS_GROUPS and not _is_status(status_value):
            raise ValidationError({"status": f"Unknown status {status_value!r}."})
        sort = _text(request, "sort") or DEFAULT_JOB_SORT
        if sort not in JOB_SORTS:
            raise ValidationError({"sort": f"Sort by one of {', '.join(JOB_SORTS)}."})
        jobs = with_row_data(job_list(user=request.user, filters=filters, sort=sort))
        page = self.paginate_queryset(jobs)
        return self.get_paginated_response(s.JobSerializer(page, many=True).data)

    @staticmethod
    def _resolve(value: str | None, allowed: Any) -> int | None:
        """A quota or workspace filter by id or name; one the user cannot use matches nothing."""
        if not value:
            return None
        number = parse_id(value)
        key = {"pk": number} if number is not None else {"name": value}
        found = allowed.filter(**key).values_list("pk", flat=True).first()
        return found if found is not None else -1

    def post(self, request: Request) -> Response:
        data = validated(s.JobSubmitSerializer(data=request.data))
        workspace = self._lookup(user_workspaces(user=request.user), data.pop("workspace"), "workspace")
        quota = self._lookup(user_quotas(user=request.user), data.pop("quota"), "quota")
        try:
            job = job_submit(user=request.user, workspace=workspace, quota=quota, **data)
        except DjangoValidationError as error:
            raise service_error(error) from None
        # The rows just written, with the texts this user may read: what GET answers, without reading it back.
        return Response(s.JobDetailSerializer(submitted_job_detail(user=request.user, job=job)).data,
                        status=status.HTTP_201_CREATED)

    @staticmethod
    def _lookup(queryset: Any, value: str, field: str) -> Any:
        number = parse_id(value)
        key = {"pk": number} if number is not None else {"name": value}
        found = queryset.filter(**key).first()
        if found is None:
            raise ValidationError({field: f"No {field} {value!r} that you can submit to."})
        return found


def _is_status(value: str) -> bool:
    return value in JOB_STATUS_VALUES


class JobDetailView(APIView):
    def get(self, request: Request, pk: int) -> Response:
        job = job_detail(user=request.user, job_id=pk)
        if job is None:
            raise Http404
        return Response(s.JobDetailSerializer(job).data)


class JobActionView(APIView):
    """POST /api/jobs/<id>/stop/ or /restart/."""

    action = ""

    def post(self, request: Request, pk: int) -> Response:
        job = job_for_user(user=request.user, job_id=pk)
        if job is None:
            raise Http404
        try:
            if self.action == "stop":
                job_stop(job=job, user=request.user)
            else:
                job_restart(job=job, user=request.user)
        except DjangoValidationError as error:
            raise service_error(error) from None
        return Response(s.JobDetailSerializer(job_detail(user=request.user, job_id=pk)).data)


class JobLogView(APIView):
    """GET /api/jobs/<id>/log/ — a pod's log.

    Parameters: `pod` (a pod id of this job) or `latest=1` (default: rank 0 of the newest attempt);
    `lines` (tail length, default 200); `offset` with `shown` (the pod the client shows) to get only
    what was appended since. The reply's `offset` is what to send next time. With the Celery executor
    the log is read from the pod's node; 503 with `detail` when that node does not answer.
    """

    def get(self, request: Request, pk: int) -> Response:
        job = job_for_user(user=request.user, job_id=pk)
        if job is None:
            raise Http404
        pods = Pod.objects.filter(job=job).select_related("node")
        pod_id = _int(request.query_params.get("pod"), "pod")
        shown = _int(request.query_params.get("shown"), "shown")
        offset = _int(request.query_params.get("offset"), "offset")
        lines = _int(request.query_params.get("lines"), "lines") or 200
        if pod_id is not None:
            pod = pods.filter(pk=pod_id).first()
            if pod is None:
                raise ValidationError({"pod": f"Job {job.name} has no pod {pod_id}."})
        else:
            pod = pods.order_by("-attempt", "rank").first()
        if pod is None:
            return Response({"pod": None, "text": "", "offset": 0, "reset": True})
        pod_data = {
            "id": pod.pk,
            "label": f"{pod.role}-{pod.index}",
            "rank": pod.rank,
            "attempt": pod.attempt,
            "status": pod.status,
            "node": pod.node.name if pod.node else None,
        }
        try:
            if shown == pod.pk and offset is not None:
                window = follow_window(pod, offset)
            else:
                window = tail_window(pod, lines)
        except LogUnavailable as error:  # the log is on a node that did not answer
            return Response({"detail": str(error), "pod": pod_data}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(
            {
                "pod": pod_data,
                "text": window.text,
                "offset": window.offset,
                "reset": window.reset,
            }
        )


class QuotaListView(APIView):
    """GET: the quota tree with use (every authenticated user); POST: create (staff)."""

    def get_permissions(self) -> list[Any]:
        return [IsAdminUser()] if self.request.method == "POST" else [IsAuthenticated()]

    def get(self, request: Request) -> Response:
        tree = quota_tree()
        names = {usage.quota.pk: usage.quota.name for usage in tree}
        return Response(s.QuotaSerializer(tree, many=True, context={"names": names}).data)

    def post(self, request: Request) -> Response:
        fields = validated(s.QuotaWriteSerializer(data=request.data))
        try:
            quota = quota_create(**fields)
        except DjangoValidationError as error:
            raise service_error(error) from None
        return Response(_quota_data(quota.pk), status=status.HTTP_201_CREATED)


def _quota_data(pk: int) -> dict[str, Any]:
    tree = quota_tree()
    names = {usage.quota.pk: usage.quota.name for usage in tree}
    usage = next(u for u in tree if u.quota.pk == pk)
    return s.QuotaSerializer(usage, context={"names": names}).data


class QuotaDetailView(APIView):
    """GET (any user), PATCH and DELETE (staff) one quota."""

    def get_permissions(self) -> list[Any]:
        return [IsAuthenticated()] if self.request.method == "GET" else [IsAdminUser()]

    def _quota(self, pk: int) -> ResourceQuota:
        quota = ResourceQuota.objects.filter(pk=pk).first()
        if quota is None:
            raise Http404
        return quota

    def get(self, request: Request, pk: int) -> Response:
        return Response(_quota_data(self._quota(pk).pk))

    def patch(self, request: Request, pk: int) -> Response:
        quota = self._quota(pk)
        fields = validated(s.QuotaWriteSerializer(data=request.data, partial=True))
        workspaces = fields.pop("workspaces", None)
        try:
            quota_update(quota=quota, workspaces=workspaces, **fields)
        except DjangoValidationError as error:
            raise service_error(error) from None
        return Response(_quota_data(quota.pk))

    def delete(self, request: Request, pk: int) -> Response:
        try:
            quota_delete(quota=self._quota(pk))
        except DjangoValidationError as error:
            raise service_error(error) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class NodeListView(APIView):
    def get(self, request: Request) -> Response:
        return Response(s.NodeSerializer(node_grid(user=request.user), many=True).data)


class NodeActionView(APIView):
    """POST /api/nodes/<id>/cordon/, /uncordon/, /drain/ (staff)."""

    permission_classes = [IsAdminUser]
    action = ""

    def post(self, request: Request, pk: int) -> Response:
        node = Node.objects.filter(pk=pk).first()
        if node is None:
            raise Http404
        try:
            if self.action == "drain":
                node_drain(node=node)
            else:
                node_set_schedulable(node=node, schedulable=self.action == "uncordon")
        except DjangoValidationError as error:
            raise service_error(error) from None
        grid = next(g for g in node_grid(user=request.user) if g.node.pk == pk)
        return Response(s.NodeSerializer(grid).data)


class WorkspaceListView(APIView):
    """The caller's workspaces (staff: all) and the quotas each may submit to."""

    def get(self, request: Request) -> Response:
        workspaces = user_workspaces(user=request.user).prefetch_related("quotas").order_by("name")
        return Response(s.WorkspaceSerializer(workspaces, many=True).data)
