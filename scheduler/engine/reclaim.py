"""Reclaim: which Not in Quota jobs to preempt so an In Quota job fits (DESIGN §2 "Victim selection").

- Candidates: running Not in Quota jobs of the job's pool with a pod on a node where the job could
  be placed (right pool and model, schedulable, big enough for one of its pods). In Quota jobs are
  never candidates: they are not in the queue at all.
- Order: `candidates_ordering`, the one place that says it.
- Take candidates in that order until the job fits, then fill back: walk the chosen ones from the
  last to the first and spare each one the job still fits without.

"Fits" here is placement's own best fit over free + unreserved being-released capacity + what the
chosen victims hold, so the placement that follows a successful selection always succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from .capacity import NodeState
from .demand import PodSize
from .placement import equal_pods_held, scan_place
from .types import Job

# A victim's pod: where it runs and what it holds there (GPUs, CPU millicores, memory MiB).
PodAt = tuple[NodeState, int, int, int]


@dataclass(slots=True, eq=False)
class Victim:
    job: Job
    quota: str
    pool: str
    request: dict[str, int]  # what it counts against its quota's `max` until preempted
    pods: tuple[PodAt, ...]


def candidates_ordering(job: Job) -> tuple[int, float, str]:
    """Lower priority first; then the most recent safe point (least work lost: `Job.safe_point`, the last
    checkpoint reported after the start, else the start); then by name."""
    return (job.priority, -job.safe_point, job.name)


class VictimQueue:
    """The running Not in Quota jobs, per pool and per GPU model of their nodes, in candidate order."""

    def __init__(self, victims: Iterable[Victim], then: Iterable[Victim] = ()) -> None:
        """`then`: candidates that come after all of `victims` (preempt_within's In Quota ones)."""
        self._lists: dict[tuple[str, str | None], list[Victim]] = {}
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
        while start < len(victims) and victims[start].job.name in self._taken:
            start += 1
        self._start[key] = start
        for i in range(start, len(victims)):
            victim = victims[i]
            if victim.job.name not in self._taken and any(could_host(pod[0]) for pod in victim.pods):
                yield victim

    def take(self, victim: Victim) -> None:
        self._taken.add(victim.job.name)

    def is_taken(self, victim: Victim) -> bool:
        return victim.job.name in self._taken

    def untaken(self) -> list[Victim]:
        """Every candidate not taken yet, in candidate order."""
        return [victim for victim in self.ordered if victim.job.name not in self._taken]


class Fit(Protocol):
    def add(self, victim: Victim, sign: int = 1) -> None: ...

    def fits(self) -> bool: ...


class CountingFit:
    """For a gang whose pods are all one size: it fits iff the nodes hold that many pods in all
    (`placement.equal_pods_held`), and a victim changes only its own nodes' terms."""

    def __init__(
        self,
        shape: tuple[int, int, int],
        count: int,
        base: Iterable[NodeState],
        could_host: Callable[[NodeState], bool],
    ) -> None:
        self.shape = shape
        self.count = count
        self.could_host = could_host
        self.available: dict[NodeState, list[int]] = {}
        # Nodes that may already hold a pod on free + being-released capacity (the caller passes those
        # with enough GPUs); victims add to these or to others.
        self.total = sum(self._holds(n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m) for n in base)

    def _holds(self, g: int, c: int, m: int) -> int:
        return equal_pods_held(self.shape, (g, c, m), self.count)

    def add(self, victim: Victim, sign: int = 1) -> None:
        for node, g, c, m in victim.pods:
            amounts = self.available.get(node)
            if amounts is None:
                if not self.could_host(node):
                    continue
                amounts = self.available[node] = [
                    node.free_g + node.rel_g, node.free_c + node.rel_c, node.free_m + node.rel_m
                ]
            before = self._holds(*amounts)
            amounts[0] += sign * g
            amounts[1] += sign * c
            amounts[2] += sign * m
            self.total += self._holds(*amounts) - before

    def fits(self) -> bool:
        return self.total >= self.count


class GreedyFit:
    """For a gang of mixed pod sizes: run best fit itself over the candidate nodes."""

    def __init__(self, order: Sequence[PodSize], nodes: Iterable[NodeState], could_host: Callable[[NodeState], bool]):
        self.order = order
        self.available = {
            n: [n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m] for n in nodes if could_host(n)
        }

    def add(self, victim: Victim, sign: int = 1) -> None:
        for node, g, c, m in victim.pods:
            amounts = self.available.get(node)
            if amounts is not None:
                amounts[0] += sign * g
                amounts[1] += sign * c
                amounts[2] += sign * m

    def fits(self) -> bool:
        return scan_place(self.order, self.available)


def select_victims(candidates: Iterable[Victim], fit: Fit) -> list[Victim] | None:
    """The victims to preempt, in candidate order; None when even all candidates would not make room."""
    if fit.fits():
        return []
    chosen: list[Victim] = []
    for victim in candidates:
        fit.add(victim)
        chosen.append(victim)
        if fit.fits():
            break
    else:
        return None
    # Fill back. The last one is needed (the job did not fit before it); try sparing each earlier one,
    # latest first, keeping the job fitting.
    spared: set[int] = set()
    for i in range(len(chosen) - 2, -1, -1):
        fit.add(chosen[i], sign=-1)
        if fit.fits():
            spared.add(i)
        else:
            fit.add(chosen[i])
    return [victim for i, victim in enumerate(chosen) if i not in spared]
