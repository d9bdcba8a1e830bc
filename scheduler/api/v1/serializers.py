"""v1 representations: /api/'s serializers (scheduler.api.serializers) with the shapes their method
fields return declared for the schema, plus what only v1 serves (logs, GPU samples, the caller).
Field descriptions live in scheduler.api.v1.schema (DESCRIPTIONS), kept complete by a test."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduler.api import serializers as base
from scheduler.selectors import NodeGrid, QuotaUsage


class ProgressSerializer(serializers.Serializer):
    step = serializers.IntegerField(required=False, allow_null=True)
    last_checkpoint_step = serializers.IntegerField(required=False, allow_null=True)
    last_checkpoint_at = serializers.FloatField(required=False, allow_null=True)
    resumed_from_step = serializers.IntegerField(required=False, allow_null=True)
    attempt = serializers.IntegerField(required=False, allow_null=True)


class JobSerializer(base.JobSerializer):
    pass


class PodSerializer(base.PodSerializer):
    pass


class EventSerializer(base.EventSerializer):
    pass


class RoleSerializer(base.RoleSerializer):
    pass


class JobDetailSerializer(base.JobDetailSerializer):
    progress = ProgressSerializer()
    roles = RoleSerializer(many=True, source="roles.all")
    pods = PodSerializer(many=True, source="pods.all")
    events = EventSerializer(many=True, source="events.all")


class RoleInputSerializer(base.RoleInputSerializer):
    pass


class JobSubmitSerializer(base.JobSubmitSerializer):
    roles = RoleInputSerializer(many=True)


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)


class QuotaUsageSerializer(serializers.Serializer):
    min_gpus = serializers.IntegerField()
    in_quota_gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    lent_gpus = serializers.IntegerField()
    borrowed_gpus = serializers.IntegerField()
    running_jobs = serializers.IntegerField()
    pending_jobs = serializers.IntegerField()


class QuotaSerializer(base.QuotaSerializer):
    @extend_schema_field(QuotaUsageSerializer)
    def get_usage(self, usage: QuotaUsage) -> dict[str, int]:
        return super().get_usage(usage)


class GpuCellSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    job_id = serializers.IntegerField(allow_null=True)
    job_name = serializers.CharField(allow_null=True)
    used = serializers.BooleanField()
    in_quota = serializers.BooleanField(allow_null=True)


class NodeSerializer(base.NodeSerializer):
    @extend_schema_field(GpuCellSerializer(many=True))
    def get_gpus(self, grid: NodeGrid) -> list[dict[str, Any]]:
        return super().get_gpus(grid)


class WorkspaceSerializer(base.WorkspaceSerializer):
    pass


class LogPodSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    rank = serializers.IntegerField()
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    node = serializers.CharField(allow_null=True)


class LogSerializer(serializers.Serializer):
    pod = LogPodSerializer(allow_null=True)
    text = serializers.CharField(allow_blank=True)
    offset = serializers.IntegerField()
    reset = serializers.BooleanField()


class GpuSampleSerializer(serializers.Serializer):
    time = serializers.DateTimeField()
    pod_id = serializers.IntegerField()
    gpu_index = serializers.IntegerField()
    utilization_percent = serializers.FloatField()
    memory_used_mib = serializers.IntegerField()
    memory_total_mib = serializers.IntegerField()


class PoolSerializer(serializers.Serializer):
    """A pool and its DESIGN §2b policies (scheduler.selectors.pools.PoolPolicyRow); read-only."""

    resource_type = serializers.CharField(source="pool")
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    idle_share = serializers.CharField()
    min_runtime_s = serializers.IntegerField()
    starvation_s = serializers.IntegerField()
    starvation_hold = serializers.BooleanField()
    starved_min_runtime_s = serializers.IntegerField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_staff = serializers.BooleanField()
    workspaces = serializers.ListField(child=serializers.CharField())
    authenticated_by = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
