"""Tidepool's domain model: workspaces, quotas, nodes, jobs, pods, events (`core`), and the API's
clients' rows (`api`), leases and chart samples (`records`). Everything is importable from `scheduler.models`.

Models hold data and the invariants that need no other row; rules that span rows (children's min
within the parent's, a pod that must fit some node) live in the services, which validate before
they write.
"""

from scheduler.models.api import ApiToken, GpuSample, IdempotencyKey
from scheduler.models.core import (
    GRACE_SECONDS_MAX,
    REQUEUED_PREEMPTED,
    IdleMode,
    Job,
    JobEvent,
    JobPreemption,
    JobRole,
    JobType,
    Node,
    Pod,
    PoolPolicy,
    ResourceQuota,
    ResourceType,
    Workspace,
    cpu_to_milli,
    gib_to_mib,
)
from scheduler.models.elastic import JobResize
from scheduler.models.node_keys import NodeKey
from scheduler.models.records import AllocationSample, InstanceLease

__all__ = [
    "AllocationSample",
    "ApiToken",
    "GRACE_SECONDS_MAX",
    "GpuSample",
    "IdempotencyKey",
    "IdleMode",
    "InstanceLease",
    "Job",
    "JobEvent",
    "JobPreemption",
    "JobResize",
    "JobRole",
    "JobType",
    "Node",
    "NodeKey",
    "Pod",
    "PoolPolicy",
    "REQUEUED_PREEMPTED",
    "ResourceQuota",
    "ResourceType",
    "Workspace",
    "cpu_to_milli",
    "gib_to_mib",
]
