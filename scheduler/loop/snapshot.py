"""Build the engine's Snapshot from the database rows of one cycle (locked by the caller)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scheduler.engine import types as engine
from scheduler.engine_rows import IDLE_MODE_TO_ENGINE, SnapshotIndex, engine_node, engine_quota, roles_by_job
from scheduler.loop.snapshot_elastic import elastic_entries, elastic_roles
from scheduler.models import Job, Node, Pod, PoolPolicy, ResourceQuota
from scheduler.states import LIVE_POD_STATUSES, JobStatus, is_started, resumes_automatically


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _checkpointed_at(job: Job) -> float | None:
    """The last checkpoint the current attempt reported (`Job.progress`, relayed from the pod's
    progress file): the job's safe point for victim order (DESIGN §2), when after its start."""
    progress = job.progress or {}
    if progress.get("attempt") != job.attempt:
        return None
    value = progress.get("last_checkpoint_at")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def pool_policies() -> dict[str, engine.Policy]:
    """The pools' policies from the database (DESIGN §2b); a pool without a row gets the defaults."""
    return {
        row.resource_type: engine.Policy(idle_share=row.idle_share, min_runtime_s=float(row.min_runtime_s),
                                         starvation_s=float(row.starvation_s),
                                         starvation_hold=bool(row.starvation_hold),
                                         starved_min_runtime_s=float(row.starved_min_runtime_s),
                                         default_time_limit_s=float(row.default_time_limit_s),
                                         grow_interval_s=float(row.grow_interval_s))
        for row in PoolPolicy.objects.all()
    }


def _queued(job: Job, now: datetime) -> bool:
    """Pending for the engine: Queuing (its backoff passed), or Preempted and queued again at once
    (DESIGN §3: it shows Preempted until it runs again, but waits like any pending job)."""
    if job.status == JobStatus.QUEUING:
        return job.restart_after is None or job.restart_after <= now
    return resumes_automatically(job.status, job.stop_outcome, finished=job.finished_at is not None)


def build_snapshot(jobs: Sequence[Job], now: datetime) -> tuple[engine.Snapshot, SnapshotIndex]:
    """`jobs`: the active jobs (locked by the caller); their roles are read here in one query."""
    index = SnapshotIndex()
    nodes = list(Node.objects.all())
    index.nodes = {node.name: node for node in nodes}
    node_names = {node.pk: node.name for node in nodes}
    quotas = list(ResourceQuota.objects.all())
    quota_names = {quota.pk: quota.name for quota in quotas}

    # Live pods of any job, kept for the jobs of this cycle: one query without a list of every job id
    # (most of the jobs in a long queue have no pods).
    job_ids = {job.pk for job in jobs}
    live: dict[int, list[Pod]] = {}
    for pod in Pod.objects.filter(status__in=LIVE_POD_STATUSES).order_by("job_id", "rank"):
        if pod.job_id in job_ids:
            live.setdefault(pod.job_id, []).append(pod)
    index.live_pods = live
    pods_by_job = roles_by_job(jobs)
    elastic_of = elastic_roles(jobs)

    engine_jobs: list[engine.Job] = []
    for job in jobs:
        key = job.engine_key
        index.jobs[key] = job
        pods_spec = pods_by_job.get(job.pk, ())
        index.pods_of[key] = pods_spec
        common = dict(
            name=key,
            quota=quota_names[job.quota_id],
            priority=job.priority,
            idle=IDLE_MODE_TO_ENGINE[job.idle_mode],
            submitted_at=_seconds(job.queue_time) or 0.0,
            # §2d: the maximum running time is the time limit (None: the pool's default, if any)
            time_limit_s=60.0 * job.max_running_minutes if job.max_running_minutes else None,
        )
        job_live = live.get(job.pk, [])
        role = elastic_of.get(job.pk)
        if role is not None:  # §2c: base and extra pods
            engine_jobs += elastic_entries(common, job, pods_spec, role, job_live, node_names, index,
                                           running=is_started(job.status), queued=not job_live and _queued(job, now),
                                           checkpointed_at=_checkpointed_at(job))
        elif job_live:
            # Running jobs hold their pods' capacity; any other job with live pods (preempted,
            # stopping, failing) is terminating: its capacity is being released.
            running = is_started(job.status)
            by_rank = {pod.rank: pod for pod in job_live}
            engine_jobs.append(
                engine.Job(
                    **common,
                    pods=tuple(p for rank, p in enumerate(pods_spec) if rank in by_rank),
                    phase=engine.RUNNING if running else engine.TERMINATING,
                    in_quota=bool(job.in_quota),
                    started_at=_seconds(job.started_at) or 0.0,
                    nodes=tuple(node_names[by_rank[rank].node_id] for rank in sorted(by_rank)),
                    checkpointed_at=_checkpointed_at(job),
                    demoted=bool(job.demoted) and not job.in_quota,
                )
            )
        elif _queued(job, now):
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
        now=now.timestamp(),
        policies=pool_policies(),
    )
    return snapshot, index
