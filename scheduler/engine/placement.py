"""Gang placement with best fit (DESIGN §2 "Placement"), and the never-fits check used at submission.

Pods go in `demand.placement_order` (GPUs, CPU, memory, largest first, equal pods in their order);
each to the feasible node leaving the least free GPUs, then the least free CPU, then by name. All
pods of a job use one GPU model: the caller passes the model (named by the pods, or the one being
tried for a job that names none; None only for jobs that need no GPU and name no model). If a pod
cannot be placed the job is not placed and nothing is held. The key is `fit.best_fit_key`.

`place_job` is what the passes call: `place` with the failure memos (`memo`), or `place_keeping_off`
for a job that must keep off some nodes (the starvation guard's drain sets, `CycleState.keep_off`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .capacity import Capacity, NodeState, Take
from .demand import Demand, PodSize, named_models, placement_order
from .fit import tightest
from .reasons import Unplaceable
from .types import Node, Pod

if TYPE_CHECKING:
    from .state import CycleState

# One placed pod: (index in the job's pod order, node, part taken from capacity being released).
Placed = tuple[int, NodeState, Take]


def place(capacity: Capacity, demand: Demand, model: str | None, *, releasing: bool) -> list[Placed] | None:
    """Place the gang and take its capacity; None (and nothing held) when a pod does not fit.

    `releasing=False`: free capacity only (admission). `releasing=True`: free plus unreserved capacity
    being released, taking the released part first (a reservation for a nominated job).
    """
    pool = demand.pool
    assert pool is not None
    placed: list[Placed] = []
    for index, g, c, m in demand.order:
        node = capacity.best_fit(pool, model, g, c, m, releasing=releasing)
        if node is None:
            for (_, done_node, from_rel), (_, dg, dc, dm) in zip(placed, demand.order, strict=False):
                capacity.untake(done_node, dg, dc, dm, from_rel)  # the first len(placed) pods
            return None
        placed.append((index, node, capacity.take(node, g, c, m, releasing_first=releasing)))
    return placed


def place_job(state: CycleState, demand: Demand, model: str | None, *, releasing: bool, use_memo: bool = True
              ) -> list[Placed] | None:
    """Place the job for a pass: off the nodes it must keep off, if any; else `place`, skipping gangs the
    failure memo knows fail (`use_memo=False` right after victims made room)."""
    avoid = state.keep_off.get(demand.job.name)
    if avoid is not None:
        return place_keeping_off(state.capacity, state.allowed, demand, model, avoid, releasing=releasing)
    if not use_memo:
        return place(state.capacity, demand, model, releasing=releasing)
    memo = state.memos.released if releasing else state.memos.free
    if memo.known_to_fail(demand, model):
        return None
    placed = place(state.capacity, demand, model, releasing=releasing)
    if placed is None:
        memo.failed(demand, model)
    return placed


AllowedNodes = dict[tuple[str, str | None, frozenset[NodeState]], list[NodeState]]


def allowed_nodes(capacity: Capacity, cache: AllowedNodes, pool: str, model: str | None,
                  avoid: frozenset[NodeState]) -> list[NodeState]:
    """The schedulable nodes of `pool` (and `model`) outside `avoid`, in the capacity's order; kept in
    `cache` for the cycle, since drain sets are fixed and shared by every job after one starving job."""
    key = (pool, model, avoid)
    nodes = cache.get(key)
    if nodes is None:
        nodes = cache[key] = [n for n in capacity.schedulable_nodes(pool, model) if n not in avoid]
    return nodes


def place_keeping_off(capacity: Capacity, cache: AllowedNodes, demand: Demand, model: str | None,
                      avoid: frozenset[NodeState], *, releasing: bool) -> list[Placed] | None:
    """`place` off the nodes in `avoid`: the same best fit (counting unreserved being-released capacity
    when `releasing`), over the remaining nodes."""
    nodes = allowed_nodes(capacity, cache, demand.pool or "", model, avoid)
    if not nodes:
        return None
    placed: list[Placed] = []
    for index, g, c, m in demand.order:
        if releasing:
            available = ((n, (n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m)) for n in nodes)
        else:
            available = ((n, (n.free_g, n.free_c, n.free_m)) for n in nodes)
        node = tightest(available, g, c, m)
        if node is None:
            for (_, done, from_rel), (_, dg, dc, dm) in zip(placed, demand.order, strict=False):
                capacity.untake(done, dg, dc, dm, from_rel)
            return None
        placed.append((index, node, capacity.take(node, g, c, m, releasing_first=releasing)))
    return placed


def node_names_in_pod_order(placed: Sequence[Placed]) -> tuple[str, ...]:
    """Admission / nomination records name the node of each pod in the job's own pod order."""
    return tuple(node.name for _, node, _ in sorted(placed, key=lambda p: p[0]))


def scan_place(order: Sequence[PodSize], available: Mapping[Any, Sequence[int]]) -> bool:
    """The same best-fit rule over explicit amounts (GPUs, CPU, memory) per node, changing nothing.

    Used where capacity is hypothetical: victims not yet chosen (reclaim), an empty pool (submission).
    The keys are nodes (anything with a `name`: a NodeState or a Node).
    """
    left = {node: list(amounts) for node, amounts in available.items()}
    for _, g, c, m in order:
        best = tightest(left.items(), g, c, m)
        if best is None:
            return False
        amounts = left[best]
        amounts[0] -= g
        amounts[1] -= c
        amounts[2] -= m
    return True


def equal_pods_held(size: Sequence[int], amounts: Sequence[int], limit: int) -> int:
    """How many pods of `size` fit in `amounts` (at most `limit`: a pod asking nothing fits any number).

    For a gang of equal pods best fit places exactly as many pods as the nodes hold in all: each
    node holds this many whatever the order, and placing one lowers it by one. So such a gang fits
    iff the total reaches its pod count, and counting replaces placing.
    """
    held = limit
    for need, have in zip(size, amounts, strict=True):
        if need:
            held = min(held, have // need)
    return max(held, 0)


def _holds_count(size: Sequence[int], count: int, available: Iterable[Sequence[int]]) -> bool:
    held = 0
    for amounts in available:
        held += equal_pods_held(size, amounts, count)
        if held >= count:
            return True
    return False


def unplaceable_reason(pods: Sequence[Pod], nodes: Iterable[Node], pool: str) -> str | None:
    """Why the job could never run in `pool`, even with every schedulable node empty, as text; None if it
    could. The submission service refuses such a job with it."""
    why = unplaceable(pods, nodes, pool)
    return str(why) if why is not None else None


def unplaceable(pods: Sequence[Pod], nodes: Iterable[Node], pool: str) -> Unplaceable | None:
    """Why the job could never run in `pool`, even with every schedulable node empty; None if it could.

    The cycle shows it for jobs whose pool shrank after submission. It names the resource that fails:
    "no general node has 16 A100; the largest has 8" (`reasons.Unplaceable` renders it).
    """
    pods = tuple(pods)
    if not pods:
        return Unplaceable("no_pods", pool)
    named = named_models(pods)
    if len(named) > 1:
        return Unplaceable("two_models", pool, models=named)
    usable = [n for n in nodes if n.pool == pool and n.schedulable]
    if not usable:
        return Unplaceable("no_nodes", pool)
    needs_gpus = any(p.gpus for p in pods)
    if named:
        candidates = [n for n in usable if n.gpu_type == named[0]]
        if not candidates:
            return Unplaceable("no_model", pool, label=named[0])
    elif needs_gpus:
        candidates = [n for n in usable if n.gpus > 0]
        if not candidates:
            return Unplaceable("no_gpus", pool)
    else:
        candidates = usable
    order = placement_order(pods)
    models = sorted({n.gpu_type for n in candidates}) if needs_gpus or named else [None]
    for model in models:
        of_model = [n for n in candidates if model in (None, n.gpu_type)]
        if len({size[1:] for size in order}) == 1:  # equal pods: count, no need to place
            if _holds_count(order[0][1:], len(order), ((n.gpus, n.cpu_m, n.memory_mib) for n in of_model)):
                return None
        elif scan_place(order, {n: (n.gpus, n.cpu_m, n.memory_mib) for n in of_model}):
            return None
    label = named[0] if named else "GPUs"
    for pod in sorted(pods, key=lambda p: (-p.gpus, -p.cpu_m, -p.memory_mib)):
        why = _pod_never_fits(pod, candidates, pool, label)
        if why:
            return why
    total = max(sum(n.gpus for n in candidates if model in (None, n.gpu_type)) for model in models)
    return Unplaceable("gang", pool, label=label, need=sum(p.gpus for p in pods), largest=total, pods=len(pods))


def _pod_never_fits(pod: Pod, candidates: list[Node], pool: str, label: str) -> Unplaceable | None:
    """The first resource (GPUs, then CPU, then memory) no single node has enough of for this pod."""
    largest = max(n.gpus for n in candidates)
    if pod.gpus > largest:
        return Unplaceable("pod_gpus", pool, label=label, need=pod.gpus, largest=largest)
    with_gpus = [n for n in candidates if n.gpus >= pod.gpus]
    largest = max(n.cpu_m for n in with_gpus)
    if pod.cpu_m > largest:
        return Unplaceable("pod_cpu", pool, label=label, need=pod.cpu_m, largest=largest, gpus=pod.gpus)
    with_cpu = [n for n in with_gpus if n.cpu_m >= pod.cpu_m]
    largest = max(n.memory_mib for n in with_cpu)
    if pod.memory_mib > largest:
        return Unplaceable("pod_memory", pool, label=label, need=pod.memory_mib, largest=largest, gpus=pod.gpus)
    return None
