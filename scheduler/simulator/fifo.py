"""Head-of-line blocking per quota: the FIFO baseline, as the Helios simulator runs each VC.

Helios (`framework/QSSF Service/policies/fifo.py`) walks each virtual cluster's queue in
submission order and stops at the first job it cannot place: that job blocks the ones behind it
even when they would fit. The `fifo` policy gives the engine the strict quota tree (every job
`off`) and only the jobs it may start under that rule:

- per quota, its pending jobs in the engine's order (priority, queue time, name);
- a job whose GPUs can never fit its quota's guarantee is left out (it never starts, and does not
  block the queue forever either: Helios' traces hold no such job);
- the selection of a quota ends at the first job that certainly cannot start (its class's
  pruning bound is spent), and after a cycle whose admissions are not a prefix of a quota's
  selection, the selection is cut after that quota's first job left pending and the engine is
  asked again (`enforce`), until every quota's admissions are a prefix.

With the strict tree and no borrowing the engine only runs its in-quota pass in queue order, so
a job is decided the same with or without the jobs behind it: each round fixes the first job
that broke the rule, and the rounds end with exactly Helios' decisions.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from .ledger import JobClass


def head_of_line(classes: Iterable[JobClass], bound: Callable[[JobClass], int] | None) -> dict[str, list[int]]:
    """Per quota, the job indexes to offer the engine, in the engine's order.

    With `bound` (pruning), a quota's list stops at the first job beyond its class's bound: it
    cannot start, so nothing behind it may. Without, every job that fits its quota is offered.
    """
    by_quota: dict[str, list[JobClass]] = {}
    for cls in classes:
        if cls.fits:
            by_quota.setdefault(cls.quota, []).append(cls)
    selected: dict[str, list[int]] = {}
    for quota, group in by_quota.items():
        bounds = {id(cls): bound(cls) for cls in group} if bound else None
        taken = dict.fromkeys(bounds or (), 0)
        chosen: list[int] = []
        for _key, cls, index in heapq.merge(*(_ordered(cls) for cls in group)):
            if bounds is not None:
                if taken[id(cls)] >= bounds[id(cls)]:
                    break
                taken[id(cls)] += 1
            chosen.append(index)
        selected[quota] = chosen
    return selected


def _ordered(cls: JobClass) -> Iterator[tuple[tuple[int, float, str], JobClass, int]]:
    for submit, name, index in cls.queue:
        yield (-cls.priority, submit, name), cls, index


def enforce(selected: Mapping[str, Sequence[int]], admitted: Callable[[int], bool]) -> dict[str, list[int]] | None:
    """The selection cut so that each quota's admissions are a prefix; None when they already are.

    A quota whose first job left pending has an admitted job behind it is cut just after that
    first pending job (it stays offered, so its reason is known).
    """
    cut: dict[str, list[int]] = {}
    changed = False
    for quota, indexes in selected.items():
        first_pending = next((i for i, index in enumerate(indexes) if not admitted(index)), None)
        if first_pending is not None and any(admitted(index) for index in indexes[first_pending + 1:]):
            cut[quota] = list(indexes[: first_pending + 1])
            changed = True
        else:
            cut[quota] = list(indexes)
    return cut if changed else None
