"""Discrete-event replay of a trace in virtual time, over the production engine.

Events are arrivals, completions and "victim exited" (a preempted job's pods gone after the grace
period). The engine (`scheduler.engine.cycle.run_cycle`) runs when something happened: at the
time of an event, but no sooner than `cycle_s` after the previous cycle, so a burst of events is
handled by one cycle, as the live loop does when several wake-ups arrive while it is busy.
Events at the same instant as a cycle are applied before it. With `cycle_s = 0` every event time
gets its own cycle.

A preempted job keeps its GPUs for the whole grace period (the conservative case: its pods use all of it),
then exits and is queued again with its first queue time. Elastic jobs (DESIGN §2c, the model in elastic.py)
are given to the engine as the live loop gives them: pending, their base; running, their base and extra pods
with their last resize; the pods a shrink removed, as a terminating job of their own (`name~shrinking`) until
they exit after the grace period. A shrink or a growth restarts the job's run at the new size (resizes.py);
a running elastic job below its maximum wakes the replay when its growth interval has passed. How wall time turns into work (checkpoint saves at
a per-job phase, their cost, the restart overhead of a resumed run, the work redone after a preemption) is
work.py's; a victim whose run ends within the grace period finishes normally.

Two savings keep 82k-job replays fast without changing any decision (tests compare both ways):

- Pruning: pending jobs that are identical to the engine (same quota, pods, priority, idle mode)
  form a class; the engine takes a class in queue order, and if one of them cannot be placed, no
  later one can (it meets the same or a fuller cluster). At most `B` of a class can be admitted or
  nominated in one cycle, where `B` follows from the GPUs that the class could possibly get
  (ledger.py), so only the first `B` of each class go into the snapshot.
- Skipping: when nothing was freed since the last engine call and every job of the snapshot-to-be
  was already pending in that call, the engine would decide what it decided then (nothing), so
  the call is skipped. The cycle still counts for the `cycle_s` spacing.
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from scheduler.engine.types import (
    NOMINATED,
    RUNNING,
    TERMINATING,
    Decisions,
    Job,
    Node,
    Quota,
    Snapshot,
)

from . import fifo, resizes
from . import jobs as states
from .jobs import SimJob, build_jobs, fits_when_empty, replay_notes
from .ledger import JobClass, Ledger
from .limits import estimate_heads, note_first_estimates
from .model import JobOutcome, ReplayConfig, ReplayResult
from .policies import FIFO, PolicySetup, build_policy, quota_path
from .resizes import COMPLETE, EXIT, GROW_DUE, SHRUNK_EXIT
from .traces import Cluster, TraceJob
from .work import Run, RunRecord

Engine = Callable[[Snapshot], Decisions]


__all__ = ["Engine", "JobOutcome", "ReplayConfig", "ReplayResult", "replay"]


def replay(jobs: Sequence[TraceJob], cluster: Cluster, config: ReplayConfig, engine: Engine | None = None,
           progress: Callable[[str], None] | None = None) -> ReplayResult:
    """Replay `jobs` on `cluster` under `config.policy`; `engine` defaults to the production cycle."""
    if engine is None:
        from scheduler.engine.cycle import run_cycle

        engine = partial(run_cycle, estimates=config.estimates if config.limits != "none" else 0)  # §2d: with limits
    return _Replay(jobs, cluster, config, engine, progress).run()


class _Replay(resizes.ResizeSteps):
    def __init__(self, jobs: Sequence[TraceJob], cluster: Cluster, config: ReplayConfig, engine: Engine,
                 progress: Callable[[str], None] | None) -> None:
        self.config = config
        self.work = config.work_model()
        self.engine = engine
        self.progress = progress
        self.cluster = cluster
        self.setup: PolicySetup = build_policy(config.policy, cluster, jobs)
        if config.preempt_within:  # DESIGN §2b priority preemption inside every quota
            self.setup = replace(self.setup, quotas=tuple(replace(q, preempt_within=True) for q in self.setup.quotas))
        self.fifo = config.policy == FIFO
        self.nodes: tuple[Node, ...] = cluster.nodes
        self.quotas: tuple[Quota, ...] = self.setup.quotas
        self.node_model = {n.name: n.gpu_type for n in self.nodes}
        self.max_pod = max((n.gpus for n in self.nodes), default=0)
        quotas_by_name = {q.name: q for q in self.quotas}
        self.quota_pool = {q.name: q.pool for q in self.quotas}
        paths = {q.name: tuple(p.name for p in quota_path(q.name, quotas_by_name)) for q in self.quotas}
        self.ledger = Ledger(self.nodes, self.quotas, paths)
        self.sims, self.classes = build_jobs(jobs, self.setup, cluster, self.ledger, self.work, self.max_pod,
                                             config.limits, config.elastic_share)
        self.outcomes: list[JobOutcome] = [sim.out for sim in self.sims]
        self.by_name = {sim.out.name: sim for sim in self.sims}
        if len(self.by_name) != len(self.sims):
            raise ValueError("job names must be unique")

        self.active: dict[str, SimJob] = {}  # running, terminating and nominated jobs
        self.nonempty: dict[tuple, JobClass] = {}  # classes with pending jobs
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job index, gen)
        self.seq = 0
        self.allocated = 0
        self.allocation: list[tuple[float, int]] = [(0.0, 0)]
        self.runs: list[RunRecord] = []
        self.reclaim_latencies: list[float] = []
        self.nominated_to_start: list[float] = []
        self.freed = True  # something left the cluster since the last engine call
        self.left_pending: set[str] = set()  # pending in the last engine call and left pending
        self.preemptions = 0
        self.demotions = 0
        self.in_quota_preemptions = 0
        self.cycles = 0
        self.engine_calls = 0
        self.engine_s = 0.0
        self.now = 0.0
        self.last_event = 0.0
        self.feasible_cache: dict[tuple, bool] = {}
        self.policy = config.engine_policy()
        self.resizes = resizes.Resizes()  # §2c: shrinks and growths, and the pods shrinks removed until they exit
        self.growth_due = False  # an elastic job's growth interval passed since the last engine call
        # With a guard every starving job goes into the snapshot too (`_select`), and with the hold every class
        # head that could be its quota's holder; under fifo a quota's queue stops at its blocked head, so there
        # the guard turns pruning off. preempt_within (demotions add headroom and candidates within a cycle)
        # defeats the bound: no pruning.
        self.prune = config.prune and (config.starvation_s <= 0 or not self.fifo) and not config.preempt_within

    # --- the loop ------------------------------------------------------------------------------

    def run(self) -> ReplayResult:
        started = time.perf_counter()
        arrivals = sorted(range(len(self.sims)), key=lambda i: (self.sims[i].out.submit_s, i))
        total = len(arrivals)
        step = max(1, math.ceil(total * self.config.progress_every)) if self.config.progress_every else 0
        next_arrival = 0
        last_cycle = -math.inf
        cycle_at: float | None = None
        while True:
            t_arrival = self.sims[arrivals[next_arrival]].out.submit_s if next_arrival < total else math.inf
            t_event = self.events[0][0] if self.events else math.inf
            t_next = min(t_arrival, t_event)
            if cycle_at is not None and cycle_at < t_next:
                self.now = cycle_at
                self._cycle()
                last_cycle, cycle_at = cycle_at, None
                continue
            if t_next == math.inf:
                break
            self.now = t_next
            # At one instant, completions and exits come before arrivals (kinds are ordered).
            if t_event <= t_arrival:
                _, kind, _, index, gen = heapq.heappop(self.events)
                sim = self.sims[index]
                if kind == SHRUNK_EXIT:  # pods of their own: whatever became of their job since
                    self._shrunk_exit(sim)
                elif gen != sim.gen or (kind == GROW_DUE and sim.state != states.RUNNING):
                    continue  # superseded (a preempted or resized job's completion, a finished job's growth)
                elif kind == GROW_DUE:
                    self.growth_due = True
                elif kind == COMPLETE:
                    self._complete(sim)
                else:
                    self._exit(sim)
                self.last_event = self.now
            else:
                accepted = self._arrive(self.sims[arrivals[next_arrival]])
                self.last_event = self.now
                next_arrival += 1
                if step and (next_arrival % step == 0 or next_arrival == total) and self.progress:
                    self._report_progress(next_arrival, total, started)
                if not accepted:
                    continue  # refused at submission: nothing for the scheduler to do
            if cycle_at is None:
                cycle_at = max(self.now, last_cycle + self.config.cycle_s)
        self._censor()
        return ReplayResult(
            policy=self.config.name or self.config.policy,
            config=self.config,
            total_gpus=self.ledger.total_gpus,
            jobs=self.outcomes,
            reclaim_latencies_s=self.reclaim_latencies,
            nominated_to_start_s=self.nominated_to_start,
            allocation=self.allocation,
            runs=self.runs,
            preemptions=self.preemptions,
            demotions=self.demotions,
            in_quota_preemptions=self.in_quota_preemptions,
            **self.resizes.counts(),
            cycles=self.cycles,
            engine_calls=self.engine_calls,
            engine_s=self.engine_s,
            wall_s=time.perf_counter() - started,
            end_s=self.last_event,
            notes=replay_notes(self.setup.unguaranteed, self.outcomes, self.config),
        )

    def _censor(self) -> None:
        """Jobs still waiting when no event is left have queued until the end of the replay."""
        for sim in self.sims:
            if sim.state in (states.QUEUED, states.NOMINATED):
                sim.out.queued_s += self.last_event - sim.queued_at
                sim.out.censored = True

    def _report_progress(self, done: int, total: int, started: float) -> None:
        running = sum(1 for s in self.active.values() if s.state == states.RUNNING)
        pending = sum(len(c.queue) for c in self.nonempty.values())
        label = f"[{self.config.label}] " if self.config.label else ""
        assert self.progress is not None
        self.progress(
            f"{label}{100 * done / total:5.1f}% of arrivals, day {self.now / 86400:6.1f}: "
            f"{running} running, {pending} pending, {self.engine_calls} engine calls, "
            f"{time.perf_counter() - started:.0f} s"
        )

    # --- events --------------------------------------------------------------------------------

    def _push(self, at: float, kind: int, sim: SimJob) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, sim.index, sim.gen))

    def _arrive(self, sim: SimJob) -> bool:
        if not self._feasible(sim):
            sim.state = states.REJECTED
            sim.out.rejected = True
            return False
        self._enqueue(sim)
        return True

    def _complete(self, sim: SimJob) -> None:
        assert sim.run is not None
        self._record(sim, RunRecord(run=sim.run, end=self.now, stop=self.now, kept=sim.duration - sim.run.base))
        self._release(sim)
        sim.state = states.DONE
        sim.out.end_s = self.now
        sim.progress = sim.duration

    def _exit(self, sim: SimJob) -> None:
        """A victim's pods are gone: its GPUs are free; it queues again at once (jobs.requeue_after_exit)."""
        self._release(sim)
        sim.view = sim.pending_view
        if states.requeue_after_exit(sim):
            self._enqueue(sim)

    def _record(self, sim: SimJob, record: RunRecord, resized_by: str | None = None) -> None:
        """Keep a run that ended and add where its GPU-time went to its job's figures. `resized_by`: it ended at a
        shrink or growth (§2c), which caused its redone work and grace; a run begun at one owes it its restart."""
        self.runs.append(record)
        out = sim.out
        split = record.split(-math.inf, math.inf)
        out.useful_gpu_s += split["useful"]
        out.redone_gpu_s += split["redone"]
        out.checkpoint_gpu_s += split["checkpoint"]
        out.restart_gpu_s += split["restart"]
        out.grace_gpu_s += split["grace"]
        resizes.charge(out, resized_by, split["redone"] + split["grace"])
        resizes.charge(out, sim.resized_by, split["restart"])  # grace records of shrunk pods have no restart

    def _release(self, sim: SimJob) -> None:
        del self.active[sim.out.name]
        key = (self._pool_of(sim), sim.model)
        ledger = self.ledger
        ledger.add(ledger.held, key, -sim.gpus)
        if sim.state == states.TERMINATING:
            ledger.add(ledger.releasing, key, -sim.gpus)
        else:
            ledger.add(ledger.borrowed, key, -sim.borrowed_gpus)
        self._set_inq(sim, None)
        self._allocate(-sim.gpus)
        self.freed = True

    def _enqueue(self, sim: SimJob) -> None:
        sim.state = states.QUEUED
        sim.queued_at = self.now
        sim.nominated_at = None
        sim.in_quota = False
        cls = self.classes[sim.key]
        insort(cls.queue, (sim.out.submit_s, sim.out.name, sim.index))
        self.nonempty[sim.key] = cls

    def _dequeue(self, sim: SimJob) -> None:
        cls = self.classes[sim.key]
        entry = (sim.out.submit_s, sim.out.name, sim.index)
        position = bisect_left(cls.queue, entry)
        assert cls.queue[position] == entry
        del cls.queue[position]
        if not cls.queue:
            del self.nonempty[sim.key]

    def _allocate(self, delta: int) -> None:
        self.allocated += delta
        if self.allocation[-1][0] == self.now:
            self.allocation[-1] = (self.now, self.allocated)
        else:
            self.allocation.append((self.now, self.allocated))

    def _pool_of(self, sim: SimJob) -> str:
        return self.quota_pool[sim.view.quota]

    # --- one cycle -----------------------------------------------------------------------------

    def _cycle(self) -> None:
        self.cycles += 1
        if self.fifo:
            by_quota = fifo.head_of_line(self.nonempty.values(), self.ledger.bound if self.prune else None)
            selected = [self.sims[i] for indexes in by_quota.values() for i in indexes]
        else:
            selected = self._select()
        if (
            self.config.skip_unchanged
            and not self.config.timed
            and not self.freed
            and not self.growth_due
            and all(sim.out.name in self.left_pending for sim in selected)
        ):
            return
        decisions = self._decide(selected)
        while self.fifo:
            admitted = decisions.admitted
            cut = fifo.enforce(by_quota, lambda i, admitted=admitted: self.sims[i].out.name in admitted)
            if cut is None:
                break
            by_quota = cut
            selected = [self.sims[i] for indexes in by_quota.values() for i in indexes]
            decisions = self._decide(selected)
        self.freed = self.growth_due = False
        note_first_estimates(decisions, self.by_name, self.now)
        self._apply(decisions)
        self.left_pending = {s.out.name for s in selected if s.state == states.QUEUED}

    def _decide(self, selected: Sequence[SimJob]) -> Decisions:
        active = tuple(self._view(s) for s in self.active.values()) if self.config.safe_point else tuple(
            s.view for s in self.active.values())
        snapshot = Snapshot(
            nodes=self.nodes,
            quotas=self.quotas,
            jobs=active + self.resizes.exiting() + tuple(s.view for s in selected),
            now=self.now,
            policy=self.policy,
        )
        started = time.perf_counter()
        decisions = self.engine(snapshot)
        self.engine_s += time.perf_counter() - started
        self.engine_calls += 1
        return decisions

    def _view(self, sim: SimJob) -> Job:
        """A running borrower (or elastic job with extra pods, §2c) with its last checkpoint so far (a reclaim
        candidate's safe point, §2)."""
        if sim.state != states.RUNNING or (sim.in_quota and not sim.extra) or sim.run is None:
            return sim.view
        return replace(sim.view, checkpointed_at=sim.run.last_save_at(self.now))

    def _select(self) -> list[SimJob]:
        """The pending jobs that go into the snapshot: all, or the first `B` of each class."""
        sims = self.sims
        if not self.prune:
            return [sims[index] for cls in self.nonempty.values() for _, _, index in cls.queue]
        selected: list[SimJob] = []
        for cls in self.nonempty.values():
            offered = self.ledger.offered(cls, self.now, self.config.starvation_s, self.config.starvation_hold)
            selected.extend(sims[index] for _, _, index in cls.queue[:offered])
        if self.config.limits != "none":
            chosen = {s.index for s in selected}
            selected.extend(sims[i] for i in estimate_heads(self.nonempty.values(), self.quota_pool,
                                                            self.config.estimates) if i not in chosen)
        return selected

    def _apply(self, decisions: Decisions) -> None:
        ledger = self.ledger
        for name in decisions.demoted:  # preempt_within: still running, now Not in Quota
            self.freed = True  # a new reclaim candidate: jobs left pending may now reclaim it
            self.demotions += 1
            sim = self.by_name[name]
            sim.in_quota = False
            sim.view = replace(sim.view, in_quota=False, demoted=True)
            ledger.add(ledger.borrowed, (self._pool_of(sim), sim.model), sim.base_gpus)  # extra pods were already
            self._set_inq(sim, None)
        for name, preemption in decisions.preempted.items():
            self.in_quota_preemptions += preemption.within
            self._preempt(self.by_name[name])
        for name, shrink in decisions.shrunk.items():
            self._shrink(self.by_name[name], shrink.indexes)
        was_nominated = [s for s in self.active.values() if s.state == states.NOMINATED]
        for name, admission in decisions.admitted.items():
            self._start(self.by_name[name], admission.in_quota, admission.nodes, admission.gpu_type)
        for name, nodes in decisions.nominated.items():
            sim = self.by_name[name]
            if sim.state == states.QUEUED:
                self._dequeue(sim)
                self.active[name] = sim
            sim.state = states.NOMINATED
            if sim.nominated_at is None:
                sim.nominated_at = self.now
            sim.view = replace(sim.pending_view, phase=NOMINATED, nodes=tuple(nodes))
            self._set_inq(sim, self.node_model[nodes[0]] if nodes else None)
        for sim in was_nominated:
            if sim.state == states.NOMINATED and sim.out.name not in decisions.nominated:
                # Withdrawn by the engine: back to the queue, its reservation gone.
                del self.active[sim.out.name]
                self._set_inq(sim, None)
                sim.view = sim.pending_view
                queued_at, nominated_at = sim.queued_at, sim.nominated_at
                self._enqueue(sim)
                sim.queued_at, sim.nominated_at = queued_at, nominated_at
                self.freed = True
        for name in decisions.promoted:
            sim = self.by_name[name]
            sim.in_quota = True
            sim.view = replace(sim.view, in_quota=True, demoted=False)
            ledger.add(ledger.borrowed, (self._pool_of(sim), sim.model), -sim.base_gpus)  # §2c: the base only
            self._set_inq(sim, sim.model)
        for name, growth in decisions.grown.items():
            self._grow(self.by_name[name], growth.indexes, growth.nodes)

    def _start(self, sim: SimJob, in_quota: bool, nodes: tuple[str, ...], gpu_type: str | None) -> None:
        now, name, work = self.now, sim.out.name, self.work
        assert sim.state in (states.QUEUED, states.NOMINATED), f"engine admitted {name}, which is not waiting"
        if sim.state == states.QUEUED:
            self._dequeue(sim)
        model = gpu_type or (self.node_model[nodes[0]] if nodes else None)
        sim.state = states.RUNNING
        sim.in_quota = in_quota
        sim.model = model
        sim.gpus = sim.base_gpus  # an elastic job starts on its base (§2c)
        sim.extra, sim.extra_nodes, sim.resized_at, sim.resized_by = (), (), None, None
        sim.run = Run(
            start=now, gpus=sim.gpus, base=sim.progress, work=sim.duration,
            restart=work.restart_s if sim.stopped else 0.0, phase=sim.phase, interval=work.interval_s,
            cost=work.cost_s, rate=self._rate(sim),
        )
        sim.finish_at = sim.run.finish_at()
        sim.view = replace(sim.pending_view, phase=RUNNING, in_quota=in_quota, started_at=now, nodes=nodes)
        self.active[name] = sim
        key = (self._pool_of(sim), model)
        ledger = self.ledger
        ledger.add(ledger.held, key, sim.gpus)
        if in_quota:
            self._set_inq(sim, model)
        else:
            self._set_inq(sim, None)
            ledger.add(ledger.borrowed, key, sim.gpus)
        self._allocate(sim.gpus)
        sim.out.queued_s += now - sim.queued_at
        if sim.out.first_start_s is None:
            sim.out.first_start_s = now
            sim.out.first_in_quota = in_quota
        if sim.nominated_at is not None:
            self.reclaim_latencies.append(now - sim.queued_at)
            self.nominated_to_start.append(now - sim.nominated_at)
        sim.gen += 1
        self._push(sim.finish_at, COMPLETE, sim)
        self._push_growth(sim)

    def _preempt(self, sim: SimJob) -> None:
        """SIGTERM now; the pods exit after the grace period, losing the work since the last checkpoint."""
        now, grace = self.now, self.config.grace_s
        ledger = self.ledger
        key = (self._pool_of(sim), sim.model)
        if sim.in_quota:  # preempt_within: an In Quota victim stops counting against its quota
            self._set_inq(sim, None)
        ledger.add(ledger.borrowed, key, -sim.borrowed_gpus)
        ledger.add(ledger.releasing, key, sim.gpus)
        sim.state = states.TERMINATING
        sim.view = replace(sim.view, phase=TERMINATING)
        sim.out.preemptions += 1
        self.preemptions += 1
        if sim.finish_at <= now + grace:
            return  # it finishes its work inside the grace period: nothing is lost
        assert sim.run is not None
        _, _, saved = sim.run.progress(now)
        self._record(sim, RunRecord(run=sim.run, end=now + grace, stop=now, kept=saved - sim.run.base))
        sim.progress = saved
        sim.stopped = True
        sim.gen += 1  # cancels the scheduled completion
        self._push(now + grace, EXIT, sim)

    def _set_inq(self, sim: SimJob, model: str | None) -> None:
        """Count the job's GPUs against its quota path on `model` (None: not counted)."""
        if sim.inq is not None:
            old_model, gpus = sim.inq
            self.ledger.count_inq(sim.view.quota, old_model, -gpus)
            sim.inq = None
        if model is not None and sim.base_gpus:  # an elastic job's extra pods never count In Quota (§2c)
            self.ledger.count_inq(sim.view.quota, model, sim.base_gpus)
            sim.inq = (model, sim.base_gpus)

    def _feasible(self, sim: SimJob) -> bool:
        """Whether the job fits its pool when empty, asked of the engine itself (cached per shape)."""
        return fits_when_empty(self.engine, self.cluster, self.quota_pool[sim.view.quota], sim.pending_view.pods,
                               self.feasible_cache)

