"""Database rows as the engine's values, and the index back from engine names to rows.

Used by the loop's snapshot, by submission checks (can this job ever fit its pool?) and by the
service that applies a cycle's decisions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.engine import types as engine
from scheduler.models import Job, JobRole, Node, Pod, ResourceQuota, cpu_to_milli, gib_to_mib

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


# (role name, pod count, GPU model or "", GPUs, CPU cores, memory GiB): a role as the snapshot reads it
RoleRow = tuple[str, int, str, int, object, object]


def roles_by_job(jobs: Iterable[Job]) -> dict[int, tuple[engine.Pod, ...]]:
    """The engine pods of many jobs from one query (what `role_pods` gives for each job's roles); jobs
    with identical roles share one tuple, so a long queue of look-alike jobs costs one conversion. The
    query reads the roles of jobs in the same statuses (no list of ids) and keeps those asked for."""
    jobs = list(jobs)
    wanted = {job.pk for job in jobs}
    rows: dict[int, list[RoleRow]] = {}
    query = JobRole.objects.filter(job__status__in={job.status for job in jobs}).order_by("job_id", "order", "id")
    for job_id, *role in query.values_list(
        "job_id", "name", "pod_count", "gpu_type", "gpus", "cpu", "memory_gib"
    ):
        if job_id in wanted:
            rows.setdefault(job_id, []).append(tuple(role))  # type: ignore[arg-type]
    converted: dict[tuple[RoleRow, ...], tuple[engine.Pod, ...]] = {}
    out: dict[int, tuple[engine.Pod, ...]] = {}
    for job_id, roles in rows.items():
        key = tuple(roles)
        pods = converted.get(key)
        if pods is None:
            pods = converted[key] = tuple(
                engine.Pod(role=name, gpus=gpus, gpu_type=gpu_type or None, cpu_m=cpu_to_milli(cpu),
                           memory_mib=gib_to_mib(memory))
                for name, count, gpu_type, gpus, cpu, memory in roles
                for _ in range(count)
            )
        out[job_id] = pods
    return out


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


def engine_quotas_of_pool(pool: str) -> tuple[engine.Quota, ...]:
    """The pool's quota tree as the engine sees it (a child is always in its parent's pool)."""
    rows = list(ResourceQuota.objects.filter(resource_type=pool))
    names = {row.pk: row.name for row in rows}
    return tuple(engine_quota(row, names) for row in rows)


def engine_quota(quota: ResourceQuota, names: dict[int, str]) -> engine.Quota:
    return engine.Quota(
        name=quota.name,
        parent=names.get(quota.parent_id) if quota.parent_id else None,
        min=quota.min_vector(),
        max=quota.max_vector(),
        pool=quota.resource_type,
        preempt_within=quota.preempt_within,
    )


# One pod of a job's full spec: (rank, role name, index in its role).
Slot = tuple[int, str, int]


def slots_of(pods_spec: Iterable[engine.Pod]) -> list[Slot]:
    """Rank, role and index in the role of each pod of a job's full spec (role order, then index)."""
    counters: dict[str, int] = {}
    out = []
    for rank, pod in enumerate(pods_spec):
        index = counters.get(pod.role, 0)
        counters[pod.role] = index + 1
        out.append((rank, pod.role, index))
    return out


@dataclass
class SnapshotIndex:
    """Maps the snapshot's names back to rows."""

    jobs: dict[str, Job] = field(default_factory=dict)
    live_pods: dict[int, list[Pod]] = field(default_factory=dict)  # job id -> live pods of its attempt
    nodes: dict[str, Node] = field(default_factory=dict)
    pods_of: dict[str, tuple[engine.Pod, ...]] = field(default_factory=dict)
    # §2c: an elastic job's (rank, role, index in role) of each engine pod, and its elastic role (loop.snapshot_elastic)
    slots: dict[str, list[tuple[int, str, int]]] = field(default_factory=dict)
    elastic: dict[str, object] = field(default_factory=dict)


