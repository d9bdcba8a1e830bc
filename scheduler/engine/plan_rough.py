"""Rough start estimates (DESIGN §2d) for the pending jobs past the exact ones of their pool (`plan`).

The exact plan places each job on the nodes (a scan of the pool's nodes per try), which is too dear for
a long queue. Past the first `EXACT_PER_POOL` jobs of a pool, a job is planned on *aggregates*: per
(pool, GPU model) the free GPUs, CPU and memory of all its nodes together as one step function, and,
for an `off` job, its quota levels' room, both taken from the exact plan once its jobs of that pool are
planned (so they hold what the exact plans hold). Each job, in pending order, gets the earliest time at
which its *total* request fits the aggregate (and, for an `off` job, every level's room) over its whole
run, and then holds it there, as the exact plan does per node. So it is optimistic where capacity is
scattered over nodes (a pod of 8 GPUs may "fit" 8 GPUs free on 8 nodes): the estimate is marked rough
(`Estimate.rough`), read "starts in about …" like an exact one but labelled "rough".

Cost: an aggregate starts on a coarse time grid (`grid_up`/`grid_down`), so it has a few hundred steps at
most whatever the number of nodes and running jobs: times up to 40 min ahead in steps of 75 s, then 16
steps per doubling of the time ahead (an error of at most ~6 % of the wait), aligned to absolute
multiples of the step so that an estimate does not move from cycle to cycle as `now` does. Capacity
that comes back is counted from the grid step at or after its time, what the exact plans hold from the
step at or before its start: never more than there is. A rough plan starts at a step of the aggregate
and holds until its own end, not rounded (a queue of short jobs would drift by a step per job), so each
adds a step or two. Each job costs one scan of its aggregate from where its GPU count last fitted (the
earliest such time only moves later as plans hold more), and a budget of rough jobs per pool
(`ROUGH_PER_POOL`, measured in docs/scheduling.md) bounds a cycle's cost; the jobs after it are
"unknown: far back in the queue".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from math import ceil, floor
from typing import TYPE_CHECKING

from .plan_timelines import FOREVER, RoomLine, Timeline
from .types import UNKNOWN_NO_LIMIT, Estimate

if TYPE_CHECKING:
    from .capacity import NodeState
    from .demand import Demand
    from .quota import QuotaNode

GRID_FIRST_S = 2400  # up to this far ahead the grid's step is GRID_STEP_S...
GRID_STEP_S = 75  # ...then it doubles with each doubling of the time ahead (16 steps per doubling)


def _step(now: float, t: float) -> int:
    return GRID_STEP_S << (int(t - now) // GRID_FIRST_S).bit_length()


def grid_up(now: float, t: float) -> float:
    """The grid time at or after `t` (`now` for a time not after it; FOREVER stays)."""
    if t <= now or t == FOREVER:
        return now if t <= now else t
    step = _step(now, t)
    return float(ceil(t / step) * step)


def grid_down(now: float, t: float) -> float:
    """The grid time at or before `t`, never before `now`."""
    if t <= now:
        return now
    step = _step(now, t)
    return max(now, float(floor(t / step) * step))


def _deltas(times: list[float], values: Iterable[list[int]], now: float) -> dict[float, list[int]]:
    """The steps of a piecewise-constant vector moved onto the grid: a rise at the grid time at or after it,
    a fall at the one at or before it."""
    out: dict[float, list[int]] = {}
    previous: list[int] | None = None
    for t, value in zip(times, values, strict=True):
        if previous is not None:
            for k, (new, old) in enumerate(zip(value, previous, strict=True)):
                if new != old:
                    at = grid_up(now, t) if new > old else grid_down(now, t)
                    out.setdefault(at, [0] * len(value))[k] += new - old
        previous = value
    return out


def _move(moves: dict[float, list[int]], at: float, g: int, c: int, m: int) -> None:
    move = moves.get(at)
    if move is None:
        moves[at] = [g, c, m]
    else:
        move[0] += g
        move[1] += c
        move[2] += m


class RoughPlan:
    """The aggregates of one cycle's rough plan; `estimate(demand, ...)` plans one job after those before it
    (exact or rough)."""

    def __init__(self, now: float, node_lines: Callable[[str, str | None], Iterable[tuple[NodeState, Timeline]]],
                 room: Callable[[QuotaNode], RoomLine]) -> None:
        self.now = now
        self.node_lines = node_lines  # (pool, model) -> its nodes' exact timelines
        self.exact_room = room  # a quota level -> its exact room line
        self.lines: dict[tuple[str, str | None], Timeline] = {}
        self.rooms: dict[QuotaNode, RoomLine] = {}
        self.fitted: dict[tuple[str, str | None, int], float] = {}  # (pool, model, GPUs) -> where they last fitted

    def line(self, pool: str, model: str | None) -> Timeline:
        """The aggregate of (pool, model), made from its nodes' exact timelines when first asked for."""
        key = (pool, model)
        line = self.lines.get(key)
        if line is not None:
            return line
        now = self.now
        total_g = total_c = total_m = 0
        moves: dict[float, list[int]] = {}
        for _, node_line in self.node_lines(pool, model):
            times, gs, cs, ms = node_line.times, node_line.g, node_line.c, node_line.m
            pg, pc, pm = gs[0], cs[0], ms[0]
            total_g, total_c, total_m = total_g + pg, total_c + pc, total_m + pm
            for i in range(1, len(times)):  # a node has a few steps: its jobs' ends and the exact plans
                g, c, m = gs[i], cs[i], ms[i]
                dg, dc, dm = g - pg, c - pc, m - pm
                pg, pc, pm = g, c, m
                if dg >= 0 and dc >= 0 and dm >= 0:  # capacity comes back (or nothing changes)
                    if dg or dc or dm:
                        _move(moves, grid_up(now, times[i]), dg, dc, dm)
                elif dg <= 0 and dc <= 0 and dm <= 0:  # a plan holds it
                    _move(moves, grid_down(now, times[i]), dg, dc, dm)
                else:  # both at once: each part on its own side
                    _move(moves, grid_up(now, times[i]), max(dg, 0), max(dc, 0), max(dm, 0))
                    _move(moves, grid_down(now, times[i]), min(dg, 0), min(dc, 0), min(dm, 0))
        start = moves.pop(now, [0, 0, 0])
        line = self.lines[key] = Timeline(now, total_g + start[0], total_c + start[1], total_m + start[2])
        line.grow_at([(at, *move) for at, move in moves.items()])
        return line

    def room(self, level: QuotaNode) -> RoomLine:
        """A quota level's room on the grid, made from its exact room line when first asked for."""
        line = self.rooms.get(level)
        if line is not None:
            return line
        times, rooms = self.exact_room(level).segments()
        keys = sorted({key for room in rooms for key in room})
        values = [[room.get(key, 0) for key in keys] for room in rooms]
        moves = _deltas(times, values, self.now)
        first = moves.pop(self.now, [0] * len(keys))
        line = self.rooms[level] = RoomLine(self.now, {k: v + d for k, v, d in zip(keys, values[0], first, strict=True)})
        line.grow_at([(at, dict(zip(keys, move, strict=True))) for at, move in moves.items()])
        # the exact plan's holds may leave less room later than now: `low` is the least there is at any time
        _, grid_rooms = line.segments()
        line.low = {key: min(room.get(key, 0) for room in grid_rooms) for key in keys}
        return line

    def estimate(self, demand: Demand, models: list[str | None], duration: float,
                 chain: tuple[QuotaNode, ...] | None) -> Estimate:
        """The earliest grid time at which the job's total fits the aggregate of one of `models` (and, with a
        `chain`, each level's room) over its run; the job then holds it there."""
        pool = demand.pool or ""
        g, c, m = demand.gpus, demand.cpu_m, demand.memory_mib
        best, best_model = FOREVER, None
        for model in models:
            line = self.line(pool, model)
            key = (pool, model, g)
            since = self._first_with(line, self.fitted.get(key, self.now), g)
            self.fitted[key] = since
            t = self._fit(line, g, c, m, demand.request(model) if chain else None, chain, duration, since)
            if t < best:
                best, best_model = t, model
        if best == FOREVER:
            return Estimate(None, UNKNOWN_NO_LIMIT)
        end = best + duration  # not rounded: a queue of short jobs would drift a step per job
        self.line(pool, best_model).add(best, end, -g, -c, -m)
        if chain:
            request = demand.request(best_model)
            for level in chain:
                self.room(level).add(best, end, request, -1)
        return Estimate(best, rough=True)

    @staticmethod
    def _first_with(line: Timeline, since: float, g: int) -> float:
        """The first time from `since` at which `g` GPUs are free at all (FOREVER if never)."""
        times, gs = line.times, line.g
        i = line.index(since)
        if gs[i] >= g:
            return since
        n = len(times)
        while i < n and gs[i] < g:
            i += 1
        return times[i] if i < n else FOREVER

    def _fit(self, line: Timeline, g: int, c: int, m: int, request: dict[str, int] | None,
             chain: tuple[QuotaNode, ...] | None, duration: float, since: float) -> float:
        t = line.earliest(g, c, m, duration, since) if since < FOREVER else FOREVER
        while t < FOREVER and chain and request is not None:
            later = t
            for level in chain:
                room = self.room(level)
                if not room.always_covers(request):
                    later = max(later, room.earliest(request, duration, later))
            if later == t:
                return t
            t = line.earliest(g, c, m, duration, later) if later < FOREVER else FOREVER
        return t
