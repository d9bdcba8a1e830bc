"""Workloads and clusters for the simulator: the public traces and a documented format of our own.

A replay needs two things: the jobs (`TraceJob`, one per submission) and the cluster they meet
(`Cluster`: node inventory and quota tree, as engine types). Loaders here read

- the Philly trace (`philly_pollux.csv`) and its virtual-cluster sizes (`philly_vc.csv`),
- the Alibaba openb GPU-node list (`openb_gpu_node.csv`) as a heterogeneous inventory,
- a user's own cluster: a jobs CSV and a cluster YAML (format in docs/simulator.md).

Everything is deterministic: rows are sorted by submission time with the file order breaking
ties, and node names follow the file order, so two loads give identical replays.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import yaml

from scheduler.engine import scenario
from scheduler.engine.types import (
    CPU,
    DEFAULT_POOL,
    GPU_PREFIX,
    IDLE_MODES,
    MEMORY,
    Node,
    Quota,
    gpu_key,
)

# Where the public traces live, relative to the project root (see ../shared/traces/README.md).
SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
PHILLY_JOBS = "philly_pollux.csv"
PHILLY_VCS = "philly_vc.csv"
OPENB_NODES = "openb_gpu_node.csv"

# Philly's published VC sizes are in nodes; the Helios simulator assumes 8 GPUs per node. The
# trace does not say which model each job used, so the replay uses one model throughout.
PHILLY_GPUS_PER_NODE = 8
PHILLY_GPU_TYPE = "P100"
PHILLY_ROOT = "philly"


class TraceError(ValueError):
    """A trace or cluster file that cannot be read; the message names the file and the row."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One submission of a trace, before any policy decides how it is scheduled."""

    name: str
    quota: str  # the team quota (Philly: the virtual cluster) the job was submitted to
    submit_s: float  # seconds from the first submission of the trace
    duration_s: float  # run time when never interrupted
    gpus: int  # GPUs of the whole job; split into pods by `pod_sizes`
    gpu_type: str | None = None  # None: any model (one model for the whole job)
    priority: int = 1
    idle: str | None = None  # the user's idle mode; None: the policy's default


@dataclass(frozen=True, slots=True)
class Cluster:
    """A node inventory and the quota tree that divides it (engine types, ready for a Snapshot)."""

    nodes: tuple[Node, ...]
    quotas: tuple[Quota, ...]
    description: str = ""

    def capacity(self, pool: str = DEFAULT_POOL) -> dict[str, int]:
        """Resources of the schedulable nodes of one pool, as an engine resource vector."""
        total: dict[str, int] = {}
        for node in self.nodes:
            if node.pool != pool or not node.schedulable:
                continue
            key = gpu_key(node.gpu_type)
            total[key] = total.get(key, 0) + node.gpus
            total[CPU] = total.get(CPU, 0) + node.cpu_m
            total[MEMORY] = total.get(MEMORY, 0) + node.memory_mib
        return total

    @property
    def total_gpus(self) -> int:
        return sum(node.gpus for node in self.nodes if node.schedulable)

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(sorted({node.pool for node in self.nodes}))


def pod_sizes(gpus: int, max_per_pod: int) -> tuple[int, ...]:
    """GPUs of each pod of a job: as many full-node pods as needed, then the remainder.

    Philly records only a job's total GPUs; a 16-GPU job ran as two 8-GPU servers. A job of at
    most one node stays one pod, whatever its size (3 GPUs is one pod of 3).
    """
    if gpus <= max_per_pod or max_per_pod <= 0:
        return (gpus,)
    full, rest = divmod(gpus, max_per_pod)
    return (max_per_pod,) * full + ((rest,) if rest else ())


# --- Philly -------------------------------------------------------------------------------------


def load_philly_jobs(path: Path | str, limit: int | None = None) -> list[TraceJob]:
    """Jobs of philly_pollux.csv in submission order, times relative to the first submission.

    Names are `p` plus the position in that order (p00000, p00001, ...), so name order equals
    queue order among jobs submitted in the same second.
    """
    path = Path(path)
    rows: list[tuple[datetime, int, float, int, str]] = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, ("timestamp", "duration", "num_gpus", "cluster"))
        for line, row in enumerate(reader, start=2):
            try:
                submitted = datetime.fromisoformat(row["timestamp"])
                duration = float(row["duration"])
                gpus = int(row["num_gpus"])
            except ValueError as exc:
                raise TraceError(f"{path}:{line}: {exc}") from exc
            rows.append((submitted, line, duration, gpus, row["cluster"]))
    rows.sort(key=lambda r: (r[0], r[1]))
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        return []
    origin = rows[0][0]
    return [
        TraceJob(
            name=f"p{index:05d}",
            quota=vc,
            submit_s=(submitted - origin).total_seconds(),
            duration_s=duration,
            gpus=gpus,
        )
        for index, (submitted, _line, duration, gpus, vc) in enumerate(rows)
    ]


def load_philly_vcs(path: Path | str) -> dict[str, int]:
    """Virtual cluster -> size in nodes, in file order."""
    path = Path(path)
    sizes: dict[str, int] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, ("vc", "node num"))
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
        _require_columns(path, reader.fieldnames, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
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
    total_weight = sum(weights.values())
    shares: dict[str, dict[str, int]] = {team: {} for team in weights}
    for key, amount in capacity.items():
        exact = {team: amount * w / total_weight for team, w in weights.items()}
        floors = {team: math.floor(v) for team, v in exact.items()}
        left = amount - sum(floors.values())
        order = sorted(weights, key=lambda t: (-(exact[t] - floors[t]), list(weights).index(t)))
        for team in order[:left]:
            floors[team] += 1
        for team, share in floors.items():
            if share:
                shares[team][key] = share
    quotas = [Quota(name=root, parent=None, min=dict(capacity))]
    quotas += [Quota(name=team, parent=root, min=shares[team]) for team in weights]
    return tuple(quotas)


def openb_cluster(nodes: Sequence[Node], vc_nodes: Mapping[str, int], scale: float = 1.0) -> Cluster:
    """The openb inventory (scaled) shared among Philly's VCs in proportion to their sizes."""
    scaled = scale_nodes(nodes, scale)
    weights = {vc: scaled_count(n, scale) for vc, n in vc_nodes.items()}
    gpus = sum(node.gpus for node in scaled)
    return Cluster(
        nodes=scaled,
        quotas=shared_quotas(scaled, weights, PHILLY_ROOT),
        description=f"openb: {len(scaled)} nodes, {gpus} GPUs shared by {len(weights)} VCs (scale {scale:g})",
    )


# --- the user format ----------------------------------------------------------------------------

JOB_COLUMNS = ("name", "quota", "submit_s", "duration_s", "gpus")


def load_jobs_csv(path: Path | str, limit: int | None = None) -> list[TraceJob]:
    """A jobs CSV: `name,quota,submit_s,duration_s,gpus[,gpu_type,priority,idle]`.

    Rows are replayed in submission order (file order breaks ties); times are seconds and are
    shifted so the first submission is at 0. Empty optional cells take their defaults.
    """
    path = Path(path)
    jobs: list[tuple[float, int, TraceJob]] = []
    names: set[str] = set()
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, JOB_COLUMNS)
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            try:
                job = _job_from_row(row)
            except (ValueError, KeyError) as exc:
                raise TraceError(f"{where}: {exc}") from exc
            if job.name in names:
                raise TraceError(f"{where}: job name {job.name!r} is used twice")
            names.add(job.name)
            jobs.append((job.submit_s, line, job))
    jobs.sort(key=lambda item: (item[0], item[1]))
    if limit is not None:
        jobs = jobs[:limit]
    if not jobs:
        return []
    origin = jobs[0][0]
    return [replace(job, submit_s=submit - origin) for submit, _line, job in jobs]


def _job_from_row(row: Mapping[str, str | None]) -> TraceJob:
    def cell(column: str) -> str:
        return (row.get(column) or "").strip()

    name, quota = cell("name"), cell("quota")
    if not name or not quota:
        raise ValueError("name and quota must not be empty")
    submit, duration, gpus = float(cell("submit_s")), float(cell("duration_s")), int(cell("gpus"))
    if duration <= 0:
        raise ValueError(f"duration_s must be positive, got {duration}")
    if gpus < 0:
        raise ValueError(f"gpus must not be negative, got {gpus}")
    priority = int(cell("priority") or 1)
    if not 1 <= priority <= 9:
        raise ValueError(f"priority must be 1..9, got {priority}")
    idle = _idle_mode(cell("idle")) if cell("idle") else None
    return TraceJob(
        name=name,
        quota=quota,
        submit_s=submit,
        duration_s=duration,
        gpus=gpus,
        gpu_type=cell("gpu_type") or None,
        priority=priority,
        idle=idle,
    )


def _idle_mode(value: object) -> str:
    # YAML reads a bare `off` as False; accept both spellings like the scenario files do.
    text = "off" if value is False else str(value).strip().lower()
    if text not in IDLE_MODES:
        raise ValueError(f"idle must be one of {', '.join(IDLE_MODES)}, got {value!r}")
    return text


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
    return Cluster(nodes=snapshot.nodes, quotas=snapshot.quotas, description=f"{path.name}: {len(nodes)} nodes")


def scale_cluster(cluster: Cluster, scale: float) -> Cluster:
    """A user's cluster with its inventory and every quota scaled by `scale` (whole nodes, rounded up).

    Nodes are scaled kind by kind (`scale_nodes`). A quota's GPUs of a model are rounded up to whole
    nodes of that model's largest node; roots are then set to their pool's scaled capacity, and where
    rounding made children exceed their parent, the later children (file order) give back the excess.
    """
    if scale == 1:
        return cluster
    nodes = scale_nodes(cluster.nodes, scale)
    node_size: dict[str, int] = {}
    for node in nodes:
        key = gpu_key(node.gpu_type)
        node_size[key] = max(node_size.get(key, 0), node.gpus)
    scaled_cluster = Cluster(nodes=nodes, quotas=(), description=f"{cluster.description} (scale {scale:g})")

    def scale_vector(vector: Mapping[str, int]) -> dict[str, int]:
        out = {}
        for key, amount in vector.items():
            if key.startswith(GPU_PREFIX) and node_size.get(key):
                out[key] = scaled_count(math.ceil(amount / node_size[key]), scale) * node_size[key]
            else:
                out[key] = math.ceil(amount * scale - 1e-9)
        return out

    quotas: dict[str, Quota] = {}
    for quota in cluster.quotas:
        if quota.parent is None:
            minimum = scaled_cluster.capacity(quota.pool)
        else:
            minimum = scale_vector(quota.min)
        maximum = scale_vector(quota.max) if quota.max is not None else None
        quotas[quota.name] = replace(quota, min=minimum, max=maximum)
    _fit_children(quotas)
    return replace(scaled_cluster, quotas=tuple(quotas[q.name] for q in cluster.quotas))


def _fit_children(quotas: dict[str, Quota]) -> None:
    """Trim children's min so that they add up to no more than their parent's (top-down)."""
    children: dict[str, list[str]] = {}
    for quota in quotas.values():
        if quota.parent is not None:
            children.setdefault(quota.parent, []).append(quota.name)
    pending = [q.name for q in quotas.values() if q.parent is None]
    while pending:
        parent = quotas[pending.pop(0)]
        kids = children.get(parent.name, [])
        for key in {k for kid in kids for k in quotas[kid].min}:
            excess = sum(quotas[kid].min.get(key, 0) for kid in kids) - parent.min.get(key, 0)
            for kid in reversed(kids):
                if excess <= 0:
                    break
                have = quotas[kid].min.get(key, 0)
                give = min(have, excess)
                quotas[kid] = replace(quotas[kid], min={**quotas[kid].min, key: have - give})
                excess -= give
        pending.extend(kids)


def _require_columns(path: Path, found: Sequence[str] | None, needed: Iterable[str]) -> None:
    missing = [c for c in needed if c not in (found or ())]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
