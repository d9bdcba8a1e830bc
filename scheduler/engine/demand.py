"""What a job asks for, worked out once per cycle: pods in placement order, totals, model constraint."""

from __future__ import annotations

from dataclasses import dataclass, field

from .reasons import Asked
from .resources import vector
from .types import Job, Pod

# One pod as placement sees it: (index in the job's pod order, GPUs, CPU millicores, memory MiB).
PodSize = tuple[int, int, int, int]


def placement_order(pods: tuple[Pod, ...]) -> tuple[PodSize, ...]:
    """DESIGN §2 placement order: GPUs, then CPU, then memory, largest first; equal pods keep their order
    (sorted() is stable)."""
    sizes = [(i, p.gpus, p.cpu_m, p.memory_mib) for i, p in enumerate(pods)]
    if len(sizes) > 1:
        sizes.sort(key=lambda s: (-s[1], -s[2], -s[3]))
    return tuple(sizes)


def named_models(pods: tuple[Pod, ...]) -> tuple[str, ...]:
    """The distinct GPU models the pods name, in name order."""
    return tuple(sorted({p.gpu_type for p in pods if p.gpu_type}))


@dataclass(slots=True, eq=False)
class Demand:
    job: Job
    pool: str | None  # the pool of the job's quota; None when the quota is unknown
    order: tuple[PodSize, ...]
    model: str | None  # the model every pod must use; None: the job may pick one (or needs no GPU)
    models_named: tuple[str, ...]  # more than one: the job can never run (one model per job)
    gpus: int
    cpu_m: int
    memory_mib: int
    # All pods of one size: (GPUs, CPU, memory). Such a gang fits iff the nodes hold that many pods
    # in all, which makes "failed before, fails again on less capacity" exact (see `memo`).
    shape: tuple[int, int, int] | None
    _requests: dict[str | None, dict[str, int]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.order)

    def request(self, model: str | None) -> dict[str, int]:
        """The job's total as a quota vector, its GPUs counted as `model`."""
        req = self._requests.get(model)
        if req is None:
            req = self._requests[model] = vector(self.gpus, model, self.cpu_m, self.memory_mib)
        return req

    def describe(self, model: str | None = None) -> Asked:
        """What it asks for, as reasons word it (rendered only when read)."""
        model = model or self.model
        if self.shape is not None:
            return Asked(self.count, self.shape[0], model, self.shape[1], self.shape[2], True)
        return Asked(self.count, self.gpus, model, self.cpu_m, self.memory_mib, False)


def demand_of(job: Job, pool: str | None) -> Demand:
    pods = job.pods
    if len(pods) == 1:  # most jobs: skip the sorting and summing
        pod = pods[0]
        size = (pod.gpus, pod.cpu_m, pod.memory_mib)
        return Demand(job=job, pool=pool, order=((0, *size),), model=pod.gpu_type,
                      models_named=(pod.gpu_type,) if pod.gpu_type else (), gpus=pod.gpus, cpu_m=pod.cpu_m,
                      memory_mib=pod.memory_mib, shape=size)
    order = placement_order(pods)
    named = named_models(pods)
    first = order[0][1:] if order else (0, 0, 0)
    return Demand(
        job=job,
        pool=pool,
        order=order,
        model=named[0] if len(named) == 1 else None,
        models_named=named,
        gpus=sum(p.gpus for p in pods),
        cpu_m=sum(p.cpu_m for p in pods),
        memory_mib=sum(p.memory_mib for p in pods),
        shape=first if order and all(size[1:] == first for size in order) else None,
    )
