"""Cluster reads: quotas and their use, nodes and their GPUs, allocation history, dashboard figures."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, QuerySet, Sum

from scheduler.models import (
    REQUEUED_PREEMPTED,
    AllocationSample,
    Job,
    JobEvent,
    JobPreemption,
    Node,
    Pod,
    ResourceQuota,
    Workspace,
)
from scheduler.selectors.access import user_quotas, user_workspaces, visible_jobs
from scheduler.selectors.quota_room import InQuotaRoom, in_quota_rooms
from scheduler.states import (
    LIVE_POD_STATUSES,
    PENDING_JOB_STATUSES,
    STARTED_JOB_STATUSES,
    EventKind,
    JobStatus,
)


def requeued_preempted() -> QuerySet[Job]:
    """Preempted jobs queued again to resume automatically: pending, though they show Preempted."""
    return Job.objects.filter(REQUEUED_PREEMPTED)


@dataclass(frozen=True)
class AllocationRow:
    """GPU allocation of one quota (its own jobs), or of a whole pool (quota None), at one moment."""

    resource_type: str
    quota: ResourceQuota | None
    in_quota_gpus: int
    not_in_quota_gpus: int
    total_gpus: int

    @property
    def quota_id(self) -> int | None:
        return self.quota.pk if self.quota is not None else None


def allocation_by_quota() -> list[AllocationRow]:
    """GPU allocation now: one row per quota (its own jobs) and one per pool (quota None)."""
    in_quota: dict[int, int] = defaultdict(int)
    not_in_quota: dict[int, int] = defaultdict(int)
    pool_in: dict[str, int] = defaultdict(int)
    pool_out: dict[str, int] = defaultdict(int)
    rows = Pod.objects.filter(status__in=LIVE_POD_STATUSES).values_list(
        "job__quota_id", "job__quota__resource_type", "job__in_quota", "gpu_indices"
    )
    for quota_id, pool, job_in_quota, indices in rows:
        gpus = len(indices or [])
        if job_in_quota:
            in_quota[quota_id] += gpus
            pool_in[pool] += gpus
        else:
            not_in_quota[quota_id] += gpus
            pool_out[pool] += gpus
    totals: dict[str, int] = defaultdict(int)
    for pool, count in Node.objects.filter(lost=False).values_list("resource_type", "gpu_count"):
        totals[pool] += count
    samples = [
        AllocationRow(
            resource_type=quota.resource_type,
            quota=quota,
            in_quota_gpus=in_quota[quota.pk],
            not_in_quota_gpus=not_in_quota[quota.pk],
            total_gpus=quota.min_gpu_total,
        )
        for quota in ResourceQuota.objects.all()
    ]
    samples += [
        AllocationRow(
            resource_type=pool, quota=None,
            in_quota_gpus=pool_in[pool], not_in_quota_gpus=pool_out[pool], total_gpus=total,
        )
        for pool, total in totals.items()
    ]
    return samples



def gpu_models_by_pool() -> dict[str, list[str]]:
    """GPU models of the registered nodes, per resource type."""
    models: dict[str, set[str]] = {}
    for pool, model in Node.objects.exclude(gpu_type="").values_list("resource_type", "gpu_type").distinct():
        models.setdefault(pool, set()).add(model)
    return {pool: sorted(names) for pool, names in models.items()}


@dataclass
class QuotaUsage:
    """One quota of the tree with its GPU use. All counts cover the quota's whole subtree.

    - in_quota: GPUs of running In Quota jobs.
    - borrowed: GPUs of the subtree's own Not in Quota jobs (running on idle resources).
    - lent: an estimate of others' Not in Quota GPUs running on this quota's unused guarantee.
      Idle capacity is not tied to a quota, so the pool's Not in Quota GPUs (less the subtree's
      own) are attributed in proportion to each quota's unused guarantee, capped by it.
    """
    quota: ResourceQuota
    depth: int
    min_gpus: int
    max_gpus: int | None
    in_quota: int = 0
    borrowed: int = 0
    lent: int = 0
    pending_jobs: int = 0
    running_jobs: int = 0
    children: list[QuotaUsage] = field(default_factory=list)
    room: InQuotaRoom | None = None  # what one job submitted to exactly this quota can get In Quota

    @property
    def free(self) -> int:
        """Guaranteed GPUs not used In Quota right now."""
        return max(0, self.min_gpus - self.in_quota)

    @property
    def in_quota_percent(self) -> float:
        return 100.0 * min(self.in_quota, self.min_gpus) / self.min_gpus if self.min_gpus else 0.0

    @property
    def lent_percent(self) -> float:
        return 100.0 * min(self.lent, self.free) / self.min_gpus if self.min_gpus else 0.0


def quota_tree() -> list[QuotaUsage]:
    """Every quota, depth first (pools in order, children by name), with its subtree's GPU use.

    A fixed number of queries: quotas, live pods, job counts, nodes. `room`: see selectors.quota_room.
    """
    quotas = list(ResourceQuota.objects.prefetch_related("workspaces").order_by("resource_type", "name"))
    own_in: dict[int, int] = defaultdict(int)
    own_out: dict[int, int] = defaultdict(int)
    pool_in: dict[str, int] = defaultdict(int)
    pool_out: dict[str, int] = defaultdict(int)
    own_in_by_model: dict[int, dict[str, int]] = defaultdict(dict)
    for quota_id, pool, in_quota, indices, model in Pod.objects.filter(status__in=LIVE_POD_STATUSES).values_list(
        "job__quota_id", "job__quota__resource_type", "job__in_quota", "gpu_indices", "node__gpu_type"
    ):
        gpus = len(indices or [])
        if in_quota:
            own_in[quota_id] += gpus
            if gpus:
                own_in_by_model[quota_id][model] = own_in_by_model[quota_id].get(model, 0) + gpus
            pool_in[pool] += gpus
        else:
            own_out[quota_id] += gpus
            pool_out[pool] += gpus
    own_pending: dict[int, int] = defaultdict(int)
    own_running: dict[int, int] = defaultdict(int)
    for quota_id, status, count in (
        Job.objects.filter(status__in=(*PENDING_JOB_STATUSES, *STARTED_JOB_STATUSES))
        .values_list("quota_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        if status in PENDING_JOB_STATUSES:
            own_pending[quota_id] += count
        else:
            own_running[quota_id] += count
    for quota_id, count in requeued_preempted().values_list("quota_id").annotate(n=Count("id")).order_by():
        own_pending[quota_id] += count  # Preempted, queued again to resume (DESIGN §3)
    capacity: dict[str, int] = defaultdict(int)
    nodes = list(Node.objects.all())
    for node in nodes:
        if not node.lost:
            capacity[node.resource_type] += node.gpu_count
    rooms = in_quota_rooms(quotas, nodes, own_in_by_model)

    by_parent: dict[int | None, list[ResourceQuota]] = defaultdict(list)
    for quota in quotas:
        by_parent[quota.parent_id].append(quota)
    ordered: list[QuotaUsage] = []

    def visit(quota: ResourceQuota, depth: int) -> QuotaUsage:
        max_gpus = sum(int(v) for v in quota.max_gpus.values()) if quota.max_gpus else None
        usage = QuotaUsage(quota=quota, depth=depth, min_gpus=quota.min_gpu_total, max_gpus=max_gpus,
                           room=rooms[quota.pk])
        usage.in_quota = own_in[quota.pk]
        usage.borrowed = own_out[quota.pk]
        usage.pending_jobs = own_pending[quota.pk]
        usage.running_jobs = own_running[quota.pk]
        ordered.append(usage)
        for child in sorted(by_parent.get(quota.pk, []), key=lambda q: q.name):
            child_usage = visit(child, depth + 1)
            usage.children.append(child_usage)
            usage.in_quota += child_usage.in_quota
            usage.borrowed += child_usage.borrowed
            usage.pending_jobs += child_usage.pending_jobs
            usage.running_jobs += child_usage.running_jobs
        return usage

    known = {quota.pk for quota in quotas}
    roots = [q for q in quotas if q.parent_id is None or q.parent_id not in known]
    for root in sorted(roots, key=lambda q: (q.resource_type, q.name)):
        visit(root, 0)
    for usage in ordered:
        pool = usage.quota.resource_type
        unused_in_pool = capacity[pool] - pool_in[pool]
        borrowed_by_others = pool_out[pool] - usage.borrowed
        if unused_in_pool > 0 and borrowed_by_others > 0:
            share = borrowed_by_others * usage.free / unused_in_pool
            usage.lent = min(usage.free, round(share))
    return ordered


@dataclass(frozen=True)
class QuotaChoice:
    """A quota as the submission form offers it. `free_gpus` / `total_gpus`: the GPUs (of one model) a
    job can get In Quota there now / at most (`room`: per model, and whether it keeps nothing)."""
    quota: ResourceQuota
    workspace_ids: tuple[int, ...]
    free_gpus: int
    total_gpus: int
    gpu_models: tuple[str, ...]
    room: InQuotaRoom | None = None


def quota_choices(*, user: AbstractBaseUser) -> list[QuotaChoice]:
    """The quotas the user can submit to, with the workspaces they serve and free / total GPUs."""
    usage = {u.quota.pk: u for u in quota_tree()}
    allowed = set(user_workspaces(user=user).values_list("pk", flat=True))
    models = gpu_models_by_pool()
    choices = []
    for quota in user_quotas(user=user).prefetch_related("workspaces"):
        spaces = tuple(sorted(w.pk for w in quota.workspaces.all() if w.pk in allowed))
        if not spaces:
            continue
        u = usage.get(quota.pk)
        choices.append(
            QuotaChoice(
                quota=quota,
                workspace_ids=spaces,
                free_gpus=u.room.now_gpus if u and u.room else 0,
                total_gpus=u.room.most_gpus if u and u.room else 0,
                gpu_models=tuple(models.get(quota.resource_type, ())),
                room=u.room if u else None,
            )
        )
    return choices


@dataclass(frozen=True)
class GpuCell:
    """One GPU of a node. `job_name` is None when the job belongs to a workspace the user cannot see."""
    index: int
    job_id: int | None = None
    job_name: str | None = None
    in_quota: bool | None = None
    pod_status: str = ""
    terminating: bool = False

    @property
    def used(self) -> bool:
        return self.job_id is not None


@dataclass
class NodeGrid:
    node: Node
    gpus: list[GpuCell]

    @property
    def used(self) -> int:
        return sum(1 for cell in self.gpus if cell.used)


def node_grid(*, user: AbstractBaseUser) -> list[NodeGrid]:
    """Every node with its GPUs and the job on each; names only of the jobs the user may see."""
    nodes = list(Node.objects.order_by("resource_type", "name"))
    pods = list(
        Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__isnull=False).values_list(
            "node_id", "gpu_indices", "status", "terminate_requested", "job_id", "job__name", "job__in_quota"
        )
    )
    job_ids = {row[4] for row in pods}
    visible = set(visible_jobs(user=user).filter(pk__in=job_ids).values_list("pk", flat=True)) if job_ids else set()
    cells: dict[tuple[int, int], GpuCell] = {}
    for node_id, indices, status, terminating, job_id, job_name, in_quota in pods:
        for index in indices or []:
            cells[(node_id, index)] = GpuCell(
                index=index,
                job_id=job_id if job_id in visible else -1,
                job_name=job_name if job_id in visible else None,
                in_quota=in_quota,
                pod_status=status,
                terminating=bool(terminating),
            )
    return [
        NodeGrid(node=node, gpus=[cells.get((node.pk, i), GpuCell(index=i)) for i in range(node.gpu_count)])
        for node in nodes
    ]


def pool_allocation_series(*, since: datetime) -> dict[str, list[tuple[datetime, int, int, int]]]:
    """Per resource type: (time, In Quota GPUs, Not in Quota GPUs, total GPUs) samples since `since`."""
    series: dict[str, list[tuple[datetime, int, int, int]]] = {}
    rows = AllocationSample.objects.filter(quota__isnull=True, time__gte=since).order_by("time")
    for time, pool, used_in, used_out, total in rows.values_list(
        "time", "resource_type", "in_quota_gpus", "not_in_quota_gpus", "total_gpus"
    ):
        series.setdefault(pool, []).append((time, used_in, used_out, total))
    return series


def quota_allocation_series(*, since: datetime) -> dict[int, list[tuple[datetime, int, int]]]:
    """Per quota (its own jobs only): (time, In Quota GPUs, Not in Quota GPUs) samples since `since`."""
    series: dict[int, list[tuple[datetime, int, int]]] = {}
    rows = AllocationSample.objects.filter(quota__isnull=False, time__gte=since).order_by("time")
    for time, quota_id, used_in, used_out in rows.values_list(
        "time", "quota_id", "in_quota_gpus", "not_in_quota_gpus"
    ):
        series.setdefault(quota_id, []).append((time, used_in, used_out))
    return series


def preemption_times(*, since: datetime) -> list[datetime]:
    """When jobs were preempted (reclaims and drains), cluster-wide: an aggregate, no job is named."""
    return list(
        JobEvent.objects.filter(kind=EventKind.PREEMPTED, time__gte=since).order_by("time").values_list("time", flat=True)
    )


@dataclass(frozen=True)
class PreemptionCosts:
    """Preemptions since a moment, cluster-wide (an aggregate: no job is named).

    reclaimed: GPU-hours the preempted attempts had run before they were preempted (capacity
    taken back); lost: the part of it since their last checkpoint (work to do again)."""

    count: int
    reclaimed_gpu_seconds: float
    lost_gpu_seconds: float
    lost_steps: int


def preemption_costs(*, since: datetime) -> PreemptionCosts:
    totals = JobPreemption.objects.filter(time__gte=since).aggregate(
        n=Count("id"), ran=Sum("ran_gpu_seconds"), lost=Sum("lost_gpu_seconds"), steps=Sum("lost_steps")
    )
    return PreemptionCosts(
        count=totals["n"] or 0,
        reclaimed_gpu_seconds=totals["ran"] or 0.0,
        lost_gpu_seconds=totals["lost"] or 0.0,
        lost_steps=totals["steps"] or 0,
    )


def queue_waits(*, since: datetime) -> list[tuple[datetime, float]]:
    """(admission time, seconds waited) for each admission since `since`, from the job timelines.

    The wait of an admission runs from the job's latest "queued" event before it, so a restart
    after preemption counts its own wait, not the job's first submission.
    """
    events = (
        JobEvent.objects.filter(kind__in=("queued", "admitted"), time__gte=since - timedelta(days=1))
        .order_by("job_id", "time", "id")
        .values_list("job_id", "kind", "time")
    )
    waits: list[tuple[datetime, float]] = []
    queued_at: dict[int, datetime] = {}
    for job_id, kind, time in events:
        if kind == EventKind.QUEUED:
            queued_at[job_id] = time
        elif job_id in queued_at:
            start = queued_at.pop(job_id)
            if time >= since:
                waits.append((time, (time - start).total_seconds()))
    waits.sort()
    return waits


def job_status_counts() -> dict[str, int]:
    """Jobs per status, cluster-wide (an aggregate shown on the dashboard)."""
    return dict(Job.objects.values_list("status").annotate(n=Count("id")).order_by())


@dataclass(frozen=True)
class DashboardSummary:
    running: int  # EnvPreparing or Running
    pending: int  # Creating, Queuing or Restarting, and Preempted jobs queued again
    preempted_now: int
    capacity: int  # GPUs of nodes not lost
    used_in: int  # GPUs held In Quota
    used_out: int  # GPUs held Not in Quota
    free: int


def dashboard_summary(*, user: AbstractBaseUser) -> DashboardSummary:
    """The dashboard's headline figures: jobs by state group and GPUs by use."""
    counts = job_status_counts()
    requeued = requeued_preempted().count()
    nodes = node_grid(user=user)
    capacity = sum(grid.node.gpu_count for grid in nodes if not grid.node.lost)
    used_in = sum(1 for grid in nodes for cell in grid.gpus if cell.used and cell.in_quota)
    used_out = sum(1 for grid in nodes for cell in grid.gpus if cell.used and not cell.in_quota)
    return DashboardSummary(
        running=sum(counts.get(status, 0) for status in STARTED_JOB_STATUSES),
        pending=sum(counts.get(status, 0) for status in PENDING_JOB_STATUSES) + requeued,
        preempted_now=counts.get(JobStatus.PREEMPTED, 0),
        capacity=capacity,
        used_in=used_in,
        used_out=used_out,
        free=max(0, capacity - used_in - used_out),
    )


def workspaces_overview() -> QuerySet[Workspace]:
    """Every workspace with members and quotas (staff pages)."""
    return Workspace.objects.prefetch_related("members", "quotas").order_by("name")


def cluster_fingerprint() -> int:
    """A hash of what the nodes, quotas and dashboard pages show from the jobs' side: live pods and
    where they are, and how many jobs are in each status. Equal hashes: those pages need no refresh
    (e.g. a notice that only a job's training progress moved)."""
    pods = tuple(
        Pod.objects.filter(status__in=LIVE_POD_STATUSES)
        .order_by("pk")
        .values_list("pk", "status", "terminate_requested", "job__in_quota")
    )
    statuses = tuple(sorted(job_status_counts().items()))
    nodes = tuple(Node.objects.order_by("pk").values_list("pk", "schedulable", "draining", "lost"))
    return hash((pods, statuses, nodes))
