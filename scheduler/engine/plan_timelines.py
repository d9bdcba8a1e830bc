"""The timelines of the start-estimate plan (`plan`, DESIGN §2d): free capacity of a node, and room in a
quota level, from `now` on, as piecewise-constant step functions that grow at planned ends and shrink
where plans hold."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

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
        for k in range(i, j):
            self.g[k] += g
            self.c[k] += c
            self.m[k] += m

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
    """A quota level's room (`min − inq`, per resource key) from `now` on, piecewise constant."""

    __slots__ = ("times", "rooms", "low", "later")

    def __init__(self, now: float, room: dict[str, int]) -> None:
        self.times = [now]
        self.rooms = [dict(room)]
        # At most this little room at any time, per key: room only grows from `now` but for what plans
        # hold, which `add` takes off here too. A level whose `low` covers a request needs no scan.
        self.low = dict(room)
        self.later: list[tuple[float, float, dict[str, int]]] = []  # plans' holds not applied yet

    def _apply(self) -> None:
        """Apply the holds kept back: a line whose `low` covers every request never needs them."""
        later, self.later = self.later, []
        for start, end, amounts in later:
            self._add(start, end, amounts, -1)

    def always_covers(self, request: dict[str, int]) -> bool:
        low = self.low
        return all(need <= low.get(key, 0) for key, need in request.items())

    def grow_at(self, releases: list[tuple[float, dict[str, int]]]) -> None:
        """Add each release from its time on (times > now), in one pass."""
        releases.sort(key=lambda r: r[0])
        room = dict(self.rooms[-1])
        for t, amounts in releases:
            for key, amount in amounts.items():
                room[key] = room.get(key, 0) + amount
            if t == self.times[-1]:
                self.rooms[-1] = dict(room)
            else:
                self.times.append(t)
                self.rooms.append(dict(room))

    def _split(self, t: float) -> int:
        i = bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] == t:
            return i
        self.times.insert(i, t)
        self.rooms.insert(i, dict(self.rooms[i - 1]))
        return i

    def add(self, start: float, end: float, amounts: dict[str, int], sign: int) -> None:
        """Add (sign 1) or hold (sign -1) `amounts` over `[start, end)`; holds wait until a scan needs them."""
        if sign > 0:
            self._apply()
            self._add(start, end, amounts, sign)
            return
        for key, amount in amounts.items():
            self.low[key] = self.low.get(key, 0) - amount
        self.later.append((start, end, amounts))

    def _add(self, start: float, end: float, amounts: dict[str, int], sign: int) -> None:
        i = self._split(start)
        j = self._split(end) if end < FOREVER else len(self.times)
        for k in range(i, j):
            room = self.rooms[k]
            for key, amount in amounts.items():
                room[key] = room.get(key, 0) + sign * amount

    def earliest(self, request: dict[str, int], duration: float, since: float | None = None) -> float:
        """The earliest time, `since` or a later segment start (any time without `since`), from which the room
        covers `request` for `duration`; FOREVER if none."""
        self._apply()
        times, rooms = self.times, self.rooms
        n = len(times)

        def covers(k: int) -> bool:
            room = rooms[k]
            return all(need <= room.get(key, 0) for key, need in request.items())
        i = 0 if since is None else max(bisect_right(times, since) - 1, 0)
        while i < n:
            if not covers(i):
                i += 1
                continue
            start = times[i] if since is None or times[i] > since else since
            end = start + duration
            j = i + 1
            while j < n and times[j] < end and covers(j):
                j += 1
            if j == n or times[j] >= end:
                return start
            i = j + 1
        return FOREVER

    def segments(self) -> tuple[list[float], list[dict[str, int]]]:
        """The room's times and amounts, every hold applied (read only)."""
        self._apply()
        return self.times, self.rooms

    def holds(self, start: float, end: float, request: dict[str, int]) -> bool:
        """The room covers `request` all over `[start, end)`."""
        self._apply()
        times = self.times
        i = bisect_right(times, start) - 1
        n = len(times)
        while True:
            room = self.rooms[i]
            for key, need in request.items():
                if need > room.get(key, 0):
                    return False
            i += 1
            if i >= n or times[i] >= end:
                return True
