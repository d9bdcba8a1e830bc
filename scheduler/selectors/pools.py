"""The pools and their §2b policies as the console's pool page shows them (staff read them all).

A pool is a resource type with nodes or with a `PoolPolicy` row; one without a row has the
defaults (DESIGN §2b: each policy off). The last change comes from Django's admin log, which both
the console's `pool_policy_set` and the admin's own edits write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, Sum

from scheduler.models import Node, PoolPolicy, ResourceType
from scheduler.validation import DEFAULT_GROW_INTERVAL_S


@dataclass(frozen=True)
class PolicyChange:
    """One recorded change of a pool's policies: who, when, what."""

    username: str
    time: datetime
    text: str


@dataclass(frozen=True)
class PoolPolicyRow:
    pool: str  # the resource type: general, lingjun
    label: str
    nodes: int
    gpus: int
    idle_share: str
    min_runtime_s: int
    starvation_s: int
    starvation_hold: bool  # extends the starvation guard (only with starvation_s above 0)
    starved_min_runtime_s: int  # extends it too: runs begun after starving are not reclaimed before this
    default_time_limit_s: int  # DESIGN §2d: the time limit of jobs that set none (0: none)
    grow_interval_s: int  # DESIGN §2c: an elastic job grows at most this often
    has_row: bool  # False: the pool has no PoolPolicy row and uses the defaults
    last_change: PolicyChange | None

    @property
    def fair(self) -> bool:
        return self.idle_share == PoolPolicy.IdleShare.FAIR

    @property
    def idle_share_text(self) -> str:
        return "fair share" if self.fair else "in pending order"


def _last_changes(policies: list[PoolPolicy]) -> dict[int, PolicyChange]:
    """The newest admin-log entry of each policy row, in one query."""
    if not policies:
        return {}
    content_type = ContentType.objects.get_for_model(PoolPolicy)
    entries = (
        LogEntry.objects.filter(content_type=content_type, object_id__in=[str(p.pk) for p in policies])
        .select_related("user")
        .order_by("-action_time", "-pk")
    )
    latest: dict[int, PolicyChange] = {}
    for entry in entries:
        key = int(entry.object_id)
        if key not in latest:
            latest[key] = PolicyChange(entry.user.get_username(), entry.action_time, entry.get_change_message())
    return latest


def pool_policy_rows() -> list[PoolPolicyRow]:
    """Every pool, in the order of ResourceType, with its nodes, GPUs and current policies."""
    capacity = {
        row["resource_type"]: (row["nodes"], row["gpus"] or 0)
        for row in Node.objects.order_by().values("resource_type").annotate(nodes=Count("pk"), gpus=Sum("gpu_count"))
    }
    policies = {policy.resource_type: policy for policy in PoolPolicy.objects.all()}
    changes = _last_changes(list(policies.values()))
    rows = []
    for pool, label in ResourceType.choices:
        policy = policies.get(pool)
        if policy is None and pool not in capacity:
            continue
        nodes, gpus = capacity.get(pool, (0, 0))
        rows.append(
            PoolPolicyRow(
                pool=pool,
                label=label,
                nodes=nodes,
                gpus=gpus,
                idle_share=policy.idle_share if policy else PoolPolicy.IdleShare.FIFO.value,
                min_runtime_s=policy.min_runtime_s if policy else 0,
                starvation_s=policy.starvation_s if policy else 0,
                starvation_hold=policy.starvation_hold if policy else False,
                starved_min_runtime_s=policy.starved_min_runtime_s if policy else 0,
                default_time_limit_s=policy.default_time_limit_s if policy else 0,
                grow_interval_s=policy.grow_interval_s if policy else DEFAULT_GROW_INTERVAL_S,
                has_row=policy is not None,
                last_change=changes.get(policy.pk) if policy else None,
            )
        )
    return rows
