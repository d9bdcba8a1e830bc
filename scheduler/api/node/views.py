"""/api/node/v1/: everything a node agent may do with its node's key (DESIGN §6), and nothing else.

- `POST register/`: the node's inventory and its log port; takes the node's lease for this agent (one
  live agent per node); answers the key that signs log tickets (node/remote/log_tickets.py).
- `POST heartbeat/`: keeps the node alive and the lease this agent's; carries NVML GPU readings,
  stored against the node's own live pods.
- `POST release/`: gives the lease back as the agent stops (its pods run on, for the next agent).
- `GET pods/`: the pods the database places on the node, each with its run spec (built here: the
  node needs no database) and whether it is still wanted; `?recently_ended=1` adds those that ended
  there in the last day (an agent that starts adopts and stops any still running).
- `POST pods/<id>/report/`: started, exited, never started, progress, image waits (reports.py),
  behind the one authorisation check (selectors/node_pods.node_pod).

Every view takes the node from the key, never from the request: a node can only act as itself.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler.api.node.auth import IsNodeAgent, NodeKeyAuthentication
from scheduler.api.node.reports import PodReportSerializer, pod_report_apply
from scheduler.models import Node, Pod, ResourceType
from scheduler.node.specs import master_address, pod_spec
from scheduler.selectors.node_pods import NotThisNodesPod, attempt_pods, node_pods
from scheduler.services.gpu_samples import gpu_samples_record
from scheduler.services.leases import lease_acquire, lease_release, lease_renew, node_role
from scheduler.services.lifecycle import grace_seconds
from scheduler.services.node_keys import node_key_log_port_set, node_log_ticket_key
from scheduler.services.nodes import node_heartbeat, node_register
from scheduler.states import LIVE_POD_STATUSES, STARTED_JOB_STATUSES, PodOutcome


class NodeView(APIView):
    authentication_classes = [NodeKeyAuthentication]
    permission_classes = [IsNodeAgent]
    schema = None  # not part of /api/v1/'s schema: docs/runtime.md describes it

    def node_name(self, request: Request) -> str:
        return request.user.node_name


class AgentSerializer(serializers.Serializer):
    agent = serializers.CharField(max_length=200, help_text="This agent process (host:pid:start), for the lease.")


class GpuReadingSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0, max_value=1023)
    utilization_percent = serializers.FloatField(min_value=0, max_value=100)
    memory_used_mib = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    memory_total_mib = serializers.IntegerField(min_value=0, max_value=2**31 - 1)


class HeartbeatSerializer(AgentSerializer):
    gpus = GpuReadingSerializer(many=True, required=False, max_length=1024,
                                help_text="NVML readings of the node's GPUs, stored against its own pods only.")


class RegisterSerializer(AgentSerializer):
    gpu_type = serializers.CharField(max_length=32, allow_blank=True, default="")
    gpu_count = serializers.IntegerField(min_value=0, max_value=1024)
    cpu = serializers.DecimalField(max_digits=10, decimal_places=3, min_value=0)
    memory_gib = serializers.DecimalField(max_digits=12, decimal_places=3, min_value=0)
    resource_type = serializers.ChoiceField(choices=ResourceType.values, default=ResourceType.GENERAL)
    address = serializers.CharField(max_length=128, allow_blank=True, default="")
    inventory_source = serializers.ChoiceField(
        choices=[Node.InventorySource.DECLARED, Node.InventorySource.NVML], default=Node.InventorySource.DECLARED)
    gpu_memory_mib = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False, allow_null=True)
    driver_version = serializers.CharField(max_length=64, allow_blank=True, default="")
    pod_runtime = serializers.CharField(max_length=32, allow_blank=True, default="")
    pod_image = serializers.CharField(max_length=255, allow_blank=True, default="")
    pod_subnet = serializers.CharField(max_length=43, allow_blank=True, required=False,
                                       help_text="Its pods' addresses (routed pod network); \"\": none.")
    log_port = serializers.IntegerField(min_value=1, max_value=65535, required=False, allow_null=True,
                                        help_text="Where the agent serves its pods' logs (node address, this port).")


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _lease_taken(node_name: str, lease: Any) -> Response:
    return Response({"detail": f"node {node_name} is run by another live agent ({lease.owner}, lease until "
                               f"{lease.expires_at.isoformat()}): this one waits"}, status=status.HTTP_409_CONFLICT)


class RegisterView(NodeView):
    def post(self, request: Request) -> Response:
        name = self.node_name(request)
        data = _valid(RegisterSerializer, request.data)
        agent = data.pop("agent")
        log_port = data.pop("log_port", None)
        acquired, lease = lease_acquire(role=node_role(name), owner=agent)
        if not acquired:
            return _lease_taken(name, lease)
        try:
            node_register(name=name, heartbeat=True, **data)
        except DjangoValidationError as error:
            lease_release(role=node_role(name), owner=agent)
            raise ValidationError(error.message_dict) from None
        node_key_log_port_set(key=request.auth, log_port=log_port)
        # The log ticket key travels only here, to the agent its node key authenticates (log_tickets.py).
        return Response({"node": name, "heartbeat_s": min(settings.TIDEPOOL_HEARTBEAT_SECONDS,
                                                          settings.TIDEPOOL_LEASE_SECONDS / 3),
                         "reconcile_s": settings.TIDEPOOL_RECONCILE_SECONDS,
                         # The agent stops its pods before this passes without a heartbeat (node/remote/fence.py).
                         "node_timeout_s": settings.TIDEPOOL_NODE_TIMEOUT,
                         "log_ticket_key": node_log_ticket_key(request.auth).hex()})


class HeartbeatView(NodeView):
    def post(self, request: Request) -> Response:
        name = self.node_name(request)
        beat = _valid(HeartbeatSerializer, request.data)
        agent = beat["agent"]
        if not Node.objects.filter(name=name).exists():
            return Response({"detail": f"node {name} is not registered: register first"},
                            status=status.HTTP_409_CONFLICT)
        if not lease_renew(role=node_role(name), owner=agent):
            acquired, lease = lease_acquire(role=node_role(name), owner=agent)
            if not acquired:  # another agent of this node runs it now: this one must stop running pods
                return _lease_taken(name, lease)
        node_heartbeat(name=name)
        if beat.get("gpus"):  # issue 14's GPU chart: the readings go to this node's live pods only
            gpu_samples_record(node_name=name, readings=beat["gpus"])
        return Response({"node": name})


class ReleaseView(NodeView):
    def post(self, request: Request) -> Response:
        name = self.node_name(request)
        lease_release(role=node_role(name), owner=_valid(AgentSerializer, request.data)["agent"])
        return Response({"node": name})


def wanted(pod: Pod) -> bool:
    """The database still wants this pod attempt to run."""
    job = pod.job
    return (pod.status in LIVE_POD_STATUSES and job.attempt == pod.attempt and job.status in STARTED_JOB_STATUSES
            and not pod.terminate_requested)


def desired_pod(pod: Pod, siblings: list[Pod]) -> dict[str, Any]:
    """One pod as its node's agent needs it: identity, state, whether it is wanted, how to stop it,
    and its PodSpec (None with `spec_error` when it cannot be built: the agent reports it never started).
    `siblings`: every pod of its job attempt (selectors.node_pods.attempt_pods)."""
    row: dict[str, Any] = {
        "pod_id": pod.pk, "attempt": pod.attempt, "job_id": pod.job_id, "rank": pod.rank, "status": pod.status,
        "live": pod.status in LIVE_POD_STATUSES, "wanted": wanted(pod),
        "outcome": pod.terminate_requested or PodOutcome.STOPPED, "grace_s": grace_seconds(pod.job),
        "spec": None, "spec_error": "",
    }
    if not row["live"] and pod.master_port is None:
        return row  # ended without ever starting: nothing of it can be running
    try:
        spec = pod_spec(pod, pod.job, world_size=len(siblings), master_addr=master_address(siblings),
                        siblings=siblings)
    except OSError as error:
        row["spec_error"] = str(error)
    else:
        row["spec"] = asdict(spec)
    return row


class PodsView(NodeView):
    def get(self, request: Request) -> Response:
        recently_ended = request.query_params.get("recently_ended", "") in ("1", "true")
        pods = node_pods(node_name=self.node_name(request), recently_ended=recently_ended)
        siblings = attempt_pods(pods)
        return Response({"node": self.node_name(request),
                         "pods": [desired_pod(pod, siblings[(pod.job_id, pod.attempt)]) for pod in pods]})


class PodReportView(NodeView):
    def post(self, request: Request, pod_id: int) -> Response:
        report = _valid(PodReportSerializer, request.data)
        try:
            applied = pod_report_apply(node_name=self.node_name(request), pod_id=pod_id, report=report)
        except NotThisNodesPod as error:
            raise PermissionDenied(str(error)) from None
        return Response({"applied": applied})
