"""Elastic jobs in the loop's snapshot (DESIGN §2c): the engine sees a pending elastic job's base as its
gang, and a running one's base pods, then its extra pods in index order, with the indexes and its last
resize. The snapshot index keeps, per job, which (rank, role, index) each engine pod is, for the writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scheduler.engine import types as engine
from scheduler.engine_rows import Slot, SnapshotIndex, slots_of
from scheduler.models import Job, JobRole, Pod


@dataclass(frozen=True)
class ElasticRole:
    role: str
    min_count: int
    count: int


def elastic_roles(jobs: Sequence[Job]) -> dict[int, ElasticRole]:
    """The elastic role of each job that has one (min below its count), from one query of the roles of
    jobs in these statuses (no list of ids)."""
    wanted = {job.pk for job in jobs}
    rows = JobRole.objects.filter(min_pod_count__isnull=False, job__status__in={job.status for job in jobs})
    return {job_id: ElasticRole(name, low, count)
            for job_id, name, low, count in rows.values_list("job_id", "name", "min_pod_count", "pod_count")
            if job_id in wanted and low < count}


def is_extra(slot: Slot, role: ElasticRole) -> bool:
    return slot[1] == role.role and slot[2] >= role.min_count


def pending_elastic(common: dict, pods_spec: Sequence[engine.Pod], role: ElasticRole,
                    nominated: Sequence[str] | None) -> tuple[engine.Job, list[Slot]]:
    """A queued elastic job: its base is the gang (nominated on `nominated` when that names a node per
    base pod)."""
    base = [slot for slot in slots_of(pods_spec) if not is_extra(slot, role)]
    pods = tuple(pods_spec[rank] for rank, _, _ in base)
    elastic = engine.Elastic(role.role, role.min_count, role.count)
    if nominated and len(nominated) == len(base):
        return engine.Job(**common, pods=pods, phase=engine.NOMINATED, nodes=tuple(nominated), elastic=elastic), base
    return engine.Job(**common, pods=pods, phase=engine.PENDING, elastic=elastic), base


def live_elastic(common: dict, job: Job, pods_spec: Sequence[engine.Pod], role: ElasticRole, live: Sequence[Pod],
                 node_names: dict[int, str], *, running: bool, seconds: float | None,
                 checkpointed_at: float | None) -> tuple[list[engine.Job], list[Slot]]:
    """A running (or terminating) elastic job: its live base pods in rank order, then its live extra pods in
    index order. Pods a shrink is taking away are no longer part of a running job: they are a terminating
    job of their own (`name~shrinking`), whose capacity is being released."""
    shrinking = [pod for pod in live if running and pod.terminate_requested]
    live_at = {(pod.role, pod.index): pod for pod in live if pod not in shrinking}
    slots = [slot for slot in slots_of(pods_spec) if (slot[1], slot[2]) in live_at]
    order = [s for s in slots if not is_extra(s, role)] + sorted((s for s in slots if is_extra(s, role)),
                                                                 key=lambda s: s[2])
    elastic = engine.Elastic(role.role, role.min_count, role.count,
                             extra=tuple(s[2] for s in order if is_extra(s, role)), resized_at=seconds)
    jobs = [engine.Job(
        **common,
        pods=tuple(pods_spec[rank] for rank, _, _ in order),
        phase=engine.RUNNING if running else engine.TERMINATING,
        in_quota=bool(job.in_quota),
        started_at=job.started_at.timestamp() if job.started_at else 0.0,
        nodes=tuple(node_names[live_at[(name, index)].node_id] for _, name, index in order),
        checkpointed_at=checkpointed_at,
        demoted=bool(job.demoted) and not job.in_quota,
        elastic=elastic,
    )]
    if shrinking:
        spec_at = {(name, index): pods_spec[rank] for rank, name, index in slots_of(pods_spec)}
        jobs.append(engine.Job(
            name=f"{common['name']}~shrinking", quota=common["quota"], phase=engine.TERMINATING,
            pods=tuple(spec_at[(pod.role, pod.index)] for pod in shrinking),
            nodes=tuple(node_names[pod.node_id] for pod in shrinking),
        ))
    return jobs, order


def resized_seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def elastic_entries(common: dict, job: Job, pods_spec: Sequence[engine.Pod], role: ElasticRole, live: Sequence[Pod],
                    node_names: dict[int, str], index: SnapshotIndex, *, running: bool, queued: bool,
                    checkpointed_at: float | None) -> list[engine.Job]:
    """The engine's jobs for one elastic job (none when it is neither live nor queued); `index` learns its
    role and which pod each engine pod is."""
    key = common["name"]
    index.elastic[key] = role
    if live:
        # A resize of an earlier attempt is no resize of this run (admission starts a new one).
        resized = job.resized_at if job.resized_at and job.started_at and job.resized_at >= job.started_at else None
        jobs, index.slots[key] = live_elastic(common, job, pods_spec, role, live, node_names, running=running,
                                              seconds=resized_seconds(resized), checkpointed_at=checkpointed_at)
        return jobs
    if not queued:
        return []
    nominated = job.nominated_nodes if job.nominated_nodes and all(
        name in index.nodes for name in job.nominated_nodes) else None
    pending, index.slots[key] = pending_elastic(common, pods_spec, role, nominated)
    return [pending]
