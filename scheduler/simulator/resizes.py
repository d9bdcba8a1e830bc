"""Shrinks and growths of elastic jobs in a replay (DESIGN §2c): what the replay keeps of them between cycles.

The pods a shrink removed are no longer part of their running job: they are SIGTERMed and hold their GPUs
through the grace period, and the engine sees them as one terminating job of their own, `name~shrinking`,
as the live loop's snapshot does (scheduler/loop/snapshot_elastic.py), until they exit. The replay itself
(replay.py) restarts the job's run at its new size; the arithmetic of runs is work.py's.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.engine.types import TERMINATING, Job, Pod, Policy

from .elastic import throughput
from .jobs import SimJob
from .ledger import Ledger
from .model import JobOutcome, ReplayConfig
from .work import Run, RunRecord, WorkModel

SHRINKING_SUFFIX = "~shrinking"
SHRINK = "shrink"
GROWTH = "growth"

# Event kinds of the replay's heap (replay.py; arrivals are not in it), ordered so that at one instant
# completions and exits free capacity before the growth they may allow. SHRUNK_EXIT: pods a shrink removed are
# gone; GROW_DUE: an elastic job's growth interval has passed (§2c).
COMPLETE, EXIT, SHRUNK_EXIT, GROW_DUE = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class ShrunkPods:
    """Pods one shrink removed from a job: where they run until they exit."""

    exit_at: float
    pod: Pod
    nodes: tuple[str, ...]
    model: str | None

    @property
    def gpus(self) -> int:
        return self.pod.gpus * len(self.nodes)


class Resizes:
    """The counts of a replay's shrinks and growths, and the shrunk pods still exiting, per job."""

    def __init__(self) -> None:
        self.shrinks = 0
        self.growths = 0
        self.pods_shrunk = 0
        self.pods_grown = 0
        self.shrinking: dict[str, deque[ShrunkPods]] = {}  # job -> its shrunk pods still exiting, oldest first
        self.views: dict[str, Job] = {}  # job -> the terminating job its exiting pods are to the engine

    def counts(self) -> dict[str, int]:
        """The counts, by their names in `ReplayResult`."""
        return {"shrinks": self.shrinks, "growths": self.growths, "pods_shrunk": self.pods_shrunk,
                "pods_grown": self.pods_grown}

    def exiting(self) -> tuple[Job, ...]:
        """The terminating jobs of shrunk pods not gone yet, for the snapshot."""
        return tuple(self.views.values())

    def shrunk(self, job: Job, pods: ShrunkPods) -> None:
        self.shrinks += 1
        self.pods_shrunk += len(pods.nodes)
        self.shrinking.setdefault(job.name, deque()).append(pods)
        self._show(job.name, job.quota)

    def grown(self, pods: int) -> None:
        self.growths += 1
        self.pods_grown += pods

    def exited(self, job: Job) -> ShrunkPods:
        """The job's oldest shrunk pods are gone (every shrink has the same grace period, so they go in order)."""
        batches = self.shrinking[job.name]
        gone = batches.popleft()
        if not batches:
            del self.shrinking[job.name]
        self._show(job.name, job.quota)
        return gone

    def _show(self, name: str, quota: str) -> None:
        batches = self.shrinking.get(name)
        if not batches:
            self.views.pop(name, None)
            return
        self.views[name] = Job(
            name=name + SHRINKING_SUFFIX, quota=quota, phase=TERMINATING,
            pods=tuple(batch.pod for batch in batches for _ in batch.nodes),
            nodes=tuple(node for batch in batches for node in batch.nodes),
        )


def split_extra(extra: Sequence[int], nodes: Sequence[str], removed: Sequence[int]
                ) -> tuple[list[tuple[int, str]], tuple[str, ...]]:
    """The extra pods (index, node) a shrink leaves, in index order, and the nodes of those it removes."""
    gone = set(removed)
    kept = [(index, node) for index, node in zip(extra, nodes, strict=True) if index not in gone]
    return kept, tuple(node for index, node in zip(extra, nodes, strict=True) if index in gone)


def merge_extra(extra: Sequence[int], nodes: Sequence[str], added: Sequence[int], added_nodes: Sequence[str]
                ) -> list[tuple[int, str]]:
    """The extra pods (index, node) after a growth, in index order."""
    return sorted([*zip(extra, nodes, strict=True), *zip(added, added_nodes, strict=True)])


def charge(out: JobOutcome, kind: str | None, gpu_s: float) -> None:
    """Count GPU-seconds a resize of `kind` (SHRINK, GROWTH; None: no resize) cost its job."""
    if kind is None:
        return
    out.resize_lost_gpu_s += gpu_s
    if kind == GROWTH:
        out.growth_lost_gpu_s += gpu_s


def due_at(start: float, interval: float) -> float:
    """The first time `t` with `t - start >= interval` in floating point: when the engine's growth test
    (`now - run start >= grow_interval_s`) first holds."""
    due = start + interval
    while due - start < interval:
        due = math.nextafter(due, math.inf)
    return due


def grace_record(now: float, grace_s: float, gpus: int) -> RunRecord:
    """The GPU-time of pods a shrink removed: SIGTERM at `now`, gone `grace_s` later, no work meanwhile."""
    idle = Run(start=now, gpus=gpus, base=0.0, work=0.0, restart=0.0, phase=1.0, interval=1.0, cost=0.0)
    return RunRecord(run=idle, end=now + grace_s, stop=now, kept=0.0)


class ResizeSteps:
    """The replay's steps for §2c decisions: replay.py's `_Replay` has them, over its own state (the attributes
    below) and its event heap, run records and allocation (`_push`, `_record`, `_allocate`, `_pool_of`)."""

    now: float
    policy: Policy
    config: ReplayConfig
    work: WorkModel
    ledger: Ledger
    resizes: Resizes
    freed: bool

    def _rate(self, sim: SimJob) -> float:
        """Work per second of its current size (elastic.py); 1 for a plain job."""
        return 1.0 if sim.shape is None else throughput(sim.pods_now, sim.shape.count, self.config.elastic_alpha)

    def _push_growth(self, sim: SimJob) -> None:
        """An elastic job below its maximum wakes the replay once its growth interval has passed (§2c), as the
        live loop's periodic cycle would find it."""
        if sim.shape is not None and sim.pods_now < sim.shape.count:
            assert sim.run is not None
            self._push(due_at(sim.run.start, self.policy.grow_interval_s), GROW_DUE, sim)

    def _shrink(self, sim: SimJob, indexes: tuple[int, ...]) -> None:
        """§2c: the extra pods at `indexes` are SIGTERMed and hold their GPUs through the grace period (no longer
        borrowed: being released); the job goes on with the others, restarted from its last checkpoint."""
        assert sim.shape is not None and sim.run is not None
        kept, gone = split_extra(sim.extra, sim.extra_nodes, indexes)
        gpus = len(gone) * sim.shape.pod_gpus
        key, ledger = (self._pool_of(sim), sim.model), self.ledger
        ledger.add(ledger.borrowed, key, -gpus)  # extra pods always count Not in Quota
        ledger.add(ledger.releasing, key, gpus)
        pods = ShrunkPods(self.now + self.config.grace_s, sim.view.pods[0], gone, sim.model)
        self.resizes.shrunk(sim.view, pods)
        self._record(sim, grace_record(self.now, self.config.grace_s, gpus), resized_by=SHRINK)
        self._push(pods.exit_at, SHRUNK_EXIT, sim)
        sim.gpus -= gpus
        sim.out.shrinks += 1
        self._resize(sim, kept, SHRINK)

    def _grow(self, sim: SimJob, indexes: tuple[int, ...], nodes: tuple[str, ...]) -> None:
        """§2c: new extra pods start on `nodes` (Not in Quota); every worker restarts from the last checkpoint."""
        assert sim.shape is not None
        gpus = len(indexes) * sim.shape.pod_gpus
        key, ledger = (self._pool_of(sim), sim.model), self.ledger
        ledger.add(ledger.held, key, gpus)
        ledger.add(ledger.borrowed, key, gpus)
        self._allocate(gpus)
        sim.gpus += gpus
        sim.out.growths += 1
        self.resizes.grown(len(indexes))
        self._resize(sim, merge_extra(sim.extra, sim.extra_nodes, indexes, nodes), GROWTH)

    def _resize(self, sim: SimJob, extra: list[tuple[int, str]], kind: str) -> None:
        """End the current run at a resize (the work since its last completed save is redone) and start one at
        the new size, paying the restart overhead, as a run after a preemption does (work.py)."""
        now, run, work = self.now, sim.run, self.work
        assert run is not None
        _, _, saved = run.progress(now)
        self._record(sim, RunRecord(run=run, end=now, stop=now, kept=saved - run.base), resized_by=kind)
        sim.progress = saved
        sim.extra = tuple(index for index, _ in extra)
        sim.extra_nodes = tuple(node for _, node in extra)
        sim.resized_at, sim.resized_by = now, kind
        sim.run = Run(start=now, gpus=sim.gpus, base=saved, work=sim.duration, restart=work.restart_s,
                      phase=sim.phase, interval=work.interval_s, cost=work.cost_s, rate=self._rate(sim))
        sim.finish_at = sim.run.finish_at()
        sim.view = sim.running_view()
        sim.gen += 1  # cancels the completion and growth wake-up of the run that ended
        self._push(sim.finish_at, COMPLETE, sim)
        self._push_growth(sim)

    def _shrunk_exit(self, sim: SimJob) -> None:
        """Pods a shrink removed are gone: their GPUs are free."""
        pods = self.resizes.exited(sim.view)
        key, ledger = (self._pool_of(sim), pods.model), self.ledger
        ledger.add(ledger.held, key, -pods.gpus)
        ledger.add(ledger.releasing, key, -pods.gpus)
        self._allocate(-pods.gpus)
        self.freed = True
