"""What one job can get In Quota in each quota (DESIGN §2), for the quota cards and the submit form.

A job of quota Q fits in quota within the least room of Q's chain: Q's own level (for a quota with
children, `ownmin` = its min less its children's — a guarantee given to a child is the child's),
then Q's subtree and each ancestor's (min less what their subtrees hold In Quota). The engine's
functions say what each level guarantees (`effective_min`, `own_min`), so this page reads the same
figures the scheduler decides by. GPUs are per model: a job uses one model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.engine.quota import effective_min, own_min
from scheduler.engine.types import GPU_PREFIX
from scheduler.engine_rows import engine_node, engine_quota
from scheduler.models import Node, ResourceQuota


@dataclass(frozen=True)
class InQuotaRoom:
    """One quota's room for a job submitted to exactly it.

    - `now`: GPUs per model a job can still get In Quota (the least room along its chain, right now);
    - `most`: GPUs per model it could get with nothing else In Quota (the least guarantee along it);
    - `keeps_nothing`: the chain guarantees no resource at all (its jobs can only borrow idle resources);
    - `keeps_no_gpus`: it guarantees no GPU (GPU jobs can only borrow; CPU-only ones may still fit);
    - `beside_children`: the quota has children, so `most` is what it keeps beside their guarantees.
    """

    now: dict[str, int]
    most: dict[str, int]
    keeps_nothing: bool
    keeps_no_gpus: bool
    beside_children: bool

    @property
    def now_gpus(self) -> int:
        """The most GPUs of one model a job can still get In Quota."""
        return max(self.now.values(), default=0)

    @property
    def most_gpus(self) -> int:
        return max(self.most.values(), default=0)


def in_quota_rooms(
    quotas: Sequence[ResourceQuota], nodes: Iterable[Node], own_in_quota: Mapping[int, Mapping[str, int]]
) -> dict[int, InQuotaRoom]:
    """Per quota id, its `InQuotaRoom`. `own_in_quota`: quota id -> GPUs per model held In Quota by
    jobs submitted to exactly that quota; `nodes`: every node (a root stating no min is guaranteed
    its pool's capacity)."""
    nodes = [engine_node(node) for node in nodes]
    names = {q.pk: q.name for q in quotas}
    by_id = {q.pk: q for q in quotas}
    guaranteed = {q.pk: effective_min(engine_quota(q, names), nodes) for q in quotas}
    children: dict[int, list[int]] = {}
    for q in quotas:
        if q.parent_id in by_id:
            children.setdefault(q.parent_id, []).append(q.pk)
    subtree_in: dict[int, dict[str, int]] = {}

    def held(pk: int) -> dict[str, int]:
        if pk not in subtree_in:
            total = {f"{GPU_PREFIX}{model}": gpus for model, gpus in own_in_quota.get(pk, {}).items()}
            for kid in children.get(pk, ()):
                for key, gpus in held(kid).items():
                    total[key] = total.get(key, 0) + gpus
            subtree_in[pk] = total
        return subtree_in[pk]

    rooms = {}
    for q in quotas:
        # (what the level guarantees, what it holds In Quota) for each level of the chain, own level first
        levels: list[tuple[Mapping[str, int], Mapping[str, int]]] = []
        if q.pk in children:
            kept = own_min(guaranteed[q.pk], (guaranteed[kid] for kid in children[q.pk]))
            own = {f"{GPU_PREFIX}{model}": gpus for model, gpus in own_in_quota.get(q.pk, {}).items()}
            levels.append((kept, own))
        seen = set()
        level: ResourceQuota | None = q
        while level is not None and level.pk not in seen:
            seen.add(level.pk)
            levels.append((guaranteed[level.pk], held(level.pk)))
            level = by_id.get(level.parent_id) if level.parent_id else None
        keys = {key for minimum, _ in levels for key in minimum}
        most = {key: min(minimum.get(key, 0) for minimum, _ in levels) for key in keys}
        gpu_keys = sorted(key for key in keys if key.startswith(GPU_PREFIX))
        now = {key: max(0, min(minimum.get(key, 0) - used.get(key, 0) for minimum, used in levels))
               for key in gpu_keys}
        rooms[q.pk] = InQuotaRoom(
            now={key[len(GPU_PREFIX):]: amount for key, amount in now.items() if most[key] > 0},
            most={key[len(GPU_PREFIX):]: most[key] for key in gpu_keys if most[key] > 0},
            keeps_nothing=not any(amount > 0 for amount in most.values()),
            keeps_no_gpus=not any(most[key] > 0 for key in gpu_keys),
            beside_children=q.pk in children,
        )
    return rooms
