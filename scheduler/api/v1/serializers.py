"""/api/v1/'s representations. Read serializers take objects the selectors returned (with their
prefetches); write serializers only check shapes and types — the services decide what is allowed.
Method fields declare the shapes they return for the schema. Field descriptions live in
scheduler.api.v1.schema (DESCRIPTIONS), kept complete by a test."""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduler import validation as v
from scheduler.api.v1.fields import (
    StrictDecimalField,
    StrictFloatField,
    StrictIntegerField,
    TextChoiceField,
    TextField,
)
from scheduler.models import IdleMode, Job, JobType, Pod
from scheduler.selectors import NodeGrid, QuotaUsage
from scheduler.services.lifecycle import grace_seconds


# Serializer.get_fields deep-copies every declared field for each instance, and a field's deepcopy
# builds it again from its arguments: about a sixth of a submission's CPU (issue 25: the submission
# read, the detail answered and their nested serializers). Here the deep copy is made once per class
# and each instance gets shallow copies of its plain fields: they hold no state between requests
# (bind() sets field_name, parent, label and source on the copy; the rest is read-only once built).
# Fields with a child or fields of their own (ListField, DictField, nested serializers) are
# deep-copied as DRF does, so each child is bound to this instance's field, never shared.
# A comment, not a docstring: the schema would show a docstring as each serializer's description.
class FieldsBuiltOnce:

    def get_fields(self) -> dict[str, serializers.Field]:
        cls = type(self)
        built = cls.__dict__.get("_fields_built_once")  # this class's own: a subclass declares more
        if built is None:
            built = super().get_fields()  # type: ignore[misc]  # DRF's deep copy, kept unbound
            cls._fields_built_once = built  # type: ignore[attr-defined]  # a race builds it twice, equal
        return {name: copy.deepcopy(field) if _has_children(field) else _own_copy(field)
                for name, field in built.items()}


def _has_children(field: serializers.Field) -> bool:
    return isinstance(field, serializers.BaseSerializer) or hasattr(field, "child")


def _own_copy(field: serializers.Field) -> serializers.Field:
    """A shallow copy with its own containers, so a change made to one instance's field (its error
    messages, style or validators) stays with that instance, as after DRF's deep copy."""
    own = copy.copy(field)
    own.error_messages = dict(field.error_messages)
    own.style = dict(field.style)
    if "_validators" in vars(field):
        own._validators = list(field._validators)
    return own


class ProgressSerializer(FieldsBuiltOnce, serializers.Serializer):
    step = serializers.IntegerField(required=False, allow_null=True)
    last_checkpoint_step = serializers.IntegerField(required=False, allow_null=True)
    last_checkpoint_at = serializers.FloatField(required=False, allow_null=True)
    resumed_from_step = serializers.IntegerField(required=False, allow_null=True)
    attempt = serializers.IntegerField(required=False, allow_null=True)


class QuotaUsageSerializer(FieldsBuiltOnce, serializers.Serializer):
    min_gpus = serializers.IntegerField()
    in_quota_gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    lent_gpus = serializers.IntegerField()
    borrowed_gpus = serializers.IntegerField()
    running_jobs = serializers.IntegerField()
    pending_jobs = serializers.IntegerField()


class GpuCellSerializer(FieldsBuiltOnce, serializers.Serializer):
    index = serializers.IntegerField()
    job_id = serializers.IntegerField(allow_null=True)
    job_name = serializers.CharField(allow_null=True)
    used = serializers.BooleanField()
    in_quota = serializers.BooleanField(allow_null=True)


class RoleSerializer(FieldsBuiltOnce, serializers.Serializer):
    name = serializers.CharField()
    pod_count = serializers.IntegerField()
    min_pod_count = serializers.IntegerField(allow_null=True)
    gpu_type = serializers.CharField(allow_blank=True)
    gpus = serializers.IntegerField()
    cpu = serializers.DecimalField(max_digits=10, decimal_places=3, coerce_to_string=False)
    memory_gib = serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False)
    shared_memory_gib = serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False)
    cpu_only = serializers.BooleanField()


class JobSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A job as the list shows it."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField()
    in_quota = serializers.SerializerMethodField()
    workspace = serializers.CharField(source="workspace.name")
    quota = serializers.CharField(source="quota.name")
    resource_type = serializers.CharField(source="quota.resource_type")
    owner = serializers.SerializerMethodField()
    job_type = serializers.CharField()
    priority = serializers.IntegerField()
    idle_mode = serializers.CharField()
    gpus = serializers.IntegerField(source="total_gpus")
    gpu_type = serializers.CharField()
    nodes = serializers.SerializerMethodField()
    fault_tolerance = serializers.BooleanField()
    restart_count = serializers.IntegerField()
    max_restarts = serializers.IntegerField()
    preemption_count = serializers.IntegerField()
    shrink_count = serializers.IntegerField()
    grow_count = serializers.IntegerField()
    resized_at = serializers.DateTimeField(allow_null=True)
    resumes_automatically = serializers.BooleanField()
    grace_seconds = serializers.SerializerMethodField()
    run_seconds = serializers.SerializerMethodField()
    gpu_hours = serializers.SerializerMethodField()
    queue_position = serializers.IntegerField(allow_null=True)
    estimated_start_at = serializers.SerializerMethodField()
    start_estimate = serializers.CharField()
    time_limit_note = serializers.CharField()
    waiting_reason = serializers.CharField(source="shown_reason")
    waiting_reason_code = serializers.CharField()
    created_at = serializers.DateTimeField()
    queue_time = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_owner(self, job: Job) -> str | None:
        return job.owner.username if job.owner else None

    def get_grace_seconds(self, job: Job) -> float:
        """The grace period its pods get (the job's own, else the cluster default)."""
        return grace_seconds(job)

    def get_run_seconds(self, job: Job) -> float:
        """Run time of all attempts together."""
        return round(job.total_run_seconds(), 1)

    def get_gpu_hours(self, job: Job) -> float:
        return round(job.total_gpu_seconds() / 3600, 3)

    def get_estimated_start_at(self, job: Job) -> str | None:
        """§2d: the start estimate while it waits in the queue (null: none, or not waiting)."""
        if not job.start_estimate or job.estimated_start_at is None:
            return None
        return serializers.DateTimeField().to_representation(job.estimated_start_at)

    def get_in_quota(self, job: Job) -> bool | None:
        """How the current attempt was admitted; null while waiting or once finished."""
        return job.in_quota if job.attempt_open else None

    def get_nodes(self, job: Job) -> list[str]:
        if job.is_waiting:  # the pods of the previous attempt are history
            return []
        pods = getattr(job, "current_pods", None)
        if pods is None:  # detail: every attempt is prefetched; the latest one is the job's attempt
            pods = [pod for pod in job.pods.all() if pod.attempt == job.attempt]
        return sorted({pod.node.name for pod in pods if pod.node is not None})


class PodSerializer(FieldsBuiltOnce, serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.CharField()
    index = serializers.IntegerField()
    rank = serializers.IntegerField()
    attempt = serializers.IntegerField()
    node = serializers.SerializerMethodField()
    gpu_indices = serializers.ListField(child=serializers.IntegerField())
    status = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_node(self, pod: Pod) -> str | None:
        return pod.node.name if pod.node else None


class EventSerializer(FieldsBuiltOnce, serializers.Serializer):
    time = serializers.DateTimeField()
    kind = serializers.CharField()
    reason = serializers.CharField(source="shown_reason")
    code = serializers.CharField()


class PreemptionSerializer(FieldsBuiltOnce, serializers.Serializer):
    """One preemption and the work it cost (steps and GPU time since the attempt's last checkpoint)."""

    time = serializers.DateTimeField()
    attempt = serializers.IntegerField()
    kind = serializers.CharField()
    reason = serializers.CharField(source="shown_reason")
    gpus = serializers.IntegerField()
    ran_gpu_seconds = serializers.FloatField()
    lost_steps = serializers.IntegerField(allow_null=True)
    lost_gpu_seconds = serializers.FloatField(allow_null=True)
    step = serializers.IntegerField(allow_null=True)
    checkpoint_step = serializers.IntegerField(allow_null=True)
    settled = serializers.SerializerMethodField()

    def get_settled(self, preemption: Any) -> bool:
        """False while the pods are still exiting (the losses are measured once they have)."""
        return preemption.settled_at is not None


class JobDetailSerializer(JobSerializer):
    image = serializers.CharField()
    command = serializers.CharField()
    environment = serializers.DictField(child=serializers.CharField())
    data_mount = serializers.CharField()
    code_mount = serializers.CharField()
    max_running_minutes = serializers.IntegerField(allow_null=True)
    checkpoint_dir = serializers.CharField()
    progress = ProgressSerializer()
    attempt = serializers.IntegerField()
    roles = RoleSerializer(many=True, source="roles.all")
    pods = PodSerializer(many=True, source="pods.all")
    events = EventSerializer(many=True, source="events.all")
    preemptions = PreemptionSerializer(many=True, source="preemptions.all")


def _name_validator(kind: str):
    def check(value: str) -> None:
        problem = v.name_problem(value, kind)
        if problem:
            raise serializers.ValidationError(problem)

    return check


class RoleInputSerializer(FieldsBuiltOnce, serializers.Serializer):
    name = TextField(max_length=v.NAME_LENGTHS["role"], default="worker", validators=[_name_validator("role")])
    pod_count = StrictIntegerField(default=1, min_value=1, max_value=v.MAX_PODS_PER_JOB)
    min_pod_count = StrictIntegerField(allow_null=True, default=None, min_value=1, max_value=v.MAX_PODS_PER_JOB)
    gpu_type = TextField(max_length=v.MAX_GPU_MODEL_CHARS, allow_blank=True, default="")
    # None: 1, or 0 for a CPU-only role
    gpus = StrictIntegerField(allow_null=True, default=None, min_value=0, max_value=v.MAX_GPUS_PER_POD)
    cpu_only = serializers.BooleanField(default=False)
    cpu = StrictDecimalField(max_digits=10, decimal_places=3, default=0, min_value=0, max_value=v.MAX_CPU_PER_POD)
    memory_gib = StrictDecimalField(max_digits=12, decimal_places=3, default=0, min_value=0,
                                    max_value=v.MAX_MEMORY_GIB_PER_POD)
    shared_memory_gib = StrictDecimalField(max_digits=12, decimal_places=3, default=0, min_value=0,
                                           max_value=v.MAX_MEMORY_GIB_PER_POD)


class JobSubmitSerializer(FieldsBuiltOnce, serializers.Serializer):
    """POST /api/v1/jobs/. `workspace` and `quota` are names (or ids). Bounds: scheduler.validation."""

    name = TextField(max_length=v.NAME_LENGTHS["job"], validators=[_name_validator("job")])
    workspace = TextField(max_length=v.NAME_LENGTHS["workspace"])
    quota = TextField(max_length=v.NAME_LENGTHS["quota"])
    command = TextField(max_length=v.MAX_COMMAND_CHARS)
    roles = RoleInputSerializer(many=True, max_length=v.MAX_ROLES)
    job_type = TextChoiceField(choices=JobType.choices, default=JobType.PYTORCH)
    image = TextField(max_length=v.MAX_PATH_CHARS, allow_blank=True, default="")
    environment = serializers.DictField(
        child=TextField(allow_blank=True, max_length=v.MAX_ENV_VALUE_CHARS), default=dict
    )
    data_mount = TextField(max_length=v.MAX_PATH_CHARS, allow_blank=True, default="")
    code_mount = TextField(max_length=v.MAX_PATH_CHARS, allow_blank=True, default="")
    priority = StrictIntegerField(default=1, min_value=v.MIN_PRIORITY, max_value=v.MAX_PRIORITY)
    idle_mode = TextChoiceField(choices=IdleMode.choices, default=IdleMode.OFF)
    max_running_minutes = StrictIntegerField(allow_null=True, default=None, min_value=1,
                                             max_value=v.MAX_RUNNING_MINUTES)
    fault_tolerance = serializers.BooleanField(default=False)
    max_restarts = StrictIntegerField(default=3, min_value=0, max_value=v.MAX_RESTARTS)
    checkpoint_dir = TextField(max_length=v.MAX_PATH_CHARS, allow_blank=True, default="")
    # None: the cluster default. Bounds: the service's (validation.grace_seconds_value), one message.
    grace_seconds = StrictFloatField(allow_null=True, default=None)
    resource_type = TextField(allow_blank=True, allow_null=True, default=None, max_length=16)

    def validate_environment(self, value: dict[str, str]) -> dict[str, str]:
        try:
            return v.check_environment(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict["environment"]) from None


class QuotaSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A quota of the tree with its subtree's GPU use (see scheduler.selectors.QuotaUsage)."""

    id = serializers.IntegerField(source="quota.pk")
    name = serializers.CharField(source="quota.name")
    description = serializers.CharField(source="quota.description")
    resource_type = serializers.CharField(source="quota.resource_type")
    parent = serializers.SerializerMethodField()
    depth = serializers.IntegerField()
    min_gpus = serializers.DictField(source="quota.min_gpus", child=serializers.IntegerField())
    min_cpu = serializers.DecimalField(source="quota.min_cpu", max_digits=10, decimal_places=3, coerce_to_string=False)
    min_memory_gib = serializers.DecimalField(
        source="quota.min_memory_gib", max_digits=12, decimal_places=3, coerce_to_string=False
    )
    max_gpus = serializers.DictField(source="quota.max_gpus", child=serializers.IntegerField(), allow_null=True)
    max_cpu = serializers.DecimalField(
        source="quota.max_cpu", max_digits=10, decimal_places=3, coerce_to_string=False, allow_null=True
    )
    max_memory_gib = serializers.DecimalField(
        source="quota.max_memory_gib", max_digits=12, decimal_places=3, coerce_to_string=False, allow_null=True
    )
    preempt_within = serializers.BooleanField(source="quota.preempt_within")
    workspaces = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()

    def get_parent(self, usage: QuotaUsage) -> str | None:
        parent = usage.quota.parent_id
        names = self.context.get("names", {})
        return names.get(parent) if parent else None

    def get_workspaces(self, usage: QuotaUsage) -> list[str]:
        return [w.name for w in usage.quota.workspaces.all()]

    @extend_schema_field(QuotaUsageSerializer)
    def get_usage(self, usage: QuotaUsage) -> dict[str, int]:
        return {
            "min_gpus": usage.min_gpus,
            "in_quota_gpus": usage.in_quota,
            "free_gpus": usage.free,
            "lent_gpus": usage.lent,
            "borrowed_gpus": usage.borrowed,
            "running_jobs": usage.running_jobs,
            "pending_jobs": usage.pending_jobs,
        }


class NodeSerializer(FieldsBuiltOnce, serializers.Serializer):
    id = serializers.IntegerField(source="node.pk")
    name = serializers.CharField(source="node.name")
    resource_type = serializers.CharField(source="node.resource_type")
    gpu_type = serializers.CharField(source="node.gpu_type")
    gpu_count = serializers.IntegerField(source="node.gpu_count")
    cpu = serializers.DecimalField(source="node.cpu", max_digits=10, decimal_places=3, coerce_to_string=False)
    memory_gib = serializers.DecimalField(
        source="node.memory_gib", max_digits=12, decimal_places=3, coerce_to_string=False
    )
    schedulable = serializers.BooleanField(source="node.schedulable")
    draining = serializers.BooleanField(source="node.draining")
    lost = serializers.BooleanField(source="node.lost")
    last_heartbeat = serializers.DateTimeField(source="node.last_heartbeat", allow_null=True)
    gpus_used = serializers.IntegerField(source="used")
    gpus = serializers.SerializerMethodField()

    @extend_schema_field(GpuCellSerializer(many=True))
    def get_gpus(self, grid: NodeGrid) -> list[dict[str, Any]]:
        """Per GPU: the job on it; a job of a workspace the caller cannot see has no id or name."""
        return [
            {
                "index": cell.index,
                "job_id": cell.job_id if cell.job_id and cell.job_id > 0 else None,
                "job_name": cell.job_name,
                "used": cell.used,
                "in_quota": cell.in_quota if cell.used else None,
            }
            for cell in grid.gpus
        ]


class WorkspaceSerializer(FieldsBuiltOnce, serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    quotas = serializers.SerializerMethodField()

    def get_quotas(self, workspace: Any) -> list[str]:
        return [quota.name for quota in workspace.quotas.all()]


class CloneSerializer(FieldsBuiltOnce, serializers.Serializer):
    # absent: `<name>-clone`; given, the job name rule (an empty name is refused, not defaulted)
    name = TextField(max_length=v.NAME_LENGTHS["job"], required=False, validators=[_name_validator("job")])


class LogPodSerializer(FieldsBuiltOnce, serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    rank = serializers.IntegerField()
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    node = serializers.CharField(allow_null=True)


class LogSerializer(FieldsBuiltOnce, serializers.Serializer):
    pod = LogPodSerializer(allow_null=True)
    text = serializers.CharField(allow_blank=True)
    offset = serializers.IntegerField()
    reset = serializers.BooleanField()


class GpuSampleSerializer(FieldsBuiltOnce, serializers.Serializer):
    time = serializers.DateTimeField()
    pod_id = serializers.IntegerField()
    gpu_index = serializers.IntegerField()
    utilization_percent = serializers.FloatField()
    memory_used_mib = serializers.IntegerField()
    memory_total_mib = serializers.IntegerField()


class PoolSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A pool and its DESIGN §2b policies (scheduler.selectors.pools.PoolPolicyRow); read-only."""

    resource_type = serializers.CharField(source="pool")
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    idle_share = serializers.CharField()
    min_runtime_s = serializers.IntegerField()
    starvation_s = serializers.IntegerField()
    starvation_hold = serializers.BooleanField()
    starved_min_runtime_s = serializers.IntegerField()
    default_time_limit_s = serializers.IntegerField()
    grow_interval_s = serializers.IntegerField()


class MeSerializer(FieldsBuiltOnce, serializers.Serializer):
    username = serializers.CharField()
    is_staff = serializers.BooleanField()
    workspaces = serializers.ListField(child=serializers.CharField())
    authenticated_by = serializers.CharField()


class ErrorSerializer(FieldsBuiltOnce, serializers.Serializer):
    detail = serializers.CharField()
