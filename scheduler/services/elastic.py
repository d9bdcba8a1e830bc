"""Applying a cycle's resizes of elastic jobs (DESIGN §2c), inside the loop's transaction.

- A **shrink** terminates only the chosen extra pods (SIGTERM, the grace period, then SIGKILL), marked
  `terminate_requested = shrunk`: their exit is neither a failure nor the job's end, and the job stays
  Running on the rest.
- A **growth** creates the new extra pods of the current attempt on the engine's nodes (lowest free GPU
  indices), started after commit like an admission's.

Both set `Job.resized_at` (the run restarts from its checkpoint then: the engine's minimum runtime and
safe point count from it), count apart from preemptions and restarts (`shrink_count`, `grow_count`),
write an event the owner can read and a `JobResize` row with the work it cost, measured as a
preemption's is: GPUs the job held × the time since its last checkpoint (or since its start or last
resize, whichever is later).
"""

from __future__ import annotations

from datetime import datetime

from scheduler.engine.reasons import MEMBER, preemption_text, staff
from scheduler.engine.types import Decisions, Preemption
from scheduler.engine_rows import SnapshotIndex, slots_of
from scheduler.metrics.elastic import resize_observed
from scheduler.models import Job, JobResize, Node, Pod
from scheduler.services.events import job_event
from scheduler.services.lifecycle import grace_seconds, signal_pods_on_commit
from scheduler.states import LIVE_POD_STATUSES, EventKind, PodOutcome, PodStatus


def apply_resizes(decisions: Decisions, index: SnapshotIndex, now: datetime,
                  changed: list[Job]) -> list[tuple[Job, list[Pod]]]:
    """Write the shrinks and growths; returns the growths' new pods, to start after commit."""
    audience = staff(lambda key: index.jobs[key].name if key in index.jobs else key.split("#")[0])
    for key, shrink in decisions.shrunk.items():
        job = index.jobs[key]
        told = Preemption(key, shrink.for_job, shrink.by_quota)
        member, staff_text = preemption_text(told, MEMBER), preemption_text(told, audience)
        _shrink(job, _role_of(index, key), sorted(shrink.indexes), member, staff_text, now)
        changed.append(job)
    launches: list[tuple[Job, list[Pod]]] = []
    if decisions.grown:
        node_ids = {index.nodes[name].pk for growth in decisions.grown.values() for name in growth.nodes}
        free = _free_gpu_indices(node_ids)  # the same rule as an admission's
        for key, growth in decisions.grown.items():
            job = index.jobs[key]
            launches.append((job, _grow(job, index, key, growth.indexes, growth.nodes, free, now)))
            changed.append(job)
    return launches


def _free_gpu_indices(node_ids: set[int]) -> dict[int, list[int]]:
    """Per node, the GPU indices no live pod holds, lowest first."""
    used: dict[int, set[int]] = {node_id: set() for node_id in node_ids}
    for node_id, indices in Pod.objects.filter(node_id__in=node_ids, status__in=LIVE_POD_STATUSES).values_list(
            "node_id", "gpu_indices"):
        used[node_id].update(indices or [])
    counts = dict(Node.objects.filter(pk__in=node_ids).values_list("pk", "gpu_count"))
    return {node_id: [i for i in range(counts[node_id]) if i not in used[node_id]] for node_id in node_ids}


def _live(job: Job) -> list[Pod]:
    return list(job.pods.select_for_update(of=("self",)).filter(attempt=job.attempt, status__in=LIVE_POD_STATUSES,
                                                                terminate_requested="").select_related("node"))


def _role_of(index: SnapshotIndex, key: str) -> str:
    return index.elastic[key].role  # type: ignore[attr-defined]


def _shrink(job: Job, role: str, indexes: list[int], member: str, staff_text: str, now: datetime) -> None:
    live = _live(job)
    going = [pod for pod in live if pod.role == role and pod.index in indexes]
    for pod in going:
        pod.terminate_requested = PodOutcome.SHRUNK
        pod.save(update_fields=["terminate_requested"])
    signal_pods_on_commit(going, grace_s=grace_seconds(job), outcome=PodOutcome.SHRUNK)
    before, after = len(live), len(live) - len(going)
    text, staff_full = (f"shrunk from {before} to {after} pods: {why}" for why in (member, staff_text))
    _resized(job, JobResize.Kind.SHRINK, live, before, after, indexes, text, staff_full if staff_full != text else "",
             now)


def _grow(job: Job, index: SnapshotIndex, key: str, indexes: tuple[int, ...], nodes: tuple[str, ...],
          free: dict[int, list[int]], now: datetime) -> list[Pod]:
    live = _live(job)
    role = _role_of(index, key)
    spec_of = {(name, i): (rank, index.pods_of[key][rank]) for rank, name, i in _full_slots(index, key)}
    # A pod row per (role, index, attempt): an exited one of an earlier shrink gives its place to the new one.
    Pod.objects.filter(job=job, role=role, index__in=indexes, attempt=job.attempt).exclude(
        status__in=LIVE_POD_STATUSES).delete()
    pods = []
    for role_index, node_name in zip(indexes, nodes, strict=True):
        rank, spec = spec_of[(role, role_index)]
        node = index.nodes[node_name]
        take = free[node.pk][: spec.gpus]
        del free[node.pk][: spec.gpus]
        pods.append(Pod.objects.create(job=job, role=role, index=role_index, rank=rank, attempt=job.attempt,
                                       node=node, gpu_indices=take, status=PodStatus.PENDING))
    before, after = len(live), len(live) + len(pods)
    _resized(job, JobResize.Kind.GROW, live, before, after, list(indexes),
             f"grew from {before} to {after} pods on idle resources", "", now)
    return pods


def _full_slots(index: SnapshotIndex, key: str) -> list[tuple[int, str, int]]:
    return slots_of(index.pods_of[key])


def _resized(job: Job, kind: str, live: list[Pod], before: int, after: int, indexes: list[int], reason: str,
             staff_reason: str, now: datetime) -> None:
    """Count the resize, write its event and its cost (every worker restarts from the last checkpoint)."""
    gpus = sum(len(pod.gpu_indices or ()) for pod in live)
    lost_gpu_seconds, lost_steps = _work_lost(job, gpus, now)
    if kind == JobResize.Kind.SHRINK:
        job.shrink_count += 1
    else:
        job.grow_count += 1
    job.resized_at = now
    job.save(update_fields=["shrink_count", "grow_count", "resized_at", "updated_at"])
    JobResize.objects.create(job=job, attempt=job.attempt, kind=kind, time=now, from_pods=before, to_pods=after,
                             indexes=indexes, reason=reason[:500], staff_reason=staff_reason[:500], gpus=gpus,
                             lost_gpu_seconds=lost_gpu_seconds, lost_steps=lost_steps)
    if kind == JobResize.Kind.SHRINK:
        job_event(job, EventKind.SHRUNK, reason, staff_reason=staff_reason)
    else:
        job_event(job, EventKind.GREW, reason, staff_reason=staff_reason)
    resize_observed(kind)


def _work_lost(job: Job, gpus: int, now: datetime) -> tuple[float, int | None]:
    """GPU time and steps since the safe point: the last checkpoint of this attempt if after the run's last
    start or resize, else that start (from the attempt's last progress report, as for a preemption)."""
    progress = job.progress if job.progress.get("attempt") == job.attempt else {}
    moments = [moment.timestamp() for moment in (job.started_at, job.resized_at) if moment is not None]
    began = max(moments) if moments else now.timestamp()
    checkpoint_at = progress.get("last_checkpoint_at")
    safe = max(began, float(checkpoint_at)) if isinstance(checkpoint_at, int | float) else began
    step, checkpoint_step = progress.get("step"), progress.get("last_checkpoint_step")
    lost_steps = max(0, step - (checkpoint_step if isinstance(checkpoint_step, int) else 0)) if isinstance(
        step, int) else None
    return gpus * max(0.0, now.timestamp() - safe), lost_steps
