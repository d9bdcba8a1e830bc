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


@dataclass
class SnapshotIndex:
    """Maps the snapshot's names back to rows."""

    jobs: dict[str, Job] = field(default_factory=dict)
    live_pods: dict[int, list[Pod]] = field(default_factory=dict)  # job id -> live pods of its attempt
    nodes: dict[str, Node] = field(default_factory=dict)
    pods_of: dict[str, tuple[engine.Pod, ...]] = field(default_factory=dict)


