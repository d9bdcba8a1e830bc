"""/api/v1/ jobs behind bearer-token or session authentication: list, submit (idempotent), detail,
stop, restart, clone, events, pods, logs (tail, follow, stream) and GPU samples.

Views only translate HTTP: reads go through the selectors (which apply permissions), writes through
the services; a service's refusal is a 400 keyed by its field names (scheduler.api.v1.inputs)."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler.api.logs import LogUnavailable, follow_window, tail_window
from scheduler.api.v1 import serializers as s
from scheduler.api.v1.auth import AUTHENTICATION
from scheduler.api.v1.follow import follow_log
from scheduler.api.v1.inputs import choice_param, flag_param, int_param, service_error, text_param, validated
from scheduler.models import IdleMode, Job, Pod
from scheduler.selectors import (
    DEFAULT_JOB_SORT,
    JOB_SORTS,
    STATUS_GROUPS,
    JobFilters,
    job_detail,
    job_for_user,
    job_list,
    submitted_job_detail,
    user_quotas,
    user_workspaces,
    with_row_data,
)
from scheduler.selectors.gpu import job_gpu_samples
from scheduler.services.clone import job_clone
from scheduler.services.idempotency import MAX_KEY_LENGTH, IdempotencyConflict, idempotent
from scheduler.services.jobs import job_restart, job_stop, job_submit
from scheduler.states import JOB_STATUS_VALUES
from scheduler.validation import parse_id

ERRORS = {
    400: OpenApiResponse(OpenApiTypes.OBJECT, description="Refused: the keys name the fields, e.g. "
                         '`{"roles[0].gpus": ["…"]}`; nothing was created or changed.'),
    401: OpenApiResponse(s.ErrorSerializer, description="No credentials, or an unknown, expired or revoked token."),
    403: OpenApiResponse(s.ErrorSerializer, description="Session request without a CSRF token."),
    404: OpenApiResponse(s.ErrorSerializer, description="No such job, or one outside the caller's workspaces."),
}
JOB_ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The job's id.")


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    return {code: ERRORS[code] for code in codes}


def as_json(data: Any) -> Any:
    """Serializer output as plain JSON values (decimals → numbers), as a client receives it."""
    return json.loads(JSONRenderer().render(data))


class V1:
    authentication_classes = AUTHENTICATION


def visible_job(request: Request, pk: int) -> Job:
    job = job_detail(user=request.user, job_id=pk)
    if job is None:
        raise Http404
    return job


LIST_PARAMETERS = [
    OpenApiParameter("status", str, description="A status (`Running`, `Preempted`, …) or a group: "
                     "`active`, `pending`, `finished`."),
    OpenApiParameter("quota", str, description="Quota name or id; one the caller cannot use matches nothing."),
    OpenApiParameter("workspace", str, description="Workspace name or id; one the caller cannot use matches nothing."),
    OpenApiParameter("idle_mode", str, enum=["off", "acceptable", "only"], description="The jobs' idle mode."),
    OpenApiParameter("mine", str, enum=["1", "0"], description="`1`: only jobs the caller submitted."),
    OpenApiParameter("q", str, description="Part of the job name."),
    OpenApiParameter("sort", str, enum=list(JOB_SORTS), description="Order (default `-submitted`)."),
    OpenApiParameter("page", {"type": "integer", "minimum": 1}, description="Page number (50 jobs per page)."),
]
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": r"\S"},
    OpenApiParameter.HEADER,
    description="Optional, up to 255 characters. The same key with the same body answers the first "
    "submission's response again (header `Idempotent-Replayed: true`) and creates nothing; with another "
    "body: 409. Keys are per user.",
)


class JobListView(V1, GenericAPIView):
    """GET: visible jobs, filtered (status, quota, workspace, idle_mode, mine, q) and sorted; POST: submit."""

    serializer_class = s.JobSerializer

    @extend_schema(operation_id="jobs_list", parameters=LIST_PARAMETERS, responses={200: s.JobSerializer(many=True),
                   **_errors(400, 401), 404: OpenApiResponse(s.ErrorSerializer, description="A page past the last.")},
                   summary="Visible jobs, filtered, sorted and paginated")
    def get(self, request: Request) -> Response:
        status_value = text_param(request, "status")
        filters = JobFilters(
            status=status_value,
            quota_id=_allowed_id(text_param(request, "quota"), user_quotas(user=request.user)),
            workspace_id=_allowed_id(text_param(request, "workspace"), user_workspaces(user=request.user)),
            idle_mode=choice_param(request, "idle_mode", IdleMode.values),
            mine=flag_param(request, "mine"),
            name=text_param(request, "q"),
        )
        if status_value and status_value not in STATUS_GROUPS and status_value not in JOB_STATUS_VALUES:
            raise ValidationError({"status": [f"Unknown status {status_value[:40]!r}: one of "
                                              f"{', '.join(JOB_STATUS_VALUES)}, or a group: {', '.join(STATUS_GROUPS)}."]})
        sort = text_param(request, "sort") or DEFAULT_JOB_SORT
        if sort not in JOB_SORTS:
            raise ValidationError({"sort": [f"Sort by one of {', '.join(JOB_SORTS)}."]})
        if int_param(request, "page") == 0:  # DRF would answer 404 "Invalid page." for a malformed page
            raise ValidationError({"page": ["Pages are numbered from 1."]})
        jobs = with_row_data(job_list(user=request.user, filters=filters, sort=sort))
        page = self.paginate_queryset(jobs)
        return self.get_paginated_response(s.JobSerializer(page, many=True).data)

    @extend_schema(operation_id="jobs_create", request=s.JobSubmitSerializer, parameters=[IDEMPOTENCY],
                   responses={201: s.JobDetailSerializer, **_errors(400, 401, 403),
                              409: OpenApiResponse(OpenApiTypes.OBJECT,
                                                   description="The Idempotency-Key was used with another body.")},
                   summary="Submit a job")
    def post(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return self.submit(request)
        if not key.strip() or len(key) > MAX_KEY_LENGTH:
            raise ValidationError({"Idempotency-Key": [f"1 to {MAX_KEY_LENGTH} characters (got {len(key)})."]})

        def write() -> tuple[int, Any, int | None]:
            response = self.submit(request)
            return response.status_code, as_json(response.data), response.data.get("id")

        try:
            answer = idempotent(user=request.user, key=key, body=request.data, write=write)
        except IdempotencyConflict as error:
            return Response({"Idempotency-Key": [str(error)]}, status=status.HTTP_409_CONFLICT)
        response = Response(answer.body, status=answer.status_code)
        if answer.replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    @staticmethod
    def submit(request: Request) -> Response:
        data = validated(s.JobSubmitSerializer(data=request.data))
        workspace = _submittable(user_workspaces(user=request.user), data.pop("workspace"), "workspace")
        quota = _submittable(user_quotas(user=request.user), data.pop("quota"), "quota")
        try:
            job = job_submit(user=request.user, workspace=workspace, quota=quota, **data)
        except DjangoValidationError as error:
            raise service_error(error) from None
        # The rows just written, with the texts this user may read: what GET answers, without reading it back.
        return Response(s.JobDetailSerializer(submitted_job_detail(user=request.user, job=job)).data,
                        status=status.HTTP_201_CREATED)


def _allowed_id(value: str, allowed: Any) -> int | None:
    """A quota or workspace filter by id or name; one the user cannot use matches nothing (-1)."""
    if not value:
        return None
    number = parse_id(value)
    key = {"pk": number} if number is not None else {"name": value}
    found = allowed.filter(**key).values_list("pk", flat=True).first()
    return found if found is not None else -1


def _submittable(queryset: Any, value: str, field: str) -> Any:
    """The workspace or quota (by id or name) the user may submit to, else a 400 naming the field."""
    number = parse_id(value)
    key = {"pk": number} if number is not None else {"name": value}
    found = queryset.filter(**key).first()
    if found is None:
        raise ValidationError({field: [f"No {field} {value!r} that you can submit to."]})
    return found


class JobDetailView(V1, APIView):
    @extend_schema(parameters=[JOB_ID], responses={200: s.JobDetailSerializer, **_errors(401, 404)},
                   summary="A job with roles, pods of every attempt and events")
    def get(self, request: Request, pk: int) -> Response:
        return Response(s.JobDetailSerializer(visible_job(request, pk)).data)


class JobActionView(V1, APIView):
    """POST /api/v1/jobs/<id>/stop/ or /restart/."""

    action = ""

    @extend_schema(request=None, parameters=[JOB_ID], responses={200: s.JobDetailSerializer,
                   **_errors(400, 401, 403, 404)}, summary="Stop (SIGTERM, grace) or restart a job")
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


class JobCloneView(V1, APIView):
    @extend_schema(request=s.CloneSerializer, parameters=[JOB_ID],
                   responses={201: s.JobDetailSerializer, **_errors(400, 401, 403, 404)},
                   summary="Submit a copy of a job (name: `<name>-clone` unless given)")
    def post(self, request: Request, pk: int) -> Response:
        job = visible_job(request, pk)
        incoming = s.CloneSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            clone = job_clone(job=job, user=request.user, name=incoming.validated_data.get("name"))
        except DjangoValidationError as error:
            raise service_error(error) from None
        data = s.JobDetailSerializer(job_detail(user=request.user, job_id=clone.pk)).data
        return Response(data, status=status.HTTP_201_CREATED)


class JobEventsView(V1, APIView):
    @extend_schema(parameters=[JOB_ID], responses={200: s.EventSerializer(many=True), **_errors(401, 404)},
                   summary="A job's events, oldest first")
    def get(self, request: Request, pk: int) -> Response:
        return Response(s.EventSerializer(visible_job(request, pk).events.all(), many=True).data)


class JobPodsView(V1, APIView):
    @extend_schema(parameters=[JOB_ID], responses={200: s.PodSerializer(many=True), **_errors(401, 404)},
                   summary="A job's pods of every attempt, newest attempt first")
    def get(self, request: Request, pk: int) -> Response:
        return Response(s.PodSerializer(visible_job(request, pk).pods.all(), many=True).data)


LOG_PARAMETERS = [
    JOB_ID,
    OpenApiParameter("pod", int, description="A pod id of this job (default: rank 0 of the newest attempt)."),
    OpenApiParameter("lines", int, description="Length of the tail (default 200, at most 5000)."),
    OpenApiParameter("shown", int, description="The pod the client shows; with `offset`: only what follows."),
    OpenApiParameter("offset", int, description="The `offset` of the previous answer."),
    OpenApiParameter("follow", str, enum=["1", "0"], description="`1`: stream the log as `text/plain` from "
                     "`offset` (default: the tail) until the pod has exited."),
]


class JobLogView(V1, APIView):
    """GET /api/v1/jobs/<id>/logs/ — a pod's log.

    Parameters: `pod` (a pod id of this job; default: rank 0 of the newest attempt); `lines` (tail
    length, default 200); `offset` with `shown` (the pod the client shows) to get only what was
    appended since. The reply's `offset` is what to send next time. With `follow=1`: a text/plain
    stream. With the Celery executor the log is read from the pod's node; 503 with `detail` when
    that node does not answer.
    """

    @extend_schema(parameters=LOG_PARAMETERS, responses={
        (200, "application/json"): s.LogSerializer,
        (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="With `follow=1`: the log as it grows."),
        **_errors(400, 401, 404),
        503: OpenApiResponse(OpenApiTypes.OBJECT, description="The pod's node did not answer; ask again later."),
    }, summary="A pod's log: tail, what follows an offset, or a stream")
    def get(self, request: Request, pk: int) -> Any:
        job = job_for_user(user=request.user, job_id=pk)
        if job is None:
            raise Http404
        pods = Pod.objects.filter(job=job).select_related("node")
        pod_id = int_param(request, "pod")
        shown = int_param(request, "shown")
        offset = int_param(request, "offset")
        lines = int_param(request, "lines") or 200
        pod = pods.filter(pk=pod_id).first() if pod_id is not None else pods.order_by("-attempt", "rank").first()
        if pod_id is not None and pod is None:
            raise ValidationError({"pod": [f"Job {job.name} has no pod {pod_id}."]})
        if flag_param(request, "follow"):
            response = StreamingHttpResponse(follow_log(pod, offset=offset, lines=lines), content_type="text/plain")
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"
            return response
        if pod is None:
            return Response({"pod": None, "text": "", "offset": 0, "reset": True})
        pod_data = {"id": pod.pk, "label": f"{pod.role}-{pod.index}", "rank": pod.rank, "attempt": pod.attempt,
                    "status": pod.status, "node": pod.node.name if pod.node else None}
        try:
            window = follow_window(pod, offset) if shown == pod.pk and offset is not None else tail_window(pod, lines)
        except LogUnavailable as error:  # the log is on a node that did not answer
            return Response({"detail": str(error), "pod": pod_data}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({"pod": pod_data, "text": window.text, "offset": window.offset, "reset": window.reset})


class JobGpuView(V1, APIView):
    @extend_schema(parameters=[JOB_ID], responses={200: s.GpuSampleSerializer(many=True), **_errors(401, 404)},
                   summary="NVML samples of the job's GPUs (empty where the nodes have no NVML)")
    def get(self, request: Request, pk: int) -> Response:
        return Response(s.GpuSampleSerializer(job_gpu_samples(job=visible_job(request, pk)), many=True).data)
