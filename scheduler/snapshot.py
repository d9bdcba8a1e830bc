"""Build the engine's Snapshot from the database (the live loop and submission checks)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from scheduler.engine import types as engine
from scheduler.models import (
    LIVE_POD_STATUSES,
    Job,
    JobRole,
    JobStatus,
    Node,
    Pod,
    ResourceQuota,
    cpu_to_milli,
    gib_to_mib,
)

IDLE_MODE_TO_ENGINE = {"off": engine.IDLE_OFF, "acceptable": engine.IDLE_ACCEPTABLE, "only": engine.IDLE_ONLY}


def role_pods(roles: Iterable[JobRole]) -> tuple[engine.Pod, ...]:
    """One engine pod per instance, in role order then index: the order pods are ranked in."""
    pods: list[engine.Pod] = []
    for role in roles:
        for _ in range(role.pod_count):
            pods.append(
                engine.Pod(
                    role=role.name,
                    gpus=role.gpus,
                    gpu_type=role.gpu_type or None,
                    cpu_m=cpu_to_milli(role.cpu),
                    memory_mib=gib_to_mib(role.memory_gib),
                )
            )
    return tuple(pods)


def engine_node(node: Node) -> engine.Node:
    return engine.Node(
        name=node.name,
        gpu_type=node.gpu_type,
        gpus=node.gpu_count,
        cpu_m=cpu_to_milli(node.cpu),
        memory_mib=gib_to_mib(node.memory_gib),
        pool=node.resource_type,
        schedulable=node.accepts_pods,
    )


def engine_nodes_of_pool(pool: str) -> tuple[engine.Node, ...]:
    return tuple(engine_node(node) for node in Node.objects.filter(resource_type=pool))


def engine_quota(quota: ResourceQuota, names: dict[int, str]) -> engine.Quota:
    return engine.Quota(
        name=quota.name,
        parent=names.get(quota.parent_id) if quota.parent_id else None,
        min=quota.min_vector(),
        max=quota.max_vector(),
        pool=quota.resource_type,
    )


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


@dataclass
class SnapshotIndex:
    """Maps the snapshot's names back to rows."""

    jobs: dict[str, Job] = field(default_factory=dict)
    live_pods: dict[int, list[Pod]] = field(default_factory=dict)  # job id -> live pods of its attempt
    nodes: dict[str, Node] = field(default_factory=dict)
    pods_of: dict[str, tuple[engine.Pod, ...]] = field(default_factory=dict)


def build_snapshot(jobs: Sequence[Job], now: datetime) -> tuple[engine.Snapshot, SnapshotIndex]:
    """`jobs`: the active jobs (locked by the caller), with roles prefetched."""
    index = SnapshotIndex()
    nodes = list(Node.objects.all())
    index.nodes = {node.name: node for node in nodes}
    node_names = {node.pk: node.name for node in nodes}
    quotas = list(ResourceQuota.objects.all())
    quota_names = {quota.pk: quota.name for quota in quotas}

    live: dict[int, list[Pod]] = {}
    for pod in Pod.objects.filter(job__in=[job.pk for job in jobs], status__in=LIVE_POD_STATUSES).order_by(
        "job_id", "rank"
    ):
        live.setdefault(pod.job_id, []).append(pod)
    index.live_pods = live

    engine_jobs: list[engine.Job] = []
    for job in jobs:
        key = job.engine_key
        index.jobs[key] = job
        pods_spec = role_pods(job.roles.all())
        index.pods_of[key] = pods_spec
        common = dict(
            name=key,
            quota=quota_names[job.quota_id],
            priority=job.priority,
            idle=IDLE_MODE_TO_ENGINE[job.idle_mode],
            submitted_at=_seconds(job.queue_time) or 0.0,
        )
        job_live = live.get(job.pk, [])
        if job_live:
            # Running jobs hold their pods' capacity; any other job with live pods (preempted,
            # stopping, failing) is terminating: its capacity is being released.
            running = job.status in (JobStatus.ENV_PREPARING, JobStatus.RUNNING)
            by_rank = {pod.rank: pod for pod in job_live}
            engine_jobs.append(
                engine.Job(
                    **common,
                    pods=tuple(p for rank, p in enumerate(pods_spec) if rank in by_rank),
                    phase=engine.RUNNING if running else engine.TERMINATING,
                    in_quota=bool(job.in_quota),
                    started_at=_seconds(job.started_at) or 0.0,
                    nodes=tuple(node_names[by_rank[rank].node_id] for rank in sorted(by_rank)),
                )
            )
        elif job.status == JobStatus.QUEUING and (job.restart_after is None or job.restart_after <= now):
            if job.nominated_nodes and all(name in index.nodes for name in job.nominated_nodes) and len(
                job.nominated_nodes
            ) == len(pods_spec):
                engine_jobs.append(
                    engine.Job(**common, pods=pods_spec, phase=engine.NOMINATED, nodes=tuple(job.nominated_nodes))
                )
            else:
                engine_jobs.append(engine.Job(**common, pods=pods_spec, phase=engine.PENDING))
    snapshot = engine.Snapshot(
        nodes=tuple(engine_node(node) for node in nodes),
        quotas=tuple(engine_quota(quota, quota_names) for quota in quotas),
        jobs=tuple(engine_jobs),
    )
    return snapshot, index
