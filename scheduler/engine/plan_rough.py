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
from .types import CPU, MEMORY, UNKNOWN_NO_LIMIT, Estimate, gpu_key

if TYPE_CHECKING:
    from .capacity import NodeState
    from .demand import Demand
    from .quota import QuotaNode

# A quota level's room now, what its In Quota jobs give back and when, and what the exact plans hold of it.
RoomParts = tuple[dict[str, int], list[tuple[float, dict[str, int]]], list[tuple[float, float, dict[str, int]]]]

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
                 exact_room: Callable[[QuotaNode], RoomLine], room_parts: Callable[[QuotaNode], RoomParts]) -> None:
        self.now = now
        self.node_lines = node_lines  # (pool, model) -> its nodes' exact timelines
        self.exact_room = exact_room  # a quota level -> its exact room line (whose `low` spares most scans)
        self.room_parts = room_parts  # a quota level -> its room now, its releases, the exact plans' holds
        self.lines: dict[tuple[str, str | None], Timeline] = {}
        # (quota level, GPU key) -> its room in (those GPUs, CPU, memory) as a step function, and the least of
        # each at any time (a level that always covers a request needs no scan)
        self.rooms: dict[tuple[QuotaNode, str], tuple[Timeline, list[int]]] = {}
        self.held: dict[QuotaNode, list[tuple[float, float, str, int, int, int]]] = {}  # rough plans' holds
        self.taken: dict[QuotaNode, dict[str, int]] = {}  # a level -> what rough plans hold of it, in all
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
                    if dg or dc or dm:  # `grid_up`, inline: most steps are these (times[i] > now)
                        t = times[i]
                        step = GRID_STEP_S << (int(t - now) // GRID_FIRST_S).bit_length()
                        at = float(ceil(t / step) * step)
                        move = moves.get(at)
                        if move is None:
                            moves[at] = [dg, dc, dm]
                        else:
                            move[0] += dg
                            move[1] += dc
                            move[2] += dm
                elif dg <= 0 and dc <= 0 and dm <= 0:  # a plan holds it
                    _move(moves, grid_down(now, times[i]), dg, dc, dm)
                else:  # both at once: each part on its own side
                    _move(moves, grid_up(now, times[i]), max(dg, 0), max(dc, 0), max(dm, 0))
                    _move(moves, grid_down(now, times[i]), min(dg, 0), min(dc, 0), min(dm, 0))
        start = moves.pop(now, [0, 0, 0])
        line = self.lines[key] = Timeline(now, total_g + start[0], total_c + start[1], total_m + start[2])
        line.grow_at([(at, *move) for at, move in moves.items()])
        return line

    def room(self, level: QuotaNode, key: str) -> tuple[Timeline, list[int]]:
        """A quota level's room in GPUs of `key` (none for ""), CPU and memory, on the grid, from the exact
        plan's releases and holds and the rough plans' holds so far, when first asked for."""
        found = self.rooms.get((level, key))
        if found is not None:
            return found
        now = self.now
        room, releases, holds = self.room_parts(level)
        moves: dict[float, list[int]] = {}
        for t, amounts in releases:
            _move(moves, grid_up(now, t), amounts.get(key, 0), amounts.get(CPU, 0), amounts.get(MEMORY, 0))
        for start, end, amounts in holds:
            g, c, m = amounts.get(key, 0), amounts.get(CPU, 0), amounts.get(MEMORY, 0)
            _move(moves, grid_down(now, start), -g, -c, -m)
            if end < FOREVER:
                _move(moves, grid_up(now, end), g, c, m)
        first = moves.pop(now, [0, 0, 0])
        line = Timeline(now, room.get(key, 0) + first[0], room.get(CPU, 0) + first[1], room.get(MEMORY, 0) + first[2])
        line.grow_at([(at, *move) for at, move in moves.items()])
        for start, end, held_key, g, c, m in self.held.get(level, ()):
            line.add(start, end, -g if held_key == key else 0, -c, -m)
        found = self.rooms[(level, key)] = (line, [min(line.g), min(line.c), min(line.m)])
        return found

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
            t = self._fit(line, (g, c, m), demand.request(model), self._key(g, model), chain, duration, since)
            if t < best:
                best, best_model = t, model
        if best == FOREVER:
            return Estimate(None, UNKNOWN_NO_LIMIT)
        end = best + duration  # not rounded: a queue of short jobs would drift a step per job
        self.line(pool, best_model).add(best, end, -g, -c, -m)
        for level in chain or ():
            held_key = self._key(g, best_model)
            taken = self.taken.setdefault(level, {})
            for name, amount in demand.request(best_model).items():
                taken[name] = taken.get(name, 0) + amount
            self.held.setdefault(level, []).append((best, end, held_key, g, c, m))
            for (room_level, key), (room, low) in self.rooms.items():  # a level has a line or two
                if room_level is level:
                    dg = g if key == held_key else 0
                    room.add(best, end, -dg, -c, -m)
                    low[0], low[1], low[2] = low[0] - dg, low[1] - c, low[2] - m
        return Estimate(best, rough=True)

    def _covers(self, level: QuotaNode, request: dict[str, int]) -> bool:
        """The level's room covers `request` at every time, whatever the plans hold (its exact line's `low`,
        less all the rough plans hold of it)."""
        low = self.exact_room(level).low
        taken = self.taken.get(level, {})
        return all(need <= low.get(name, 0) - taken.get(name, 0) for name, need in request.items())

    @staticmethod
    def _key(g: int, model: str | None) -> str:
        return gpu_key(model) if g and model is not None else ""

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

    def _fit(self, line: Timeline, size: tuple[int, int, int], request: dict[str, int], key: str,
             chain: tuple[QuotaNode, ...] | None, duration: float, since: float) -> float:
        g, c, m = size
        t = line.earliest(g, c, m, duration, since) if since < FOREVER else FOREVER
        qg = g if key else 0  # GPUs of no model count against no guarantee
        while t < FOREVER and chain:
            later = t
            for level in chain:
                if self._covers(level, request):
                    continue
                room, low = self.room(level, key)
                if low[0] < qg or low[1] < c or low[2] < m:
                    later = max(later, room.earliest(qg, c, m, duration, later))
            if later == t:
                return t
            t = line.earliest(g, c, m, duration, later) if later < FOREVER else FOREVER
        return t
