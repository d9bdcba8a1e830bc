"""A replay's jobs: each trace job's replay state (`SimJob`) and the classes that pruning uses."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.engine.quota import QuotaTree
from scheduler.engine.types import PENDING, Job, Pod
from scheduler.states import PreemptedPhase, phase_after_preemption

from .ledger import JobClass, Ledger
from .limits import time_limit
from .model import JobOutcome
from .policies import PolicySetup, fits_guarantee
from .traces import Cluster, TraceJob, pod_resources
from .work import Run, WorkModel

# Job states inside the replay.
FUTURE, QUEUED, NOMINATED, RUNNING, TERMINATING, DONE, REJECTED = range(7)

# Every trace job is replayed as fault tolerant: it checkpoints, and a preempted run resumes.
TRACE_JOBS_FAULT_TOLERANT = True


def requeue_after_exit(sim: SimJob) -> bool:
    """Once a preempted job's pods have exited, does it queue again? As in production
    (states.phase_after_preemption, DESIGN §3): at once, with its first queue time, when fault
    tolerant; else it is held until a person restarts it, which in a replay is for ever (DONE)."""
    if phase_after_preemption(fault_tolerance=TRACE_JOBS_FAULT_TOLERANT) is PreemptedPhase.REQUEUED:
        return True
    sim.state = DONE
    return False


class SimJob:
    """A job's replay state; the engine's view of it is kept in `view` and rebuilt only on change."""

    __slots__ = (
        "out", "index", "pending_view", "view", "key", "state", "gpus", "duration", "queued_at",
        "progress", "finish_at", "gen", "in_quota", "inq", "model", "nominated_at", "run", "phase", "stopped",
    )

    def __init__(self, out: JobOutcome, index: int, pending_view: Job, key: tuple, phase: float) -> None:
        self.out = out
        self.index = index
        self.pending_view = pending_view
        self.view = pending_view
        self.key = key  # pruning class
        self.state = FUTURE
        self.gpus = out.gpus
        self.duration = out.duration_s
        self.queued_at = out.submit_s  # when this attempt entered the queue
        self.progress = 0.0  # work saved by the last completed checkpoint (s)
        self.finish_at = math.inf
        self.gen = 0  # bumps invalidate scheduled events
        self.in_quota = False
        self.inq: tuple[str, int] | None = None  # (model, GPUs) counted into its quotas' inq
        self.model: str | None = None  # GPU model of the current run
        self.nominated_at: float | None = None  # first nomination of this attempt: it waits on a reclaim
        self.run: Run | None = None  # the current run
        self.phase = phase  # work position of its first checkpoint
        self.stopped = False  # a run of it was preempted: later runs pay the restart overhead


def build_jobs(
    jobs: Sequence[TraceJob],
    setup: PolicySetup,
    cluster: Cluster,
    ledger: Ledger,
    work: WorkModel,
    max_pod: int,
    limits: str = "none",
) -> tuple[list[SimJob], dict[tuple, JobClass]]:
    """Each job's engine view (pods split by `max_pod` GPUs, its time limit by the `limits` model), its
    class and its outcome record."""
    sims: list[SimJob] = []
    classes: dict[tuple, JobClass] = {}
    pods_cache: dict[tuple, tuple[Pod, ...]] = {}
    fits_cache: dict[tuple[str, int, str | None], bool] = {}
    tree = QuotaTree(cluster.quotas, cluster.nodes)
    pools = {q.name: q.pool for q in setup.quotas}
    for index, job in enumerate(jobs):
        quota = setup.quota_of_team[job.quota]
        idle = setup.idle_mode(job)
        shape = (job.gpus, job.gpu_type, job.cpu_m, job.memory_mib)
        pods = pods_cache.get(shape)
        if pods is None:
            pods = tuple(
                Pod(role="worker", gpus=g, gpu_type=job.gpu_type, cpu_m=c, memory_mib=m)
                for g, c, m in pod_resources(job.gpus, job.cpu_m, job.memory_mib, max_pod)
            )
            pods_cache[shape] = pods
        view = Job(
            name=job.name, quota=quota, pods=pods, priority=job.priority, idle=idle,
            submitted_at=job.submit_s, phase=PENDING, time_limit_s=time_limit(limits, job.duration_s),
        )
        fits_key = (job.quota, job.gpus, job.gpu_type)
        if fits_key not in fits_cache:
            fits_cache[fits_key] = fits_guarantee(job, cluster.quotas, cluster.nodes, tree)
        fits = fits_cache[fits_key]
        key = (quota, pods, job.priority, idle, fits)
        if key not in classes:
            pool = pools[quota]
            models = (job.gpu_type,) if job.gpu_type else ledger.models_of_pool.get(pool, ())
            classes[key] = JobClass(
                quota, pods, ledger.paths[quota], tuple((pool, m) for m in models), idle, job.priority, fits
            )
        out = JobOutcome(
            name=job.name, team=job.quota, gpus=job.gpus, submit_s=job.submit_s,
            duration_s=job.duration_s, fits_guarantee=fits, priority=job.priority,
        )
        sims.append(SimJob(out, index, view, key, work.phase(job.name)))
    return sims, classes
