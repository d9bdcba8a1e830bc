"""The timelines of the start-estimate plan (`plan`, DESIGN §2d): free capacity of a node, and room in a
quota level, from `now` on, as piecewise-constant step functions that grow at planned ends and shrink
where plans hold."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable

from .types import CPU, MEMORY

FOREVER = math.inf


class Timeline:
    """Free (GPUs, CPU, memory) of one node, or of a group of nodes, from `now` on: piecewise constant,
    `g[i]`... holding from `times[i]` to `times[i + 1]` (the last for ever)."""

    __slots__ = ("times", "g", "c", "m")

    def __init__(self, now: float, g: int, c: int, m: int) -> None:
        self.times = [now]
        self.g, self.c, self.m = [g], [c], [m]

    def grow_at(self, releases: list[tuple[float, int, int, int]]) -> None:
        """Add each release (time > now, amounts) from its time on; all at once, in one pass."""
        releases.sort()
        times, gs, cs, ms = self.times, self.g, self.c, self.m
        g, c, m = gs[-1], cs[-1], ms[-1]
        for t, dg, dc, dm in releases:
            g, c, m = g + dg, c + dc, m + dm
            if t == times[-1]:
                gs[-1], cs[-1], ms[-1] = g, c, m
            else:
                times.append(t)
                gs.append(g)
                cs.append(c)
                ms.append(m)

    def _split(self, t: float) -> int:
        """The index of the segment that starts at `t` (made by splitting the one holding `t`)."""
        times = self.times
        i = bisect_left(times, t)
        if i < len(times) and times[i] == t:
            return i
        times.insert(i, t)
        self.g.insert(i, self.g[i - 1])
        self.c.insert(i, self.c[i - 1])
        self.m.insert(i, self.m[i - 1])
        return i

    def add(self, start: float, end: float, g: int, c: int, m: int) -> None:
        """Add this much over `[start, end)` (negative: a plan holds it)."""
        i = self._split(start)
        j = self._split(end) if end < FOREVER else len(self.times)
        gs, cs, ms = self.g, self.c, self.m
        for k in range(i, j):
            gs[k] += g
            cs[k] += c
            ms[k] += m

    def least_at_least(self, start: float, end: float, lg: int, lc: int, lm: int) -> list[int] | None:
        """`least(start, end)` as a list when every amount stays at least (lg, lc, lm), else None (found
        at the first segment that falls short: most nodes fail at once)."""
        times, gs, cs, ms = self.times, self.g, self.c, self.m
        i = bisect_right(times, start) - 1 if len(times) > 1 else 0
        g, c, m = gs[i], cs[i], ms[i]
        if g < lg or c < lc or m < lm:
            return None
        i += 1
        n = len(times)
        while i < n and times[i] < end:
            sg, sc, sm = gs[i], cs[i], ms[i]
            if sg < lg or sc < lc or sm < lm:
                return None
            if sg < g:
                g = sg
            if sc < c:
                c = sc
            if sm < m:
                m = sm
            i += 1
        return [g, c, m]

    def earliest(self, g: int, c: int, m: int, duration: float, since: float | None = None) -> float:
        """The earliest time, `since` or a later segment start (any time without `since`), from which the
        amounts hold (g, c, m) for `duration`; FOREVER if none."""
        times, gs, cs, ms = self.times, self.g, self.c, self.m
        n = len(times)
        i = 0 if since is None else max(bisect_right(times, since) - 1, 0)
        while i < n:
            if gs[i] < g or cs[i] < c or ms[i] < m:
                i += 1
                continue
            start = times[i] if since is None or times[i] > since else since
            end = start + duration
            j = i + 1
            while j < n and times[j] < end and gs[j] >= g and cs[j] >= c and ms[j] >= m:
                j += 1
            if j == n or times[j] >= end:
                return start
            i = j + 1
        return FOREVER

    def index(self, t: float) -> int:
        """The index of the segment holding `t` (the first for a time before it)."""
        return max(bisect_right(self.times, t) - 1, 0)

    def at(self, t: float) -> tuple[int, int, int]:
        i = bisect_right(self.times, t) - 1
        return self.g[i], self.c[i], self.m[i]

    def least(self, start: float, end: float) -> tuple[int, int, int]:
        """The least of each amount over `[start, end)`."""
        times = self.times
        if len(times) == 1:
            return self.g[0], self.c[0], self.m[0]
        i = bisect_right(times, start) - 1
        g, c, m = self.g[i], self.c[i], self.m[i]
        i += 1
        n = len(times)
        while i < n and times[i] < end:
            g, c, m = min(g, self.g[i]), min(c, self.c[i]), min(m, self.m[i])
            i += 1
        return g, c, m


class RoomLine:
    """A quota level's room (`min − inq`, per resource key) from `now` on, piecewise constant. A request
    names at most one GPU key besides CPU and memory, so the room is kept per GPU key as a `Timeline` of
    (those GPUs, CPU, memory), made when a scan first needs that key; a hold takes CPU and memory off every
    key's line."""

    __slots__ = ("now", "room", "low", "holds_kept", "lines", "growth", "releases")

    def __init__(self, now: float, room: dict[str, int],
                 growth: Callable[[], list[tuple[float, dict[str, int]]]] | None = None) -> None:
        self.now = now
        self.room = dict(room)
        # At most this little room at any time, per key: room only grows from `now` but for what plans
        # hold, which `add` takes off here too. A level whose `low` covers a request needs no scan.
        self.low = dict(room)
        self.holds_kept: list[tuple[float, float, dict[str, int]]] = []  # plans' holds, for lines made later
        self.lines: dict[str, Timeline] = {}
        self.growth = growth  # the releases (`grow_at`), asked for when a line is first made
        self.releases: list[tuple[float, dict[str, int]]] = []

    def always_covers(self, request: dict[str, int]) -> bool:
        low = self.low
        return all(need <= low.get(key, 0) for key, need in request.items())

    def grow_at(self, releases: list[tuple[float, dict[str, int]]]) -> None:
        """Add each release from its time on (times > now); before any scan."""
        self.releases.extend(releases)

    @staticmethod
    def _parts(request: dict[str, int]) -> tuple[str, int, int, int]:
        key, g = "", 0
        for name, amount in request.items():
            if name != CPU and name != MEMORY:
                key, g = name, amount
        return key, g, request.get(CPU, 0), request.get(MEMORY, 0)

    def _line(self, key: str) -> Timeline:
        line = self.lines.get(key)
        if line is None:
            if self.growth is not None:
                growth, self.growth = self.growth, None
                self.releases.extend(growth())
            room = self.room
            line = self.lines[key] = Timeline(self.now, room.get(key, 0), room.get(CPU, 0), room.get(MEMORY, 0))
            line.grow_at([(t, a.get(key, 0), a.get(CPU, 0), a.get(MEMORY, 0)) for t, a in self.releases])
            for start, end, amounts in self.holds_kept:
                line.add(start, end, -amounts.get(key, 0), -amounts.get(CPU, 0), -amounts.get(MEMORY, 0))
        return line

    def add(self, start: float, end: float, amounts: dict[str, int], sign: int) -> None:
        """Hold (sign -1) `amounts` over `[start, end)`; lines not made yet take it when they are."""
        assert sign < 0, "rooms only grow by releases"
        for key, amount in amounts.items():
            self.low[key] = self.low.get(key, 0) - amount
        self.holds_kept.append((start, end, amounts))
        held, g, c, m = self._parts(amounts)
        for key, line in self.lines.items():
            line.add(start, end, -g if key == held else 0, -c, -m)

    def earliest(self, request: dict[str, int], duration: float, since: float | None = None) -> float:
        """The earliest time, `since` or a later segment start (any time without `since`), from which the room
        covers `request` for `duration`; FOREVER if none."""
        key, g, c, m = self._parts(request)
        return self._line(key).earliest(g, c, m, duration, since)

    def holds(self, start: float, end: float, request: dict[str, int]) -> bool:
        """The room covers `request` all over `[start, end)`."""
        key, g, c, m = self._parts(request)
        return self._line(key).least_at_least(start, end, g, c, m) is not None
