"""Reclaim candidates: running Not in Quota jobs of the job's pool with a pod on a node where the job
could be placed (DESIGN §2). In Quota jobs are never candidates of reclaim (preempt_within, §2b, adds
its quota's own ones after them for its jobs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..capacity import NodeState
from ..resources import vector
from ..types import Job
from .ordering import candidates_ordering, unit_ordering

# A victim's pod: where it runs and what it holds there (GPUs, CPU millicores, memory MiB).
PodAt = tuple[NodeState, int, int, int]


@dataclass(slots=True, eq=False)
class Victim:
    job: Job
    quota: str
    pool: str
    request: dict[str, int]  # what it counts against its quota (`max`, and `min` while In Quota)
    pods: tuple[PodAt, ...]
    # It counts against its quota's guarantee now: a running In Quota job that preempt_within has not
    # demoted. Such a victim stops counting once chosen; a Not in Quota one keeps counting in `max`.
    in_quota: bool = False
    # §2c units: an extra pod of a running elastic job has its role index here and holds that pod only; a
    # whole elastic job's `pods` are its base, its extra pods are `extras` (units of their own, always
    # before it in candidate order), all released when it is taken.
    extra: int | None = None
    extras: tuple[Victim, ...] = ()
    # One unit's identity: the job's name (given by whoever makes a whole-job victim), or name#index.
    key: str = ""


class VictimQueue:
    """The candidates, per pool and per GPU model of their nodes, in candidate order."""

    def __init__(self, victims: Iterable[Victim], then: Iterable[Victim] = (), has_units: bool | None = None) -> None:
        """`then`: candidates that come after all of `victims` (preempt_within's In Quota ones); `has_units`:
        whether §2c units may be among them (None: look)."""
        self._lists: dict[tuple[str, str | None], list[Victim]] = {}
        victims, then = list(victims), list(then)
        # Elastic units among them (§2c): the node index (equal-pod gangs of whole jobs) does not apply.
        self.has_units = has_units if has_units is not None else any(
            v.extra is not None or v.extras for v in victims + then)
        if self.has_units:
            self.ordered = sorted(victims, key=lambda v: unit_ordering(v.job, v.extra))
            self.ordered += sorted(then, key=lambda v: unit_ordering(v.job, v.extra))
        else:  # whole jobs only: the same order, without units' keys
            self.ordered = sorted(victims, key=lambda v: candidates_ordering(v.job))
            self.ordered += sorted(then, key=lambda v: candidates_ordering(v.job))
        self._listed = False  # the per (pool, model) lists are built on first use
        self._start: dict[tuple[str, str | None], int] = {}  # every entry before it is taken
        self._taken: set[str] = set()

    def candidates(self, pool: str, model: str | None, could_host: Callable[[NodeState], bool]) -> Iterator[Victim]:
        """Untaken candidates in order with a pod on a node where the job could be placed."""
        if not self._listed:
            for victim in self.ordered:
                keys = {(victim.pool, None)} | {(victim.pool, node.model) for node, *_ in victim.pods}
                for list_key in keys:
                    self._lists.setdefault(list_key, []).append(victim)
            self._listed = True
        key = (pool, model)
        victims = self._lists.get(key, [])
        start = self._start.get(key, 0)
        # Victims mostly leave from the front: skip that prefix once, not on every search.
        while start < len(victims) and victims[start].key in self._taken:
            start += 1
        self._start[key] = start
        for i in range(start, len(victims)):
            victim = victims[i]
            if victim.key not in self._taken and any(could_host(pod[0]) for pod in victim.pods):
                yield victim

    def take(self, victim: Victim) -> None:
        self._taken.add(victim.key)
        if victim.extras:  # a whole job takes its extra pods along
            self._taken.update(extra.key for extra in victim.extras)

    def is_taken(self, victim: Victim) -> bool:
        return victim.key in self._taken

    def untaken(self) -> list[Victim]:
        """Every candidate not taken yet, in candidate order."""
        return [victim for victim in self.ordered if victim.key not in self._taken]



def extra_units(job: Job, pool: str, model: str | None, pods_at: Sequence[PodAt]) -> list[Victim]:
    """§2c: one unit per extra pod a running elastic job runs now (`pods_at`, in the order of
    `job.elastic.extra`); each counts Not in Quota, whatever its job's admission."""
    assert job.elastic is not None
    units = []
    for index, pod, at in zip(job.elastic.extra, job.pods[job.base_count:], pods_at, strict=False):
        units.append(Victim(job=job, quota=job.quota, pool=pool, pods=(at,), extra=index, key=f"{job.name}#{index}",
                            request=vector(pod.gpus, model, pod.cpu_m, pod.memory_mib)))
    return units
