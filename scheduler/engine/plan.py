"""Start estimates (DESIGN §2d): after the cycle's decisions, every pending job gets the earliest time
≥ `now` at which it could start, or None with the reason there is none.

The plan works on *timelines*: for each schedulable node, its free capacity from `now` on (free plus
unreserved being-released capacity now, then what each running, admitted or nominated job frees at its
planned end: its run's start, or `now` for this cycle's, plus its time limit; a job with no limit frees
nothing); for each quota level, its room (`min − inq`) from `now` on, growing as In Quota jobs reach
their planned ends. Pending jobs are taken in pending order; each one is tried at `now` and then at
every time some timeline of its pool grows, ascending; at a time `t` it needs, over its whole run
`[t, t + limit)` (for ever without a limit):
- §2 placement (gang, best fit) on the least capacity each node has over that run;
- for an `off` job (it needs its quota), room in its quota and every ancestor for its request;
and the first `t` where both hold is its estimate. Its plan then holds the capacity (and, for an
`off` job, the room) it was placed on over that run, so later jobs plan around it. A job that finds
no such time even after every known end waits on a job with no time limit: "unknown: depends on jobs
with no time limit". A job the pool or its quota can never hold gets "unknown: it cannot run in this
pool as it is"; its plan holds nothing, nor does an unknown one's.

Kept out of the plan: `max` (the plan is about capacity and guarantees), drain sets (a starving job's
own start is fixed by the guard, `policies/starvation.py`), and the growth of elastic jobs.

Cost: a try is a scan of its pool's nodes, so only the first `EXACT_PER_POOL` pending jobs of each
pool (pending order) are planned exactly; the next `ROUGH_PER_POOL` get a rough estimate from the pool's
aggregate capacity (`plan_rough`), the ones after "unknown: far back in the queue" (docs/scheduling.md
gives the measured cost). The lower bound of a job's start (`_bound`, a scan of the nodes) starts from
the bound found for a smaller or equal pod and run, which plans can only have moved later, and stops at
the first node that can start there.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .fit import tightest
from .plan_rough import RoomParts, RoughPlan
from .plan_timelines import FOREVER, RoomLine, Timeline
from .resources import vector
from .time_limits import planned_end, time_limit
from .types import (
    IDLE_OFF,
    RUNNING,
    UNKNOWN_FAR_BACK,
    UNKNOWN_NEVER,
    UNKNOWN_NO_LIMIT,
    Estimate,
    Job,
    Pod,
    Policy,
)

if TYPE_CHECKING:
    from .capacity import NodeState
    from .demand import Demand
    from .quota import QuotaNode
    from .state import CycleState

# Pending jobs per pool given an exact estimate (pending order) by default (`run_cycle(estimates=...)`);
# measured in docs/scheduling.md.
EXACT_PER_POOL = 20
# Pending jobs per pool after the exact ones given a rough estimate (`plan_rough`); measured in docs/scheduling.md.
ROUGH_PER_POOL = 500
FAR_BACK = Estimate(None, UNKNOWN_FAR_BACK)  # one value for the many jobs past the exact ones


class _Plan:
    """The timelines of one cycle's plan; `estimate(demand)` plans one job after those before it."""

    def __init__(self, state: CycleState) -> None:
        self.state = state
        self.now: float = state.now  # type: ignore[assignment]
        self.lines: dict[NodeState, Timeline] = {}
        self.by_group: dict[tuple[str, str | None], list[tuple[NodeState, Timeline]]] = {}
        self.times: dict[str, list[float]] = {}  # pool -> times some timeline grows (and now), ascending
        self.rooms: dict[QuotaNode, RoomLine] = {}
        # (pool, model) -> (GPUs, CPU, memory, run, the earliest a node held them): floors for `_bound`
        self.bounds: dict[tuple[str, str | None], list[tuple[int, int, int, float, float]]] = {}
        self.rough: RoughPlan | None = None  # made for the first job past the exact ones
        now = self.now
        for node in state.capacity.nodes.values():
            if not node.schedulable:
                continue
            g, c, m = node.free_g + node.rel_g, node.free_c + node.rel_c, node.free_m + node.rel_m
            line = self.lines[node] = Timeline(now, g, c, m)
            self.by_group.setdefault((node.pool, node.model), []).append((node, line))
            self.by_group.setdefault((node.pool, None), []).append((node, line))
            self.times.setdefault(node.pool, [now])
        self.pool_ends: set[tuple[str, float]] = set()  # (pool, a time some node's capacity comes back)
        self.node_releases: dict[NodeState, list[tuple[float, int, int, int]]] = {}
        # (quota, model, end) -> what its In Quota jobs give back to its guarantee then
        self.quota_ends: dict[tuple[str, str | None, float], tuple[int, int, int]] = {}
        self._load_ends()
        # a quota level -> what its In Quota jobs give back, and when: made for a level when a scan needs it
        self.room_releases: dict[QuotaNode, list[tuple[float, dict[str, int]]]] = {}
        self.room_holds: dict[QuotaNode, list[tuple[float, float, dict[str, int]]]] = {}  # the exact plans' holds
        for node, releases in self.node_releases.items():
            for _, g, c, m in (r for r in releases if r[0] <= now):
                self.lines[node].add(now, FOREVER, g, c, m)
            self.lines[node].grow_at([r for r in releases if r[0] > now])
        ends_by_pool: dict[str, set[float]] = {}
        for pool, end in self.pool_ends:
            if end > now:
                ends_by_pool.setdefault(pool, set()).add(end)
        for pool, ends in ends_by_pool.items():
            self.times[pool] = sorted({*self.times[pool], *ends})

    # --- building: what running, admitted and nominated jobs free at their planned ends -----------------

    def _policy_limit(self, job: Job) -> float | None:
        return time_limit(job, self.state.snapshot.policy_of(self.state.quotas.pool(job.quota) or ""))

    def _load_ends(self) -> None:
        state = self.state
        decided = state.decisions
        snapshot = state.snapshot
        now = self.now
        node_of = state.capacity.nodes
        policies: dict[str, Policy | None] = {}  # quota -> its pool's policy (None: unknown quota)
        preempted, promoted, demoted = decided.preempted, set(decided.promoted), set(decided.demoted)
        for job in snapshot.jobs:
            if job.phase != RUNNING or job.name in preempted:
                continue
            policy = policies.get(job.quota, False)
            if policy is False:
                pool = state.quotas.pool(job.quota)
                policy = policies[job.quota] = snapshot.policy_of(pool) if pool is not None else None
            if policy is None:
                continue
            end = planned_end(job, policy)  # type: ignore[arg-type]
            if end is None:
                continue  # it frees nothing the plan can count on
            if end < now:
                end = now
            if job.elastic is None:
                model = self._free_pods(zip(job.pods, job.nodes, strict=False), end, node_of)
                if (job.in_quota or job.name in promoted) and job.name not in demoted:
                    self._free_room(job.quota, job.pods, model, end)
                continue
            pods = list(zip(job.pods, job.nodes, strict=False))  # an elastic job: its pods now
            shrink = decided.shrunk.get(job.name)
            if shrink is not None:  # shrunk pods are being released already
                gone = {job.base_count + k for k, index in enumerate(job.elastic.extra) if index in shrink.indexes}
                pods = [p for k, p in enumerate(pods) if k not in gone]
            growth = decided.grown.get(job.name)
            if growth is not None:
                pod = next(p for p in job.pods if p.role == job.elastic.role)
                pods += [(pod, name) for name in growth.nodes]
            model = self._free_pods(pods, end, node_of)
            if (job.in_quota or job.name in promoted) and job.name not in demoted:
                self._free_room(job.quota, job.pods[:job.base_count], model, end)
        admitted, nominated = decided.admitted.get, decided.nominated.get
        for demand in state.queue:
            job = demand.job
            admission = admitted(job.name)
            nodes = admission.nodes if admission is not None else nominated(job.name)
            if nodes is None:
                continue
            policy = policies.get(job.quota, False)
            if policy is False:
                pool = state.quotas.pool(job.quota)
                policy = policies[job.quota] = snapshot.policy_of(pool) if pool is not None else None
            limit = time_limit(job, policy) if policy is not None else None  # type: ignore[arg-type]
            if limit is None:
                continue
            model = self._free_pods(list(zip(job.pods, nodes, strict=False)), now + limit, node_of)
            if admission is None or admission.in_quota:  # a nominated job counts In Quota
                self._free_room(job.quota, job.pods, model, now + limit)

    def _free_pods(self, pods: Iterable[tuple[Pod, str]], end: float, node_of: dict[str, NodeState]) -> str | None:
        """The pods' capacity comes back at `end`; returns the job's GPU model."""
        model = pool = None
        lines, releases = self.lines, self.node_releases
        for pod, name in pods:
            node = node_of.get(name)
            if node is None or node not in lines:
                continue
            held = releases.get(node)
            if held is None:
                releases[node] = [(end, pod.gpus, pod.cpu_m, pod.memory_mib)]
            else:
                held.append((end, pod.gpus, pod.cpu_m, pod.memory_mib))
            if pod.gpus:
                model = node.model
            pool = node.pool
        if pool is not None:  # a job's pods are in one pool
            self.pool_ends.add((pool, end))
        return model

    def _add(self, node: NodeState, start: float, end: float, g: int, c: int, m: int) -> None:
        self.lines[node].add(start, end, g, c, m)

    def _room(self, qnode: QuotaNode) -> RoomLine:
        line = self.rooms.get(qnode)
        if line is None:  # most levels' room covers every request: their releases are never needed
            line = self.rooms[qnode] = RoomLine(self.now, qnode.room, lambda: self._releases(qnode))
        return line

    def _releases(self, level: QuotaNode) -> list[tuple[float, dict[str, int]]]:
        """What the In Quota jobs of the level's subtree give back to it, and when."""
        releases = self.room_releases.get(level)
        if releases is None:
            quotas = self.state.quotas
            releases = self.room_releases[level] = [
                (end, vector(g, model, c, m)) for (quota, model, end), (g, c, m) in self.quota_ends.items()
                if (qnode := quotas.get(quota)) is not None and level in qnode.chain]
        return releases

    def _room_parts(self, level: QuotaNode) -> RoomParts:
        """A quota level's room now, what comes back to it and when, and what the exact plans hold of it."""
        return level.room, self._releases(level), self.room_holds.get(level, [])

    def _free_room(self, quota: str, pods: Iterable[Pod], model: str | None, end: float) -> None:
        g = c = m = 0
        for pod in pods:
            g, c, m = g + pod.gpus, c + pod.cpu_m, m + pod.memory_mib
        key = (quota, model, end)
        total = self.quota_ends.get(key)
        self.quota_ends[key] = (g, c, m) if total is None else (total[0] + g, total[1] + c, total[2] + m)

    # --- planning one job ------------------------------------------------------------------------------

    def estimate(self, demand: Demand, rough: bool = False) -> Estimate:
        """The job's estimate after those of the jobs before it; `rough`: on the aggregates (`plan_rough`)."""
        state = self.state
        job = demand.job
        if state.refusal(demand) is not None or state.never_fits(demand) is not None:
            return Estimate(None, UNKNOWN_NEVER)
        pool = demand.pool or ""
        limit = self._policy_limit(job)
        duration = limit if limit is not None else FOREVER
        needs_quota = job.idle == IDLE_OFF
        models = state.models(demand)
        qnode = state.quotas.get(job.quota)
        if needs_quota:
            models = [m for m in models if state.quotas.could_fit(job.quota, demand.request(m))]
            if not models or qnode is None:
                return Estimate(None, UNKNOWN_NEVER)
        if rough:
            if self.rough is None:
                self.rough = RoughPlan(self.now, lambda p, m: self.by_group.get((p, m), ()), self._room,
                                       self._room_parts)
            return self.rough.estimate(demand, models, duration, qnode.chain if needs_quota else None)  # type: ignore[union-attr]
        least_g = min(s[1] for s in demand.order)
        least_c = min(s[2] for s in demand.order)
        least_m = min(s[3] for s in demand.order)
        # A lower bound on the start, per model: the earliest time some node holds the largest pod, and the
        # quota (for an `off` job) the request, for the whole run: one pass over the nodes and one over the
        # quota's levels; for a one-pod job it is most often the answer.
        _, big_g, big_c, big_m = demand.order[0]
        earliest: dict[str | None, float] = {}
        # per model, the nodes that can start the largest pod at its bound when all were scanned: for a gang
        # of one pod size, the only nodes placement can use at that time
        at_bound: dict[str | None, tuple[float, list[tuple[NodeState, Timeline]] | None]] = {}
        for model in models:
            at_bound[model] = self._bound(pool, model, big_g, big_c, big_m, duration)
            bound = at_bound[model][0]
            if needs_quota and bound < FOREVER:
                request = demand.request(model)
                bound = max([bound, *(line.earliest(request, duration, bound) for level in qnode.chain  # type: ignore[union-attr]
                                      if not (line := self._room(level)).always_covers(request))])
            earliest[model] = bound
        first = min(earliest.values(), default=FOREVER)
        if first == FOREVER:
            return Estimate(None, UNKNOWN_NO_LIMIT)
        times = self.times[pool]
        for t in times[bisect_left(times, first):]:
            end = t + duration
            for model in models:
                if t < earliest[model]:
                    continue
                request = demand.request(model)
                if needs_quota and not all(line.always_covers(request) or line.holds(t, end, request)
                                           for level in qnode.chain  # type: ignore[union-attr]
                                           for line in (self._room(level),)):
                    continue
                node_bound, nodes = at_bound[model]
                if nodes is None or demand.shape is None or t != node_bound:
                    nodes = self.by_group.get((pool, model), [])
                placed = self._place(demand, nodes, t, end, (least_g, least_c, least_m))
                if placed is None:
                    continue
                for node, pg, pc, pm in placed:
                    self._add(node, t, end, -pg, -pc, -pm)
                if needs_quota:
                    for level in qnode.chain:  # type: ignore[union-attr]
                        self._room(level).add(t, end, request, -1)
                        self.room_holds.setdefault(level, []).append((t, end, request))
                if end < FOREVER and times[bisect_left(times, end) % len(times)] != end:
                    insort(times, end)  # capacity comes back at the plan's end: a new time to try
                return Estimate(t)
        return Estimate(None, UNKNOWN_NO_LIMIT)

    def _bound(self, pool: str, model: str | None, g: int, c: int, m: int,
               duration: float) -> tuple[float, list[tuple[NodeState, Timeline]] | None]:
        """The earliest time some node of (pool, model) holds (g, c, m) for `duration`, and the nodes that
        can start it then (None when the scan stopped early). Plans only take capacity, so an earlier answer
        for a pod and run no larger is a floor: the scan starts there and stops at the first node that can
        start there."""
        found = self.bounds.setdefault((pool, model), [])
        floor = max((t for fg, fc, fm, fd, t in found if fg <= g and fc <= c and fm <= m and fd <= duration),
                    default=self.now)
        bound = FOREVER
        at: list[tuple[NodeState, Timeline]] | None = []
        for pair in self.by_group.get((pool, model), ()):
            t = pair[1].earliest(g, c, m, duration, floor)
            if t < bound:
                bound = t
                if t <= floor:
                    at = None
                    break
                at = [pair]
            elif t == bound and t < FOREVER:
                at.append(pair)  # type: ignore[union-attr]
        found.append((g, c, m, duration, bound))
        return bound, at

    def _place(self, demand: Demand, nodes: Iterable[tuple[NodeState, Timeline]], start: float, end: float,
               least: tuple[int, int, int]) -> list[tuple[NodeState, int, int, int]] | None:
        """§2 placement over the least capacity each of `nodes` has during `[start, end)`."""
        lg, lc, lm = least
        available: dict[NodeState, list[int]] = {}
        for node, line in nodes:
            amounts = line.least_at_least(start, end, lg, lc, lm)
            if amounts is not None:
                available[node] = amounts
        placed: list[tuple[NodeState, int, int, int]] = []
        for _, g, c, m in demand.order:
            best = tightest(available.items(), g, c, m)  # the one best-fit key (fit.py)
            if best is None:
                return None
            amounts = available[best]
            amounts[0] -= g
            amounts[1] -= c
            amounts[2] -= m
            placed.append((best, g, c, m))
        return placed


def plan_starts(state: CycleState, exact_per_pool: int = EXACT_PER_POOL, rough_per_pool: int = ROUGH_PER_POOL) -> None:
    """Give every pending job of the cycle its estimate (`Decisions.estimates`): the first `exact_per_pool`
    of each pool exactly, the next `rough_per_pool` roughly (`plan_rough`), the rest "far back"; nothing
    without `now`."""
    if state.now is None:
        return
    decided = state.decisions
    pending = set(decided.pending)
    if not pending:
        return
    plan = _Plan(state)
    planned: dict[str | None, int] = {}
    last = exact_per_pool + rough_per_pool
    for demand in state.queue:
        name = demand.job.name
        if name not in pending:
            continue
        count = planned.get(demand.pool, 0)
        if count >= last:
            decided.estimates[name] = FAR_BACK
            continue
        planned[demand.pool] = count + 1
        decided.estimates[name] = plan.estimate(demand, rough=count >= exact_per_pool)
