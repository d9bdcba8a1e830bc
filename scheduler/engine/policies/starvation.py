"""Starvation guard (DESIGN §2b, `Policy.starvation_s`): drain sets kept for jobs that waited too long.

At the start of the cycle, on the snapshot's free capacity, a pending job (not nominated) whose wait
(`now` − queue time) exceeds its pool's `starvation_s` and whose only obstacle is capacity (`off`: it
fits in quota; `acceptable`, `only`: its `max` allows it) is starving. Taking starving jobs in pending
order, each gets a drain set: among the schedulable nodes of its pool that have its GPU model (any, if
its pods name none) and are in no earlier drain set, in the drain order, the shortest prefix on which
best fit would place its whole gang if those nodes were empty (none if no prefix does). The drain order
(docs/scheduling.md, refining §2b's "free GPUs, most first, then name"): earliest empty by planned ends
first (§2d), then free GPUs, then name; nodes holding a job without a time limit last. For the whole cycle, jobs after a starving job in pending order are placed off its drain
set and take only victims with a pod on a node they may use: the guard writes `CycleState.drain_sets`
and `CycleState.keep_off`, which placement (`placement.place_job`) and victim selection honour;
nominated jobs ignore drain sets. The failure memos are switched off when drain sets exist:
restrictions that differ from job to job break the memos' reasoning.

`starvation_hold` (Tidepool's extension, docs/scheduling.md): in each quota, the first job in
pending order that waited past `starvation_s`, is not `only`, and whose request fits its quota's and
every ancestor's `min` (with `max` allowing it) is the quota's *holder*: it is starving even when what
stops it is its own quota's use, and once the in-quota pass has tried it and it is still pending,
what is left of its request in the guarantee of its quota and ancestors is held for it — later jobs
and promotions cannot take it — until the cycle ends.
Without it a gang whose quota's own small jobs take each GPU of guarantee as it frees never fits
in quota, so §2b never calls it starving.

Backfill (DESIGN §2d, `_Backfill`): each starving job's planned start is fixed with its drain set (the
latest planned end of the jobs running on it; unknown if one has no time limit), and a later job whose
own planned end (`now` + its time limit) is no later than that start may be placed on the drain set
(and take victims there); without a limit of its own, or behind an unknown start, it keeps off it.
Under starvation_hold a holder's planned start is the later of its drain set's and its quota's (when
the In Quota jobs it needs gone reach their planned ends, `_quota_free_at`); a later job may use the
guarantee held for it (`lend_holds`) when it ends by the later of its quota's start and the earliest its
gang could have nodes at all (`_lend_until`), a bound that does not move with other jobs' drain sets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..capacity import NodeState
from ..placement import equal_pods_held, scan_place
from ..reasons import NeverFits, Reason, Refused, Starving
from ..resources import Resources, vector
from ..time_limits import planned_end, time_limit
from ..types import IDLE_OFF, IDLE_ONLY, NOMINATED, RUNNING, Job
from .base import CyclePolicy

if TYPE_CHECKING:
    from ..demand import Demand
    from ..state import CycleState


Hold = tuple[str, Resources]  # starvation_hold: (quota, request) a starving job keeps in its quota


class StarvationGuard(CyclePolicy):
    def __init__(self) -> None:
        self.lend_until: dict[str, float | None] = {}  # starvation_hold: holder -> until when its hold may be lent (§2d)

    def before_cycle(self, state: CycleState) -> None:
        state.drain_sets, state.keep_off = drain_sets(state, self.lend_until)

    def lend_holds(self, state: CycleState, demand: Demand) -> Callable[[], None] | None:
        """§2d backfill on the quota hold: a job whose planned end (`now` + its limit) is no later than
        `_lend_until` of a holder may use what is held for that holder (it is back before the holder can
        start); returns how to hold it again once the in-quota pass has tried the job."""
        quotas = state.quotas
        if not quotas.holding:
            return None
        job = demand.job
        limit = time_limit(job, state.snapshot.policy_of(demand.pool or ""))
        if limit is None:
            return None
        end = (state.now or 0.0) + limit
        lent = [holder for holder in quotas.holding if holder != job.name
                and (start := self.lend_until.get(holder)) is not None and end <= start]
        if not lent:
            return None
        for holder in lent:
            quotas.unhold_for(holder)

        def hold_again() -> None:
            for holder in lent:
                quotas.hold_for(holder)
        return hold_again

    def hold(self, state: CycleState, demand: Demand) -> None:
        state.quotas.hold_for(demand.job.name)  # a holder still pending after the in-quota pass

    def release_hold(self, state: CycleState, demand: Demand) -> None:
        state.quotas.unhold_for(demand.job.name)  # running now: its hold ends with its wait

    def end_of_cycle(self, state: CycleState) -> None:
        state.quotas.end_holds()

    def explain(self, state: CycleState, demand: Demand, reason: Reason) -> Reason:
        nodes = state.drain_sets.get(demand.job.name)
        if nodes is None or isinstance(reason, Refused | NeverFits):
            return reason
        return Starving(reason, nodes)


def drain_sets(state: CycleState, lend_until: dict[str, float | None] | None = None,
               ) -> tuple[dict[str, tuple[str, ...]], dict[str, frozenset[NodeState]]]:
    """(starving job -> its drain set's node names, job -> the nodes it must not use); under
    starvation_hold the quotas' holders go to `state.quotas.holders` and until when what is held for each
    may be lent (§2d, `_lend_until`) to `lend_until`. When some job must keep off nodes or
    a quota is held, the failure memos are switched off."""
    snapshot = state.snapshot
    now = snapshot.now
    starving: dict[str, tuple[str, ...]] = {}
    avoid: dict[str, frozenset[NodeState]] = {}
    holds: dict[str, Hold] = {}
    policies = (snapshot.policy, *snapshot.policies.values())
    if now is None or all(p.starvation_s <= 0 for p in policies):
        return starving, avoid
    drained: set[NodeState] = set()
    # §2d backfill: each drain set so far with its starving job's planned start (None: unknown)
    backfill = _Backfill(state)
    # Schedulable nodes in no drain set yet, in drain-set order (`_Backfill.drain_order`), sorted at the
    # first starving job: most cycles have none.
    undrained: list[NodeState] | None = None
    order: list[NodeState] = []  # every schedulable node in drain-set order (for holders' lending bound)
    # Gangs (pool, model, pod sizes) that found no prefix: the undrained nodes only shrink, so neither
    # will any later job of the same gang shape in this cycle.
    no_prefix: set[tuple] = set()
    kept: frozenset[NodeState] = frozenset()
    held_quotas: set[str] = set()  # starvation_hold: quotas with a holder already
    # inq counts nominated jobs (DESIGN §2): charged while deciding who fits in quota, then taken back
    nominated = [(d, _nominated_model(state, d)) for d in state.queue if d.job.phase == NOMINATED and d.pool]
    for demand, model in nominated:
        state.quotas.charge(demand.job.quota, demand.request(model), in_quota=True)
    for demand in state.queue:
        job = demand.job
        if job.phase == NOMINATED:
            continue
        if kept:
            keep_off = backfill.keep_off(job, kept)
            if keep_off:
                avoid[job.name] = keep_off
        policy = snapshot.policy_of(demand.pool or "")
        limit = policy.starvation_s
        if limit <= 0 or now - job.submitted_at <= limit:
            continue
        # One holder per quota, the first in pending order: the jobs behind it wait for it anyway, and
        # counting every long-waiting job of a backlogged quota as starving would hand out drain sets
        # until no node is left for anyone (a Philly replay under `strict` did exactly that).
        hold = _hold(state, demand) if policy.starvation_hold and job.quota not in held_quotas else None
        if hold is None and not _only_capacity(state, demand):
            continue
        if hold is not None:
            holds[job.name] = hold
            held_quotas.add(job.quota)
        gang = (demand.pool, demand.model, tuple(size[1:] for size in demand.order))
        if undrained is None:
            undrained = order = backfill.drain_order()
        prefix = [] if gang in no_prefix else _shortest_prefix(demand, [
            n for n in undrained if n.pool == demand.pool and (demand.model is None or n.model == demand.model)])
        # A holder cannot start before its quota has room either: its drain set's planned start is the
        # later of the two, so jobs that end before it may use the drain set and the held guarantee.
        quota_start = _quota_free_at(state, hold) if hold is not None else None
        if prefix:
            starving[job.name] = tuple(n.name for n in prefix)
            drained.update(prefix)
            kept = frozenset(drained)
            backfill.add(job.name, prefix, not_before=quota_start if hold is not None else now)
            undrained = [n for n in undrained if n not in drained]
        else:
            no_prefix.add(gang)
            starving[job.name] = ()
        if hold is not None and lend_until is not None:
            lend_until[job.name] = _lend_until(backfill, demand, quota_start, order) if prefix else None
    for demand, model in nominated:
        state.quotas.release(demand.job.quota, demand.request(model))
        state.quotas.demote(demand.job.quota, demand.request(model))
    state.quotas.holders = holds
    if avoid or holds:
        state.memos.off()
    return starving, avoid


class _Backfill:
    """DESIGN §2d backfill: a starving job's planned start is the latest planned end of the running (and
    nominated) jobs on its drain set — `now` if none, unknown if one has no time limit. A later job whose
    own planned end (`now` + its limit) is no later than that start may use the drain set; one with no
    limit, or behind an unknown start, keeps off it, as without backfill."""

    def __init__(self, state: CycleState) -> None:
        self.state = state
        self.sets: list[tuple[frozenset[NodeState], float | None]] = []  # (drain set, planned start)
        self.avoids: dict[tuple[bool, ...], frozenset[NodeState]] = {}  # which sets kept -> their union
        self.ends: dict[str, list[float | None]] | None = None  # node -> planned ends of the jobs on it
        self.starts: dict[str, float | None] = {}  # starving job -> planned start

    def _ends(self) -> dict[str, list[float | None]]:
        if self.ends is None:
            snapshot = self.state.snapshot
            now = snapshot.now or 0.0
            self.ends = {}
            for job in snapshot.jobs:
                if job.phase not in (RUNNING, NOMINATED):
                    continue
                policy = snapshot.policy_of(self.state.quotas.pool(job.quota) or "")
                if job.phase == RUNNING:
                    end = planned_end(job, policy)
                else:  # a nominated job starts once its victims are gone: about now
                    limit = time_limit(job, policy)
                    end = now + limit if limit is not None else None
                for node in set(job.nodes):
                    self.ends.setdefault(node, []).append(end)
        return self.ends

    def free_at(self, node: NodeState) -> float:
        """When the node is empty by planned ends: the latest planned end of the running and nominated jobs
        with a pod on it (`now` if none, or if all are past their end); infinity if one has no limit."""
        now = self.state.now or 0.0
        ends = self._ends().get(node.name, ())
        if any(end is None for end in ends):
            return math.inf
        return max([now, *ends])  # type: ignore[type-var]

    def drain_order(self) -> list[NodeState]:
        """The schedulable nodes in the order drain sets take them: the earliest empty by planned ends first
        (Slurm's reservation: a gang's planned start is then the earliest its nodes can all be free), then
        the most free GPUs, then the name; nodes holding a job without a limit last, by free GPUs and name,
        which without limits is §2b's order. Ordered by free GPUs alone, a drain set took nodes that run
        jobs for weeks, so its planned start was weeks away, every job with a limit backfilled onto it, and
        the set moved from cycle to cycle to whichever nodes were freest (docs/scheduling.md)."""
        nodes = [n for n in self.state.capacity.nodes.values() if n.schedulable]
        return sorted(nodes, key=lambda n: (self.free_at(n), -n.free_g, n.name))

    def add(self, job: str, drain: Sequence[NodeState], not_before: float | None = None) -> None:
        """`not_before`: the earliest the job could start for another reason (its quota; None: unknown)."""
        now = self.state.now or 0.0
        ends = [end for node in drain for end in self._ends().get(node.name, ())]
        known = not_before is not None and all(end is not None for end in ends)
        start = max([now, not_before, *ends]) if known else None  # type: ignore[type-var]
        self.starts[job] = start
        self.sets.append((frozenset(drain), start))

    def keep_off(self, job: Job, kept: frozenset[NodeState]) -> frozenset[NodeState]:
        """The drain-set nodes `job` must keep off: all of them unless it ends before some sets' starts."""
        state = self.state
        limit = time_limit(job, state.snapshot.policy_of(state.quotas.pool(job.quota) or ""))
        if limit is None:
            return kept
        end = (state.now or 0.0) + limit
        which = tuple(start is None or end > start for _, start in self.sets)
        if all(which):
            return kept
        avoid = self.avoids.get(which)
        if avoid is None:
            avoid = self.avoids[which] = frozenset().union(*(nodes for (nodes, _), keep in zip(self.sets, which,
                                                                                            strict=True) if keep))
        return avoid


def _hold(state: CycleState, demand: Demand) -> Hold | None:
    """starvation_hold: what the job would keep in its quota — its request on the first model that its
    quota and every ancestor guarantee in full and that `max` allows; None for `only` jobs and jobs
    no quota state could let in."""
    if demand.job.idle == IDLE_ONLY or state.refusal(demand) is not None:
        return None
    quota = demand.job.quota
    for model in state.models(demand):
        request = demand.request(model)
        if state.quotas.could_fit(quota, request) and state.quotas.max_shortfall(quota, request) is None:
            return quota, request
    return None


def _lend_until(backfill: _Backfill, demand: Demand, quota_start: float | None,
                order: Sequence[NodeState]) -> float | None:
    """Until when the guarantee held for a holder may be lent (§2d backfill on the hold): the later of its
    quota's planned start and the earliest its gang could have nodes at all — the drain-order prefix of
    every schedulable node, whatever earlier starving jobs take this cycle. Not its drain set's start:
    that moves from cycle to cycle with the other starving jobs (a Philly replay's holder saw 58 h, then
    549 h, then 75 h), and a lent job runs to its own end, so lending against a late start of one cycle
    pushed the quota's start, and the gang's, later for good. None (lend nothing): unknown."""
    if quota_start is None:
        return None
    nodes = _shortest_prefix(demand, [n for n in order if n.pool == demand.pool
                                      and (demand.model is None or n.model == demand.model)])
    if not nodes:
        return None
    nodes_free = max(backfill.free_at(n) for n in nodes)
    return None if nodes_free == math.inf else max(quota_start, nodes_free)


def _quota_free_at(state: CycleState, hold: Hold) -> float | None:
    """When the holder's quota and every ancestor have room for its request by the planned ends of the In
    Quota jobs (running and nominated) that hold their guarantee: `now` if they have it now, None
    (unknown) if that needs a job without a limit. Called with nominated jobs charged (`drain_sets`)."""
    name, request = hold
    quotas = state.quotas
    now = state.now or 0.0
    start = now
    frees: list[tuple[float, tuple, Resources]] | None = None
    for qnode in quotas.get(name).chain:  # type: ignore[union-attr]  # a holder's quota exists
        short = {key: need - qnode.room.get(key, 0) for key, need in request.items() if need > qnode.room.get(key, 0)}
        if not short:
            continue
        if frees is None:
            frees = sorted(_in_quota_ends(state), key=lambda f: f[0])
        for end, chain, held in frees:
            if qnode not in chain:
                continue
            for key in list(short):
                short[key] -= held.get(key, 0)
                if short[key] <= 0:
                    del short[key]
            if not short:
                if end == math.inf:
                    return None
                start = max(start, end)
                break
        if short:
            return None
    return start


def _in_quota_ends(state: CycleState) -> list[tuple[float, tuple, Resources]]:
    """(planned end, quota chain, guarantee held) of each In Quota running job and nominated job;
    infinity for one without a limit, `now` + its limit for a nominated one (it starts about now)."""
    snapshot = state.snapshot
    quotas = state.quotas
    now = state.now or 0.0
    ends: list[tuple[float, tuple, Resources]] = []
    for job in snapshot.jobs:
        if not ((job.phase == RUNNING and job.in_quota) or job.phase == NOMINATED):
            continue
        qnode = quotas.get(job.quota)
        if qnode is None:
            continue
        policy = snapshot.policy_of(qnode.pool)
        if job.phase == RUNNING:
            end = planned_end(job, policy)
        else:
            limit = time_limit(job, policy)
            end = now + limit if limit is not None else None
        base = job.pods[:job.base_count]  # extra pods of an elastic job are never In Quota (§2c)
        model = next((node.model for pod, name in zip(base, job.nodes, strict=False) if pod.gpus
                      and (node := state.capacity.nodes.get(name)) is not None), None)
        held = vector(sum(p.gpus for p in base), model, sum(p.cpu_m for p in base), sum(p.memory_mib for p in base))
        ends.append((math.inf if end is None else end, qnode.chain, held))
    return ends


def _nominated_model(state: CycleState, demand: Demand) -> str | None:
    if demand.model is not None or not demand.gpus:
        return demand.model
    node = state.capacity.nodes.get(demand.job.nodes[0]) if demand.job.nodes else None
    return node.model if node is not None else None


def _only_capacity(state: CycleState, demand: Demand) -> bool:
    """Its quota lets it in on some model: `off` fits in quota, the others' `max` allows it."""
    if state.refusal(demand) is not None:
        return False
    check = state.quotas.shortfall if demand.job.idle == IDLE_OFF else state.quotas.max_shortfall
    return any(check(demand.job.quota, demand.request(model)) is None for model in state.models(demand))


def _shortest_prefix(demand: Demand, nodes: Sequence[NodeState]) -> list[NodeState]:
    """The shortest prefix of `nodes` on which the gang fits when they are empty, on one model."""
    counts: dict[str | None, int] = {}
    for k in range(1, len(nodes) + 1):
        node = nodes[k - 1]
        if demand.shape is not None:  # equal pods: the count only grows with the prefix
            key = node.model if demand.gpus else None
            counts[key] = counts.get(key, 0) + equal_pods_held(demand.shape, (node.cap_g, node.cap_c, node.cap_m),
                                                               demand.count)
            if counts[key] >= demand.count:
                return list(nodes[:k])
            continue
        models = {n.model for n in nodes[:k]} if demand.gpus else {None}
        for model in sorted(models, key=str):
            empty = {n: (n.cap_g, n.cap_c, n.cap_m) for n in nodes[:k] if model in (None, n.model)}
            if scan_place(demand.order, empty):
                return list(nodes[:k])
    return []
