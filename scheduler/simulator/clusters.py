"""Clusters for the simulator: Philly's virtual clusters, the openb inventory (shared by Philly's VCs or by
the openb pods' QoS classes), a user's cluster YAML.

A `Cluster` (traces.py) is a node inventory and the quota tree that divides it, as engine types.
Node names follow the file order, so two loads give identical replays. `--scale` shrinks a
cluster: Philly by VC (`philly_cluster`), openb and cluster files node kind by node kind
(`scale_nodes`), quotas so that each keeps at least its scaled share (`scale_cluster`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import yaml

from scheduler.engine.types import CPU, MEMORY, Node, Quota, gpu_key
from scheduler.engine_tools import scenario

from .traces import Cluster, TraceError, TraceJob, require_columns

# Philly's published VC sizes are in nodes; the Helios simulator assumes 8 GPUs per node. The
# trace does not say which model each job used, so the replay uses one model throughout.
PHILLY_GPUS_PER_NODE = 8
PHILLY_GPU_TYPE = "P100"
PHILLY_ROOT = "philly"


def load_philly_vcs(path: Path | str) -> dict[str, int]:
    """Virtual cluster -> size in nodes, in file order."""
    path = Path(path)
    sizes: dict[str, int] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        require_columns(path, reader.fieldnames, ("vc", "node num"))
        for line, row in enumerate(reader, start=2):
            try:
                sizes[row["vc"]] = int(row["node num"])
            except ValueError as exc:
                raise TraceError(f"{path}:{line}: {exc}") from exc
    return sizes


def scaled_count(count: int, scale: float) -> int:
    """`count` whole things times `scale`, rounded up (a quota of 1 node keeps 1 node at 0.1)."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    # The small epsilon keeps 64 * 0.5 from rounding up to 33 through float noise.
    return math.ceil(count * scale - 1e-9)


def philly_cluster(vc_nodes: Mapping[str, int], scale: float = 1.0) -> Cluster:
    """One 8-GPU P100 node per VC node, one root quota, one child quota per VC (min = its nodes).

    The cluster is exactly the sum of the VCs, so the children's guarantees fill the root.
    CPU and memory are not recorded by the trace and are left unconstrained (0 everywhere).
    """
    sizes = {vc: scaled_count(nodes, scale) for vc, nodes in vc_nodes.items()}
    total_nodes = sum(sizes.values())
    nodes = tuple(
        Node(name=f"philly-{i:04d}", gpu_type=PHILLY_GPU_TYPE, gpus=PHILLY_GPUS_PER_NODE, cpu_m=0, memory_mib=0)
        for i in range(total_nodes)
    )
    key = gpu_key(PHILLY_GPU_TYPE)
    quotas = [Quota(name=PHILLY_ROOT, parent=None, min={key: total_nodes * PHILLY_GPUS_PER_NODE})]
    quotas += [
        Quota(name=vc, parent=PHILLY_ROOT, min={key: size * PHILLY_GPUS_PER_NODE}) for vc, size in sizes.items()
    ]
    return Cluster(
        nodes=nodes,
        quotas=tuple(quotas),
        description=f"Philly: {len(sizes)} VCs, {total_nodes} x 8 {PHILLY_GPU_TYPE} (scale {scale:g})",
    )


# --- openb inventory ----------------------------------------------------------------------------


def load_openb_nodes(path: Path | str) -> tuple[Node, ...]:
    """GPU nodes of openb_gpu_node.csv in file order (CPU in millicores and memory in MiB as given)."""
    path = Path(path)
    nodes: list[Node] = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        require_columns(path, reader.fieldnames, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
        for line, row in enumerate(reader, start=2):
            try:
                nodes.append(
                    Node(
                        name=row["sn"],
                        gpu_type=row["model"],
                        gpus=int(row["gpu"]),
                        cpu_m=int(row["cpu_milli"]),
                        memory_mib=int(row["memory_mib"]),
                    )
                )
            except ValueError as exc:
                raise TraceError(f"{path}:{line}: {exc}") from exc
    return tuple(nodes)


def scale_nodes(nodes: Sequence[Node], scale: float) -> tuple[Node, ...]:
    """Keep ceil(count x scale) nodes of each kind (pool, model, GPUs, CPU, memory), first in file order.

    Scaling kind by kind keeps the inventory's mix (an 8-GPU kind never vanishes at 0.25), so the
    same jobs stay placeable on the smaller cluster.
    """
    if scale == 1:
        return tuple(nodes)
    kinds: dict[tuple, list[Node]] = {}
    for node in nodes:
        kinds.setdefault((node.pool, node.gpu_type, node.gpus, node.cpu_m, node.memory_mib), []).append(node)
    keep = {id(node) for group in kinds.values() for node in group[: scaled_count(len(group), scale)]}
    return tuple(node for node in nodes if id(node) in keep)


def shared_quotas(nodes: Sequence[Node], weights: Mapping[str, int], root: str) -> tuple[Quota, ...]:
    """A root quota over all `nodes` and one child per team, sharing every GPU model by `weights`.

    Each model's GPUs are split in proportion to the weights by the largest-remainder method
    (ties: file order), so the children add up exactly to the root on every model.
    """
    capacity: dict[str, int] = {}
    for node in nodes:
        if node.schedulable:
            capacity[gpu_key(node.gpu_type)] = capacity.get(gpu_key(node.gpu_type), 0) + node.gpus
    shares: dict[str, dict[str, int]] = {team: {} for team in weights}
    for key, amount in capacity.items():
        for team, share in largest_remainder(amount, weights).items():
            if share:
                shares[team][key] = share
    quotas = [Quota(name=root, parent=None, min=dict(capacity))]
    quotas += [Quota(name=team, parent=root, min=shares[team]) for team in weights]
    return tuple(quotas)


def largest_remainder(amount: int, weights: Mapping[str, float]) -> dict[str, int]:
    """`amount` whole units split in proportion to `weights` (floors, then one unit each to the largest
    remainders; ties: the weights' order), so the parts add up exactly to `amount`."""
    total_weight = sum(weights.values())
    if total_weight <= 0:
        return {team: 0 for team in weights}
    exact = {team: amount * w / total_weight for team, w in weights.items()}
    floors = {team: math.floor(v) for team, v in exact.items()}
    left = amount - sum(floors.values())
    order = sorted(weights, key=lambda t: (-(exact[t] - floors[t]), list(weights).index(t)))
    for team in order[:left]:
        floors[team] += 1
    return floors


# --- openb pods on the openb inventory ----------------------------------------------------------

OPENB_ROOT = "openb"
GPU_DEMAND = "gpus"  # the key of a team's GPU demand in `demand_weights` (any model)


def demand_weights(jobs: Sequence[TraceJob]) -> dict[str, dict[str, float]]:
    """Per team: its GPU-seconds (`GPU_DEMAND`), millicore-seconds (`CPU`) and MiB-seconds (`MEMORY`) over
    the jobs' run times: what it used of each resource, the share of it its quota is given."""
    demand: dict[str, dict[str, float]] = {}
    for job in jobs:
        team = demand.setdefault(job.quota, {GPU_DEMAND: 0.0, CPU: 0.0, MEMORY: 0.0})
        team[GPU_DEMAND] += job.gpus * job.duration_s
        team[CPU] += job.cpu_m * job.duration_s
        team[MEMORY] += job.memory_mib * job.duration_s
    return dict(sorted(demand.items()))


def demand_shared_quotas(nodes: Sequence[Node], jobs: Sequence[TraceJob], root: str = OPENB_ROOT) -> tuple[Quota, ...]:
    """A root quota over all `nodes` (GPUs of every model, CPU, memory) and one child per team of `jobs`,
    each resource split by the teams' share of its demand (`demand_weights`, `largest_remainder`): every
    GPU model by GPU-seconds (the jobs name no model), CPU by millicore-seconds, memory by MiB-seconds.

    The pods ask CPU and memory, and a resource a quota's `min` leaves out counts as 0 (DESIGN §2), so
    the guarantees must state them too; sharing each by its own demand keeps a class that asks much CPU
    per GPU able to fit its jobs in quota.
    """
    weights = demand_weights(jobs)
    capacity = Cluster(nodes=tuple(nodes), quotas=()).capacity()
    shares: dict[str, dict[str, int]] = {team: {} for team in weights}
    for key, amount in capacity.items():
        demand = GPU_DEMAND if key not in (CPU, MEMORY) else key
        for team, share in largest_remainder(amount, {t: w[demand] for t, w in weights.items()}).items():
            if share:
                shares[team][key] = share
    quotas = [Quota(name=root, parent=None, min=dict(capacity))]
    quotas += [Quota(name=team, parent=root, min=shares[team]) for team in weights]
    return tuple(quotas)


def openb_pods_cluster(nodes: Sequence[Node], jobs: Sequence[TraceJob], scale: float = 1.0) -> Cluster:
    """The openb inventory with one quota per QoS class of the pods (`demand_shared_quotas`), then scaled like
    a cluster file (`scale_cluster`: each class keeps at least its scaled share of every resource)."""
    quotas = demand_shared_quotas(nodes, jobs)
    full = Cluster(nodes=tuple(nodes), quotas=quotas, source="openb")
    scaled = scale_cluster(full, scale)
    classes = f"shared by {len(quotas) - 1} QoS classes"
    if scale == 1:
        return replace(scaled, description=f"openb: {len(nodes)} nodes, {scaled.total_gpus} GPUs {classes}")
    return replace(scaled, description=scaled.description.replace(" GPUs (", f" GPUs {classes} (", 1))


def openb_cluster(nodes: Sequence[Node], vc_nodes: Mapping[str, int], scale: float = 1.0) -> Cluster:
    """The openb inventory shared among Philly's VCs in proportion to their sizes, then scaled.

    The whole inventory is shared first (`shared_quotas`), then scaled like a cluster file
    (`scale_cluster`), so each VC keeps at least its scaled share of every GPU model.
    """
    full = Cluster(nodes=tuple(nodes), quotas=shared_quotas(nodes, vc_nodes, PHILLY_ROOT), source="openb")
    scaled = scale_cluster(full, scale)
    vcs = f"shared by {len(vc_nodes)} VCs"
    if scale == 1:
        return replace(scaled, description=f"openb: {len(nodes)} nodes, {scaled.total_gpus} GPUs {vcs}")
    return replace(scaled, description=scaled.description.replace(" GPUs (", f" GPUs {vcs} (", 1))


def load_cluster_yaml(path: Path | str) -> Cluster:
    """A cluster file: `nodes:` and `quotas:` written as in scenario files (DESIGN §4).

    Nodes may carry `count: N` to stand for N identical nodes named `<name>-0 .. <name>-(N-1)`;
    everything else (units, defaults, the checks of the quota tree) is the scenario reader's.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TraceError(f"{path}: {exc}") from exc
    if not isinstance(data, dict) or set(data) != {"nodes", "quotas"}:
        raise TraceError(f"{path}: expected a mapping with exactly `nodes:` and `quotas:`")
    nodes = []
    for i, spec in enumerate(data["nodes"] or []):
        if not isinstance(spec, dict) or "count" not in spec:
            nodes.append(spec)
            continue
        count = spec["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise TraceError(f"{path}: nodes[{i}].count: expected a whole number of at least 1, got {count!r}")
        base = {k: v for k, v in spec.items() if k != "count"}
        nodes.extend({**base, "name": f"{base.get('name')}-{n}"} for n in range(count))
    try:
        snapshot = scenario.parse({"nodes": nodes, "quotas": data["quotas"]}, source=str(path)).snapshot
    except scenario.ScenarioError as exc:
        raise TraceError(str(exc)) from exc
    return Cluster(
        nodes=snapshot.nodes, quotas=snapshot.quotas, description=f"{path.name}: {len(nodes)} nodes", source=path.name
    )


def scale_cluster(cluster: Cluster, scale: float) -> Cluster:
    """A user's cluster with its inventory and every quota scaled by `scale`; each guarantee keeps its share.

    - Nodes: `ceil(count x scale)` of each kind (`scale_nodes`), so every pool and model keeps at
      least its share of the capacity.
    - Quotas other than roots: every amount of `min` and `max` (GPUs of a model, millicores, MiB)
      times `scale`, rounded **up** to a whole unit (a guarantee of 550 G2 GPUs at 0.01 is 6), so
      no guarantee falls below its scaled share. Then, children before parents, a parent whose
      children now add up to more than its `min` is raised to their sum (a `max` below a raised
      `min` is raised with it).
    - Roots: their pool's scaled capacity. Where the rounded-up children of a root ask more of a
      resource than the scaled nodes have, nodes are added, copies of the pool's most common kind
      having it (named `<first of the kind>+1`, `+2`, ...), until they fit; the description says
      how many.
    """
    if scale == 1:
        return cluster
    nodes = list(scale_nodes(cluster.nodes, scale))
    quotas = {q.name: _scaled_quota(q, scale) for q in cluster.quotas}
    _raise_parents(quotas)
    added = _add_nodes_for_roots(nodes, quotas)
    scaled = Cluster(nodes=tuple(nodes), quotas=(), source=cluster.source)
    for name, quota in quotas.items():
        if quota.parent is None:
            quotas[name] = replace(quota, min=scaled.capacity(quota.pool))
    source = cluster.source or cluster.description or "cluster"
    extra = f"; {added} node(s) added so that the guarantees fit" if added else ""
    return replace(
        scaled,
        quotas=tuple(quotas[q.name] for q in cluster.quotas),
        description=(
            f"{source}: {len(nodes)} nodes, {scaled.total_gpus} GPUs (scale {scale:g} of {len(cluster.nodes)} nodes{extra})"
        ),
    )


def _scaled_quota(quota: Quota, scale: float) -> Quota:
    def up(vector: Mapping[str, int]) -> dict[str, int]:
        return {key: scaled_count(amount, scale) for key, amount in vector.items()}

    return replace(quota, min=up(quota.min), max=up(quota.max) if quota.max is not None else None)


def _raise_parents(quotas: dict[str, Quota]) -> None:
    """Children before parents: raise a non-root parent's min to what its children add up to."""

    def depth(name: str) -> int:
        parent, count = quotas[name].parent, 0
        while parent is not None:
            parent, count = quotas[parent].parent, count + 1
        return count

    children: dict[str, list[str]] = {}
    for quota in quotas.values():
        if quota.parent is not None:
            children.setdefault(quota.parent, []).append(quota.name)
    for name in sorted(children, key=depth, reverse=True):
        parent = quotas[name]
        if parent.parent is None:
            continue  # roots hold their pool's capacity (nodes are added if needed)
        minimum = dict(parent.min)
        for key in {k for kid in children[name] for k in quotas[kid].min}:
            minimum[key] = max(minimum.get(key, 0), sum(quotas[kid].min.get(key, 0) for kid in children[name]))
        maximum = parent.max
        if maximum is not None:
            maximum = {k: max(v, minimum.get(k, 0)) for k, v in maximum.items()}
        quotas[name] = replace(parent, min=minimum, max=maximum)


def _add_nodes_for_roots(nodes: list[Node], quotas: Mapping[str, Quota]) -> int:
    """Add copies of nodes until each root's children fit its pool's capacity; returns how many."""
    added = 0
    for root in [q for q in quotas.values() if q.parent is None]:
        kids = [q for q in quotas.values() if q.parent == root.name]
        need: dict[str, int] = {}
        for kid in kids:
            for key, amount in kid.min.items():
                need[key] = need.get(key, 0) + amount
        for key, amount in sorted(need.items()):
            while Cluster(nodes=tuple(nodes), quotas=()).capacity(root.pool).get(key, 0) < amount:
                kind = _most_common_kind(nodes, root.pool, key)
                if kind is None:
                    break  # no node of the pool has this resource: the engine will say so
                copies = sum(1 for n in nodes if n.name.startswith(f"{kind.name}+"))
                nodes.append(replace(kind, name=f"{kind.name}+{copies + 1}"))
                added += 1
    return added


def _most_common_kind(nodes: Sequence[Node], pool: str, key: str) -> Node | None:
    """The first node of the pool's most common kind that has resource `key`."""
    counts: dict[tuple, list[Node]] = {}
    for node in nodes:
        has = {gpu_key(node.gpu_type): node.gpus, CPU: node.cpu_m, MEMORY: node.memory_mib}.get(key, 0)
        if node.pool == pool and node.schedulable and has > 0:
            counts.setdefault((node.gpu_type, node.gpus, node.cpu_m, node.memory_mib), []).append(node)
    if not counts:
        return None
    return max(counts.values(), key=len)[0]
