"""/api/v1/ jobs: /api/'s views (scheduler.api.views) behind bearer-token or session authentication,
plus idempotent submission, clone, events, pods, log following and GPU samples.

Views only translate HTTP: reads go through the selectors, writes through the services."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler.api import views as base
from scheduler.api.v1 import serializers as s
from scheduler.api.v1.auth import AUTHENTICATION
from scheduler.api.v1.follow import follow_log
from scheduler.models import Job, Pod
from scheduler.selectors import job_detail, job_for_user
from scheduler.selectors.gpu import job_gpu_samples
from scheduler.services.clone import job_clone
from scheduler.services.idempotency import MAX_KEY_LENGTH, IdempotencyConflict, idempotent

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
    OpenApiParameter("sort", str, enum=list(base.JOB_SORTS), description="Order (default `-submitted`)."),
    OpenApiParameter("page", int, description="Page number (50 jobs per page)."),
]
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER,
    description="Optional, up to 255 characters. The same key with the same body answers the first "
    "submission's response again (header `Idempotent-Replayed: true`) and creates nothing; with another "
    "body: 409. Keys are per user.",
)


class JobListView(V1, base.JobListView):
    @extend_schema(operation_id="jobs_list", parameters=LIST_PARAMETERS, responses={200: s.JobSerializer(many=True),
                   **_errors(400, 401)}, summary="Visible jobs, filtered, sorted and paginated")
    def get(self, request: Request) -> Response:
        return super().get(request)

    @extend_schema(operation_id="jobs_create", request=s.JobSubmitSerializer, parameters=[IDEMPOTENCY],
                   responses={201: s.JobDetailSerializer, **_errors(400, 401, 403),
                              409: OpenApiResponse(OpenApiTypes.OBJECT,
                                                   description="The Idempotency-Key was used with another body.")},
                   summary="Submit a job")
    def post(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return super().post(request)
        if not key.strip() or len(key) > MAX_KEY_LENGTH:
            raise ValidationError({"Idempotency-Key": f"1 to {MAX_KEY_LENGTH} characters (got {len(key)})."})

        def write() -> tuple[int, Any, int | None]:
            response = base.JobListView.post(self, request)
            return response.status_code, as_json(response.data), response.data.get("id")

        try:
            answer = idempotent(user=request.user, key=key, body=request.data, write=write)
        except IdempotencyConflict as error:
            return Response({"Idempotency-Key": [str(error)]}, status=status.HTTP_409_CONFLICT)
        response = Response(answer.body, status=answer.status_code)
        if answer.replayed:
            response["Idempotent-Replayed"] = "true"
        return response


class JobDetailView(V1, base.JobDetailView):
    @extend_schema(parameters=[JOB_ID], responses={200: s.JobDetailSerializer, **_errors(401, 404)},
                   summary="A job with roles, pods of every attempt and events")
    def get(self, request: Request, pk: int) -> Response:
        return super().get(request, pk)


class JobActionView(V1, base.JobActionView):
    @extend_schema(request=None, parameters=[JOB_ID], responses={200: s.JobDetailSerializer,
                   **_errors(400, 401, 403, 404)}, summary="Stop (SIGTERM, grace) or restart a job")
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


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
            raise base.service_error(error) from None
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


class JobLogView(V1, base.JobLogView):
    @extend_schema(parameters=LOG_PARAMETERS, responses={
        (200, "application/json"): s.LogSerializer,
        (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="With `follow=1`: the log as it grows."),
        **_errors(400, 401, 404),
        503: OpenApiResponse(OpenApiTypes.OBJECT, description="The pod's node did not answer; ask again later."),
    }, summary="A pod's log: tail, what follows an offset, or a stream")
    def get(self, request: Request, pk: int) -> Any:
        if request.query_params.get("follow") not in ("1", "true", "yes"):
            return super().get(request, pk)
        job = job_for_user(user=request.user, job_id=pk)
        if job is None:
            raise Http404
        pods = Pod.objects.filter(job=job).select_related("node")
        pod_id = base._int(request.query_params.get("pod"), "pod")
        pod = pods.filter(pk=pod_id).first() if pod_id is not None else pods.order_by("-attempt", "rank").first()
        if pod_id is not None and pod is None:
            raise ValidationError({"pod": f"Job {job.name} has no pod {pod_id}."})
        offset = base._int(request.query_params.get("offset"), "offset")
        lines = base._int(request.query_params.get("lines"), "lines") or 200
        response = StreamingHttpResponse(follow_log(pod, offset=offset, lines=lines), content_type="text/plain")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


class JobGpuView(V1, APIView):
    @extend_schema(parameters=[JOB_ID], responses={200: s.GpuSampleSerializer(many=True), **_errors(401, 404)},
                   summary="NVML samples of the job's GPUs (empty where the nodes have no NVML)")
    def get(self, request: Request, pk: int) -> Response:
        return Response(s.GpuSampleSerializer(job_gpu_samples(job=visible_job(request, pk)), many=True).data)
