"""Reservations and nomination (DESIGN §2 "Reservations", §4 `nominated`).

- `hold_in_quota`: a job that fits in quota took capacity (`placement`): admitted In Quota when every
  pod got free capacity; otherwise it is nominated, and what it took is its reservation, waiting for the
  jobs releasing that capacity to exit. A reservation takes being-released capacity first, then free
  capacity, node by node (`Capacity.take(releasing_first=True)`).
- `renew_nominations`: nominated jobs of earlier cycles come first, in pending order: one whose nodes
  now have the free capacity is admitted In Quota there; otherwise it keeps (re-takes) its reservation
  there; one whose nodes can no longer hold it, or whose quota no longer fits it, is withdrawn and goes
  through the in-quota pass like any job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .capacity import NodeState
from .demand import Demand
from .placement import Placed, node_names_in_pod_order
from .reasons import WaitingForVictims
from .types import NOMINATED, Admission

if TYPE_CHECKING:
    from .state import CycleState


def hold_in_quota(state: CycleState, demand: Demand, model: str | None, placed: list[Placed]) -> None:
    """Admit In Quota, or nominate on the reservation `placed` holds."""
    state.quotas.charge(demand.job.quota, demand.request(model), in_quota=True)
    nodes = node_names_in_pod_order(placed)
    exiting = sorted({job for _, node, from_rel in placed if any(from_rel) for job in node.releasing})
    if not exiting:
        state.decisions.admitted[demand.job.name] = Admission(in_quota=True, nodes=nodes, gpu_type=model)
    else:
        state.decisions.nominated[demand.job.name] = nodes
        state.decisions.reasons[demand.job.name] = WaitingForVictims(tuple(exiting))


def renew_nominations(state: CycleState) -> list[Demand]:
    """Serve the nominated jobs of earlier cycles; returns the jobs still to decide, in pending order."""
    return [d for d in state.queue if not (d.job.phase == NOMINATED and renew(state, d))]


def renew(state: CycleState, demand: Demand) -> bool:
    """Admit a nominated job on its nodes, or keep its reservation there; False: withdrawn."""
    job = demand.job
    if state.refusal(demand) is not None or len(job.nodes) != demand.count:
        return False
    nodes: list[NodeState] = []
    for pod, name in zip(job.pods, job.nodes, strict=True):
        node = state.capacity.nodes.get(name)
        if node is None or not node.schedulable or node.pool != demand.pool:
            return False
        if pod.gpu_type and node.model != pod.gpu_type:
            return False
        nodes.append(node)
    gpu_models = {node.model for node, pod in zip(nodes, job.pods, strict=True) if pod.gpus}
    if len(gpu_models) > 1:
        return False
    model = demand.model or next(iter(gpu_models), None)
    if state.quotas.shortfall(job.quota, demand.request(model)) is not None:
        return False
    need: dict[NodeState, list[int]] = {}
    for node, pod in zip(nodes, job.pods, strict=True):
        amounts = need.setdefault(node, [0, 0, 0])
        amounts[0] += pod.gpus
        amounts[1] += pod.cpu_m
        amounts[2] += pod.memory_mib
    on_free = all(n.free_g >= g and n.free_c >= c and n.free_m >= m for n, (g, c, m) in need.items())
    if not on_free and not all(
        n.free_g + n.rel_g >= g and n.free_c + n.rel_c >= c and n.free_m + n.rel_m >= m
        for n, (g, c, m) in need.items()
    ):
        return False
    placed: list[Placed] = [
        (i, node, state.capacity.take(node, pod.gpus, pod.cpu_m, pod.memory_mib, releasing_first=not on_free))
        for i, (node, pod) in enumerate(zip(nodes, job.pods, strict=True))
    ]
    hold_in_quota(state, demand, model, placed)
    return True
