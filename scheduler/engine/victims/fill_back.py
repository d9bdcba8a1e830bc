"""The fill-back (DESIGN §2 "Victim selection"): candidates were taken in order until the job fitted; walk
the chosen ones from the last back to the first and spare each one without which the job still fits.

One loop for every chosen set: reclaim victims found by the walk (`selection`) or by the node index
(`index`), and the jobs preempt_within demotes (`policies.within_quota`). What "fits" means is the
caller's `Fit`: placement over explicit amounts, a count of equal pods, or a quota check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")


class Fit(Protocol[T]):
    """What the job has with the chosen items counted in: `add(item)` counts one more, `add(item, -1)`
    one less; `fits()`: the job fits now."""

    def add(self, item: T, sign: int = 1) -> None: ...

    def fits(self) -> bool: ...


def fill_back(chosen: Sequence[T], fit: Fit[T]) -> list[T]:
    """The chosen items to keep, in their order. `fit` counts all of `chosen` and fits; the last one is
    needed (the job did not fit before it), so the walk starts at the one before it."""
    spared: set[int] = set()
    for i in range(len(chosen) - 2, -1, -1):
        item = chosen[i]
        fit.add(item, -1)
        if fit.fits():
            spared.add(i)
        else:
            fit.add(item)
    if not spared:
        return list(chosen)
    return [item for i, item in enumerate(chosen) if i not in spared]
