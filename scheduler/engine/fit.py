"""The one best-fit key (DESIGN §2 "Placement"): a pod goes to the feasible node that leaves the least
free GPUs, then the least free CPU, then the first name.

`best_fit_key` is the rule; `tightest` is the one scan that applies it to explicit amounts (hypothetical
capacity, nodes a drain set leaves). `capacity._Group` keeps its nodes bucketed by free GPUs and sorted
by (free CPU, name) within a bucket: an index in exactly this key's order, and `Capacity.best_fit`
compares the index's answers of several groups with this key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

N = TypeVar("N")


def best_fit_key(free_g: int, free_c: int, g: int, c: int, name: str) -> tuple[int, int, str]:
    """What placing a pod of `g` GPUs and `c` CPU on a node with that much available leaves, then the node's
    name: the smallest key wins."""
    return (free_g - g, free_c - c, name)


def tightest(available: Iterable[tuple[N, Sequence[int]]], g: int, c: int, m: int) -> N | None:
    """Of (node, (GPUs, CPU, memory) available) pairs, the node with the smallest `best_fit_key` among those
    that hold the pod; None when none does. Nodes are anything with a `name` (a NodeState, or a Node at
    submission)."""
    best: N | None = None
    best_key: tuple[int, int, str] | None = None
    for node, (fg, fc, fm) in available:
        if fg >= g and fc >= c and fm >= m:
            key = best_fit_key(fg, fc, g, c, node.name)  # type: ignore[attr-defined]
            if best_key is None or key < best_key:
                best, best_key = node, key
    return best
