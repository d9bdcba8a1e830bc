"""Growth of elastic jobs (DESIGN §2c), on the `grow` hook, after promotion.

Running elastic jobs below their maximum whose last resize (or start) is at least `grow_interval_s` ago
(a resize restarts every worker from its checkpoint: growing every cycle would thrash) are taken in
pending order; each places its missing extra pods in index order, one by one, each on the free,
unreserved node of its GPU model with the best fit (§2 placement), within its quota's `max` (extra pods
count Not in Quota), off every starving job's drain set. Growth never preempts and never nominates; a job
shrunk or preempted in this cycle does not grow. Shrinks are victim units (`victims.candidates`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fit import tightest
from ..placement import allowed_nodes
from ..resources import vector
from ..state import queue_order
from ..types import RUNNING, Growth, Job, Snapshot
from .base import CyclePolicy

if TYPE_CHECKING:
    from ..state import CycleState


def has_elastic(snapshot: Snapshot) -> bool:
    """Some running elastic job could grow."""
    return snapshot.now is not None and any(
        job.elastic is not None and job.phase == RUNNING and len(job.elastic.extra) < job.elastic.count
        - job.elastic.min_count for job in snapshot.jobs)


def due(job: Job, interval: float, now: float) -> bool:
    """Its last resize (or start) is at least `interval` ago (exactly that long included)."""
    return now - job.run_started_at >= interval


class ElasticGrowth(CyclePolicy):
    def grow(self, state: CycleState) -> None:
        decided = state.decisions
        now = state.now
        assert now is not None
        drained = frozenset(state.capacity.nodes[name] for names in state.drain_sets.values() for name in names
                            if name in state.capacity.nodes)
        growing = [job for job in state.snapshot.jobs if job.elastic is not None and job.phase == RUNNING
                   and job.elastic.missing() and job.name not in decided.preempted and job.name not in decided.shrunk]
        for job in sorted(growing, key=queue_order):
            pool = state.quotas.pool(job.quota)
            if pool is not None and due(job, state.snapshot.policy_of(pool).grow_interval_s, now):
                grow_job(state, job, pool, drained)


def grow_job(state: CycleState, job: Job, pool: str, drained: frozenset) -> None:
    """Place the job's missing extra pods in index order until one does not fit."""
    elastic = job.elastic
    assert elastic is not None
    pod = next(p for p in reversed(job.pods) if p.role == elastic.role)  # every pod of the role is alike
    model = _model_of(state, job)
    request = vector(pod.gpus, model, pod.cpu_m, pod.memory_mib)
    nodes = allowed_nodes(state.capacity, state.allowed, pool, model, drained)
    indexes: list[int] = []
    placed: list[str] = []
    for index in elastic.missing():
        if state.quotas.max_shortfall(job.quota, request) is not None:
            break
        node = tightest(((n, (n.free_g, n.free_c, n.free_m)) for n in nodes), pod.gpus, pod.cpu_m, pod.memory_mib)
        if node is None:
            break  # its extra pods are all alike: the next one does not fit either
        state.capacity.take(node, pod.gpus, pod.cpu_m, pod.memory_mib, releasing_first=False)
        state.quotas.charge(job.quota, request, in_quota=False)
        indexes.append(index)
        placed.append(node.name)
    if indexes:
        state.decisions.grown[job.name] = Growth(tuple(indexes), tuple(placed))


def _model_of(state: CycleState, job: Job) -> str | None:
    """The GPU model its running pods use (the one its pods name, else its nodes')."""
    named = next((p.gpu_type for p in job.pods if p.gpu_type), None)
    if named is not None:
        return named
    for pod, name in zip(job.pods, job.nodes, strict=False):
        node = state.capacity.nodes.get(name)
        if pod.gpus and node is not None:
            return node.model
    return None
