"""A replay's jobs: each trace job's replay state (`SimJob`) and the classes that pruning uses; whether a job
fits its pool when empty (asked of the engine), and the notes a replay gives about its jobs."""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import replace

from scheduler.engine.quota import QuotaTree
from scheduler.engine.types import PENDING, Decisions, Elastic, Job, Pod, Quota, Snapshot
from scheduler.states import PreemptedPhase, phase_after_preemption

from .elastic import ROLE, ElasticShape, shape_of
from .ledger import JobClass, Ledger
from .limits import time_limit
from .model import JobOutcome, ReplayConfig
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
        "shape", "base_gpus", "extra", "extra_nodes", "resized_at", "resized_by",
    )

    def __init__(self, out: JobOutcome, index: int, pending_view: Job, key: tuple, phase: float,
                 shape: ElasticShape | None = None) -> None:
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
        # §2c (elastic.py): its elastic role (None: a plain job); GPUs of its base (all of a plain job's; `gpus`
        # is what its pods hold now); the role indexes and nodes of the extra pods it runs, in index order; its
        # current run's last resize, and the kind of resize that began that run (its restart is that one's cost)
        self.shape = shape
        self.base_gpus = shape.base_gpus if shape is not None else out.gpus
        self.extra: tuple[int, ...] = ()
        self.extra_nodes: tuple[str, ...] = ()
        self.resized_at: float | None = None
        self.resized_by: str | None = None  # resizes.SHRINK or resizes.GROWTH

    @property
    def pods_now(self) -> int:
        """Pods of the elastic role it runs now (elastic jobs)."""
        assert self.shape is not None
        return self.shape.min_count + len(self.extra)

    @property
    def borrowed_gpus(self) -> int:
        """GPUs it holds Not in Quota while running: all of them, or an In Quota job's extra pods (§2c)."""
        return self.gpus if not self.in_quota else self.gpus - self.base_gpus

    def running_view(self) -> Job:
        """The engine's view of it running (its `view` in that phase) with the extra pods it runs now: its base, then
        its extra pods in index order (§2c, DESIGN §4)."""
        shape, view = self.shape, self.view
        assert shape is not None and view.elastic is not None
        base = view.pods[:shape.min_count]
        return replace(
            view, pods=base + (base[-1],) * len(self.extra),
            nodes=view.nodes[:shape.min_count] + self.extra_nodes,
            elastic=replace(view.elastic, extra=self.extra, resized_at=self.resized_at),
        )


def build_jobs(
    jobs: Sequence[TraceJob],
    setup: PolicySetup,
    cluster: Cluster,
    ledger: Ledger,
    work: WorkModel,
    max_pod: int,
    limits: str = "none",
    elastic_share: float = 0.0,
) -> tuple[list[SimJob], dict[tuple, JobClass]]:
    """Each job's engine view (pods split by `max_pod` GPUs, its time limit by the `limits` model; an elastic
    job's base, by elastic.py's model with `elastic_share`), its class and its outcome record."""
    sims: list[SimJob] = []
    classes: dict[tuple, JobClass] = {}
    pods_cache: dict[tuple, tuple[Pod, ...]] = {}
    fits_cache: dict[tuple[str, int, str | None], bool] = {}
    tree = QuotaTree(cluster.quotas, cluster.nodes)
    pools = {q.name: q.pool for q in setup.quotas}
    for index, job in enumerate(jobs):
        quota = setup.quota_of_team[job.quota]
        idle = setup.idle_mode(job)
        elastic = shape_of(job.name, job.gpus, idle, elastic_share, max_pod)
        shape = (job.gpus, job.gpu_type, job.cpu_m, job.memory_mib, elastic)
        pods = pods_cache.get(shape)
        if pods is None:
            pods = _elastic_base(job, elastic) if elastic is not None else tuple(
                Pod(role=ROLE, gpus=g, gpu_type=job.gpu_type, cpu_m=c, memory_mib=m)
                for g, c, m in pod_resources(job.gpus, job.cpu_m, job.memory_mib, max_pod)
            )
            pods_cache[shape] = pods
        view = Job(
            name=job.name, quota=quota, pods=pods, priority=job.priority, idle=idle,
            submitted_at=job.submit_s, phase=PENDING, time_limit_s=time_limit(limits, job.duration_s),
            elastic=Elastic(ROLE, elastic.min_count, elastic.count) if elastic is not None else None,
        )
        fits_key = (job.quota, job.gpus, job.gpu_type)
        if fits_key not in fits_cache:
            fits_cache[fits_key] = fits_guarantee(job, cluster.quotas, cluster.nodes, tree)
        fits = fits_cache[fits_key]
        key = (quota, pods, job.priority, idle, fits, elastic)
        if key not in classes:
            pool = pools[quota]
            models = (job.gpu_type,) if job.gpu_type else ledger.models_of_pool.get(pool, ())
            classes[key] = JobClass(
                quota, pods, ledger.paths[quota], tuple((pool, m) for m in models), idle, job.priority, fits
            )
        out = JobOutcome(
            name=job.name, team=job.quota, gpus=job.gpus, submit_s=job.submit_s,
            duration_s=job.duration_s, fits_guarantee=fits, priority=job.priority, elastic=elastic is not None,
        )
        sims.append(SimJob(out, index, view, key, work.phase(job.name), elastic))
    return sims, classes


def _elastic_base(job: TraceJob, shape: ElasticShape) -> tuple[Pod, ...]:
    """The base of an elastic job (its gang when pending): `min_count` of its equal pods, each with an equal
    share of its CPU and memory (floors: the pods of one role are alike)."""
    pod = Pod(role=ROLE, gpus=shape.pod_gpus, gpu_type=job.gpu_type, cpu_m=job.cpu_m // shape.count,
              memory_mib=job.memory_mib // shape.count)
    return (pod,) * shape.min_count


def fits_when_empty(engine: Callable[[Snapshot], Decisions], cluster: Cluster, pool: str, pods: tuple[Pod, ...],
                    cache: MutableMapping[tuple, bool]) -> bool:
    """Whether a job of `pods` fits `pool` when empty, asked of the engine itself (cached per shape)."""
    key = (pool, pods)
    known = cache.get(key)
    if known is None:
        probe = Job(name="probe", quota="probe", pods=pods)
        snapshot = Snapshot(
            nodes=tuple(n for n in cluster.nodes if n.pool == pool),
            quotas=(Quota(name="probe", parent=None, min=cluster.capacity(pool), pool=pool),),
            jobs=(probe,),
        )
        known = "probe" in engine(snapshot).admitted
        cache[key] = known
    return known


def replay_notes(unguaranteed: Sequence[str], outcomes: Sequence[JobOutcome], config: ReplayConfig) -> list[str]:
    """What a replay's reader should know about its jobs: teams without a guarantee, elastic and refused jobs."""
    notes = []
    if unguaranteed:
        notes.append(f"teams without a guarantee: {', '.join(unguaranteed)}")
    if config.elastic_share:
        elastic = sum(1 for o in outcomes if o.elastic)
        notes.append(f"{elastic} elastic job(s) (share {config.elastic_share:g} of the jobs of 2+ GPUs that may borrow, "
                     f"alpha {config.elastic_alpha:g})")
    rejected = sum(1 for o in outcomes if o.rejected)
    if rejected:
        notes.append(f"{rejected} job(s) cannot fit the cluster even when empty: refused at submission")
    return notes
