"""How a run of a job turns wall time into work: restart overhead, checkpoint saves, redone work.

A job has `W` seconds of work (its trace duration). It saves a checkpoint at fixed points of its
work, `phase + k x interval` (k = 0, 1, ...), each save pausing the job for `cost` seconds; the
phase is drawn per job (seeded), so that jobs do not all save in step. A save at the very end of
the work is not needed; a run resumed from a checkpoint does not save it again.

One run starts at `start` from work `base` (0, or a checkpoint position). A run that follows a
preemption first spends `restart` seconds (new pods, loading the checkpoint) doing no work. Then
it alternates work and saves:

    start | restart | work to the next checkpoint | save | work (interval) | save | ... | end

A preemption at time `t` stops the run: the work done since the last *completed* save is redone
later, and a save under way at `t` is wasted. All functions here are pure arithmetic on one run,
O(1), and exact for the float inputs they get.

A run of an elastic job below its maximum size does its work at a `rate` below 1 (work seconds per
wall second, elastic.py); saves and the restart still take their wall time. The arithmetic runs on
a clock scaled by the rate, on which work advances one second per second; with rate 1 it is the
wall clock, bit for bit.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkModel:
    """Checkpointing and restart costs shared by every job of a replay."""

    interval_s: float = 600.0  # work between two checkpoints
    cost_s: float = 30.0  # wall time of one save, no progress meanwhile
    restart_s: float = 60.0  # wall time before a resumed run makes progress
    seed: int | None = 0  # phase of each job's first checkpoint: seeded random; None: one interval

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError("the checkpoint interval must be positive")
        if self.cost_s < 0 or self.restart_s < 0:
            raise ValueError("checkpoint cost and restart overhead must not be negative")

    def phase(self, name: str) -> float:
        """Work position of the job's first checkpoint, in (0, interval]: random per job name when seeded."""
        if self.seed is None:
            return self.interval_s
        return self.interval_s * (1.0 - random.Random(f"{self.seed}:{name}").random())


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a job, enough to say where its wall time went at any instant."""

    start: float
    gpus: int
    base: float  # work saved when the run started
    work: float  # the job's whole work (W)
    restart: float  # restart overhead at the start of this run
    phase: float
    interval: float
    cost: float
    rate: float = 1.0  # work per wall second (elastic jobs below their maximum size: elastic.py)

    def next_checkpoint(self, after: float) -> float:
        """The first checkpoint position strictly after work position `after`."""
        if after < self.phase:
            return self.phase
        return self.phase + (math.floor((after - self.phase) / self.interval) + 1) * self.interval

    def saves_between(self, low: float, high: float) -> int:
        """Checkpoints at work positions in (low, high): the saves a run from `low` makes before reaching `high`."""
        below_high = 0 if high <= self.phase else math.ceil((high - self.phase) / self.interval)
        up_to_low = 0 if low < self.phase else math.floor((low - self.phase) / self.interval) + 1
        return max(0, below_high - up_to_low)

    def finish_at(self) -> float:
        """When the run ends its work if nothing stops it."""
        return (self.start + self.restart + (self.work - self.base) / self.rate
                + self.cost * self.saves_between(self.base, self.work))

    def progress(self, at: float) -> tuple[float, float, float]:
        """(work done, save time spent, work saved by completed saves) from the start to `at`.

        Work done and save time are counted from this run's start (not from `base`); the saved
        position is absolute (`base` if no save completed). Save time is wall time.
        """
        rate = self.rate
        # On the scaled clock (wall time x rate) work advances one second per second and a save lasts cost x rate.
        elapsed = (at - self.start - self.restart) * rate
        if elapsed <= 0:
            return (0.0, 0.0, self.base)
        cost = self.cost * rate
        first = self.next_checkpoint(self.base)
        if first >= self.work or elapsed <= first - self.base:
            return (min(elapsed, self.work - self.base), 0.0, self.base)
        done = first - self.base
        elapsed -= done
        if elapsed < cost:
            return (done, elapsed / rate, self.base)
        saved, saving = first, cost
        elapsed -= cost
        # Whole rounds of (interval of work, one save) after the first checkpoint.
        period = self.interval + cost
        rounds = math.floor(elapsed / period) if period > 0 else 0
        # Stop counting rounds at the last checkpoint before the end of the work.
        last_round = self.saves_between(first, self.work)
        rounds = min(rounds, last_round)
        saved += rounds * self.interval
        done += rounds * self.interval
        saving += rounds * cost
        elapsed -= rounds * period
        if rounds == last_round:
            return (done + min(elapsed, self.work - saved), saving / rate, saved)
        if elapsed <= self.interval:
            return (done + elapsed, saving / rate, saved)
        return (done + self.interval, (saving + (elapsed - self.interval)) / rate, saved)

    def last_save_at(self, at: float) -> float | None:
        """Wall time the run's last completed checkpoint save ended, by `at`; None before its first."""
        saved = self.progress(at)[2]
        if saved <= self.base:
            return None
        saves = self.saves_between(self.base, saved) + 1  # the ones before `saved`, and its own
        return self.start + self.restart + (saved - self.base) / self.rate + self.cost * saves

    def restart_time(self, at: float) -> float:
        """Restart overhead spent from the start to `at`."""
        return min(max(at - self.start, 0.0), self.restart)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A finished or stopped run: its timeline and how much of its work was kept."""

    run: Run
    end: float  # pods gone: work finished, or the exit after a preemption's grace period
    stop: float  # SIGTERM time for a preempted run; `end` for a run that finished its work
    kept: float  # work kept by this run (saved, or all of it when it finished)

    def split(self, low: float, high: float) -> dict[str, float]:
        """GPU-seconds of this run inside [low, high], by where they went.

        `useful`: work kept; `redone`: work lost to a preemption and done again; `checkpoint`:
        save time (including a save a preemption interrupted); `restart`: restart overhead;
        `grace`: SIGTERM to exit. Their sum is the GPU-time held inside [low, high]: work is counted
        by the wall time it took (work / rate), so a smaller elastic run's useful GPU-seconds are
        the GPUs it held while doing work it kept.
        """
        low, high = max(low, self.run.start), min(high, self.end)
        if high <= low:
            return {"useful": 0.0, "redone": 0.0, "checkpoint": 0.0, "restart": 0.0, "grace": 0.0}
        run, gpus = self.run, self.run.gpus
        work_low, save_low, _ = run.progress(min(low, self.stop))
        work_high, save_high, _ = run.progress(min(high, self.stop))
        # Work is done in order: the first `kept` seconds of it are kept, the rest is redone.
        useful = min(work_high, self.kept) - min(work_low, self.kept)
        redone = (work_high - work_low) - useful
        grace = max(0.0, high - max(low, self.stop))
        rate = run.rate
        return {
            "useful": gpus * (useful / rate),
            "redone": gpus * (redone / rate),
            "checkpoint": gpus * (save_high - save_low),
            "restart": gpus * (run.restart_time(min(high, self.stop)) - run.restart_time(min(low, self.stop))),
            "grace": gpus * grace,
        }
