"""The victims for one job (DESIGN §2 "Victim selection"), and taking them.

Take candidates in `candidates_ordering` until the job fits, then `fill_back`. "Fits" is placement's own
best fit over free + unreserved being-released capacity + what the chosen victims hold, so the
placement that follows a successful selection always succeeds. Two ways to the same answer:

- `walk`: over a `VictimQueue`'s candidates with a `CountingFit` (gangs of equal pods: a count) or a
  `GreedyFit` (mixed pod sizes: best fit itself);
- the node index (`index.VictimIndex`), for gangs of equal pods that ask for GPUs on one model: time that
  grows with the victims taken, not with the candidates. `search` picks one; `select` adds the failure
  memo and the cycle's own candidates. A job that must keep off some nodes (a drain set) always walks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ..capacity import NodeState
from ..demand import Demand, PodSize
from ..placement import allowed_nodes, equal_pods_held, scan_place
from ..types import PREEMPT_RECLAIM, PREEMPT_WITHIN, Preemption, Shrink
from .candidates import Victim, VictimQueue
from .fill_back import Fit, fill_back
from .index import VictimIndex

if TYPE_CHECKING:
    from ..state import CycleState


class CountingFit:
    """For a gang whose pods are all one size: it fits iff the nodes hold that many pods in all
    (`placement.equal_pods_held`), and a victim changes only its own nodes' terms."""

    def __init__(
        self,
        shape: tuple[int, int, int],
        count: int,
        base: Iterable[NodeState],
        could_host: Callable[[NodeState], bool],
    ) -> None:
        self.shape = shape
        self.count = count
        self.could_host = could_host
        self.available: dict[NodeState, list[int]] = {}
        # Nodes that may already hold a pod on free + being-released capacity (the caller passes those
        # with enough GPUs); victims add to these or to others.
        self.total = sum(self._holds(n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m) for n in base)

    def _holds(self, g: int, c: int, m: int) -> int:
        return equal_pods_held(self.shape, (g, c, m), self.count)

    def add(self, victim: Victim, sign: int = 1) -> None:
        for node, g, c, m in victim.pods:
            amounts = self.available.get(node)
            if amounts is None:
                if not self.could_host(node):
                    continue
                amounts = self.available[node] = [
                    node.free_g + node.rel_g, node.free_c + node.rel_c, node.free_m + node.rel_m
                ]
            before = self._holds(*amounts)
            amounts[0] += sign * g
            amounts[1] += sign * c
            amounts[2] += sign * m
            self.total += self._holds(*amounts) - before

    def fits(self) -> bool:
        return self.total >= self.count


class GreedyFit:
    """For a gang of mixed pod sizes: run best fit itself over the candidate nodes."""

    def __init__(self, order: Sequence[PodSize], nodes: Iterable[NodeState], could_host: Callable[[NodeState], bool]):
        self.order = order
        self.available = {
            n: [n.free_g + n.rel_g, n.free_c + n.rel_c, n.free_m + n.rel_m] for n in nodes if could_host(n)
        }

    def add(self, victim: Victim, sign: int = 1) -> None:
        for node, g, c, m in victim.pods:
            amounts = self.available.get(node)
            if amounts is not None:
                amounts[0] += sign * g
                amounts[1] += sign * c
                amounts[2] += sign * m

    def fits(self) -> bool:
        return scan_place(self.order, self.available)


def select_victims(candidates: Iterable[Victim], fit: Fit[Victim]) -> list[Victim] | None:
    """The victims to preempt, in candidate order; [] when the job fits already; None when even all
    candidates would not make room."""
    if fit.fits():
        return []
    chosen: list[Victim] = []
    for victim in candidates:
        fit.add(victim)
        chosen.append(victim)
        if fit.fits():
            return fill_back(chosen, fit)
    return None


def select(state: CycleState, demand: Demand, model: str | None) -> list[Victim] | None:
    """The job's victims among the cycle's candidates, with the reclaim failure memo."""
    if demand.job.name in state.keep_off:
        return walk(state, demand, model, state.victims)  # the index knows no drain sets
    memo = state.memos.reclaim
    if memo.known_to_fail(demand, model):
        return None
    victims = search(state, demand, model)
    if victims is None:
        memo.failed(demand, model)
    return victims


def indexed(demand: Demand, model: str | None) -> bool:
    """Victims for this job are found with the node index: equal pods that ask for GPUs, on a model."""
    return demand.shape is not None and demand.shape[0] > 0 and model is not None


def search(state: CycleState, demand: Demand, model: str | None) -> list[Victim] | None:
    """The victims for `demand` on `model`; None when reclaiming every candidate would not make room.
    Gangs of equal pods with GPUs use the node index; the rest (mixed pod sizes, GPU-less pods) walk."""
    shape = demand.shape
    # The index knows whole jobs only: with §2c's units among the candidates, walk (exact either way).
    if shape is not None and indexed(demand, model) and not state.victims.has_units:
        if state.victim_index is None:  # built on the first search that can use it
            state.victim_index = VictimIndex(state.victims.untaken(), state.capacity)
        return state.victim_index.select(demand.pool or "", model, shape, demand.count)  # type: ignore[arg-type]
    return walk(state, demand, model, state.victims)


def walk(state: CycleState, demand: Demand, model: str | None, queue: VictimQueue) -> list[Victim] | None:
    """§2's victim walk over `queue`'s candidates."""
    pool = demand.pool or ""
    shape = demand.shape
    avoid = state.keep_off.get(demand.job.name, frozenset())
    if avoid and not allowed_nodes(state.capacity, state.allowed, pool, model, avoid):
        return None  # every node it could use is in an earlier drain set
    could_host = host_test(state, demand, model)
    fit: CountingFit | GreedyFit
    if shape is not None:
        base = [n for n in state.capacity.nodes_with_room(pool, model, shape[0]) if n not in avoid]
        fit = CountingFit(shape, demand.count, base, could_host)
    else:
        fit = GreedyFit(demand.order, state.capacity.schedulable_nodes(pool, model), could_host)
    return select_victims(queue.candidates(pool, model, could_host), fit)


def host_test(state: CycleState, demand: Demand, model: str | None) -> Callable[[NodeState], bool]:
    """Whether the job could be placed on a node: right pool and model, schedulable, big enough for
    one of its pods, and in no drain set it must keep off."""
    avoid = state.keep_off.get(demand.job.name, frozenset())
    pool = demand.pool or ""
    shape = demand.shape
    sizes = [size[1:] for size in demand.order] if shape is None else [shape]

    answers: dict[NodeState, bool] = {}  # asked for the same nodes again and again while choosing

    def could_host(node: NodeState) -> bool:
        answer = answers.get(node)
        if answer is None:
            answer = answers[node] = (
                node.schedulable
                and node not in avoid
                and node.pool == pool
                and (model is None or node.model == model)
                and any(node.holds(*size) for size in sizes)
            )
        return answer

    return could_host


def take(state: CycleState, victim: Victim, demand: Demand) -> None:
    """Preempt a chosen victim for `demand`, or shrink its job by one extra pod (§2c): its capacity is
    being released from now on."""
    if victim.extra is not None:
        if victim.job.name not in state.decisions.preempted:  # its job taken whole already: nothing left
            shrink(state, victim, demand)
        return
    shrunk = state.decisions.shrunk.get(victim.job.name)
    gone = shrunk.indexes if shrunk is not None else ()
    # A whole elastic job: its base and the extra pods not shrunk already (those are being released).
    pods = victim.pods + tuple(pod for extra in victim.extras if extra.extra not in gone for pod in extra.pods)
    state.victims.take(victim)
    chosen = state.policies.victim_chosen
    if chosen is not None:
        chosen(state, victim)
    if state.victim_index is not None:
        state.victim_index.take(victim)
    for node, g, c, m in pods:
        state.capacity.release(node, g, c, m, victim.job.name)
    if victim.in_quota:
        # An In Quota victim (§2b) stops counting against its quota once chosen; a Not in Quota one keeps
        # counting towards `max` until the cycle ends: its pods still run.
        state.quotas.release(victim.quota, victim.request)
        state.quotas.demote(victim.quota, victim.request)
    name = victim.job.name
    # Its kind is what it was when the cycle began: a job demoted and then preempted was In Quota.
    kind = PREEMPT_WITHIN if victim.job.in_quota else PREEMPT_RECLAIM
    state.decisions.preempted[name] = Preemption(name, demand.job.name, demand.job.quota, kind)
    state.decisions.shrunk.pop(name, None)  # shrunk first, then preempted whole: a preemption
    # more capacity is being released now, on the victim's nodes
    state.memos.released.forget({(node.pool, node.model) for node, *_ in pods})


def shrink(state: CycleState, unit: Victim, demand: Demand) -> None:
    """§2c: one extra pod of a running elastic job is reclaimed; the job keeps running. Like a Not in Quota
    victim, the pod counts towards `max` until the cycle ends."""
    state.victims.take(unit)
    chosen = state.policies.victim_chosen
    if chosen is not None:
        chosen(state, unit)
    for node, g, c, m in unit.pods:
        state.capacity.release(node, g, c, m, unit.job.name)
    name = unit.job.name
    earlier = state.decisions.shrunk.get(name)
    indexes = (earlier.indexes if earlier is not None else ()) + (unit.extra,)  # type: ignore[operator]
    # The first job that took a pod of it names the shrink (the event's "for job").
    for_job, by_quota = (earlier.for_job, earlier.by_quota) if earlier is not None else (demand.job.name,
                                                                                         demand.job.quota)
    state.decisions.shrunk[name] = Shrink(indexes, for_job, by_quota)
    state.memos.released.forget({(node.pool, node.model) for node, *_ in unit.pods})
