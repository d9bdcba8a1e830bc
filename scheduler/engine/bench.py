"""Synthetic clusters for measuring the engine, with job sizes drawn from the Philly trace.

`measure()` times one full cycle of each of two snapshots:
- `build_synthetic_snapshot`: a half-busy cluster (In Quota and idle jobs running) and a long
  queue of mixed jobs; decisions_per_s = queued jobs decided per second of the cycle;
- `build_reclaim_heavy_snapshot`: every node full of idle (Not in Quota) jobs while teams' In Quota
  jobs queue up, so most of them must reclaim; reclaim_cycle_s = the length of that cycle.

Job GPU counts follow the Philly trace's `num_gpus` mix (`shared/traces/philly_pollux.csv` beside
the project root); a job wider than a node becomes several full-node pods. Without the trace file,
a built-in copy of its mix is used and a note is printed.
"""

from __future__ import annotations

import csv
import math
import random
import sys
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from .cycle import run_cycle
from .types import (
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    NOMINATED,
    PENDING,
    RUNNING,
    Job,
    Node,
    Pod,
    Quota,
    Snapshot,
    gpu_key,
)

TRACES_DIR = Path(__file__).resolve().parents[3] / "shared" / "traces"
PHILLY = "philly_pollux.csv"
# num_gpus counts in philly_pollux.csv (82,247 jobs), used when the file is absent.
PHILLY_MIX = {1: 76627, 2: 1818, 4: 1870, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}
MODELS = ("A100", "H100")
NODE_CPU_CORES = 96
NODE_MEMORY_GIB = 1024
MEMORY_GIB_PER_GPU = 64
CPU_CORES_PER_GPU = (6, 8, 10)  # a little spread, so pods differ in more than GPUs


@lru_cache(maxsize=4)
def gpu_sizes(traces_dir: Path | None = None) -> tuple[int, ...]:
    """The trace's job sizes, one entry per job (sampling them reproduces its mix)."""
    path = (traces_dir or TRACES_DIR) / PHILLY
    try:
        with path.open(newline="") as handle:
            return tuple(int(row["num_gpus"]) for row in csv.DictReader(handle) if row.get("num_gpus"))
    except OSError:
        print(f"note: {path} not found; using the built-in copy of the Philly num_gpus mix", file=sys.stderr)
        return tuple(size for size, count in PHILLY_MIX.items() for _ in range(count))


def _pods(rng: random.Random, gpus: int, gpus_per_node: int, model: str | None) -> tuple[Pod, ...]:
    per_gpu_cpu = rng.choice(CPU_CORES_PER_GPU)
    width = min(gpus, gpus_per_node)
    count = math.ceil(gpus / gpus_per_node)  # 12 GPUs on 8-GPU nodes: two full-node pods
    pod = Pod(role="worker", gpus=width, gpu_type=model, cpu_m=width * per_gpu_cpu * 1000,
              memory_mib=width * MEMORY_GIB_PER_GPU * 1024)
    return (pod,) * count


def _nodes(count: int, gpus_per_node: int) -> list[Node]:
    split = int(count * 0.6)  # 60% A100, 40% H100
    return [
        Node(name=f"gpu-{i:04d}", gpu_type=MODELS[0] if i < split else MODELS[1], gpus=gpus_per_node,
             cpu_m=NODE_CPU_CORES * 1000, memory_mib=NODE_MEMORY_GIB * 1024)
        for i in range(count)
    ]


def _team_weights(quotas: int) -> list[float]:
    """Philly-like skew: two teams submit most of the work, the rest trail off."""
    return [0.35, 0.35] + [0.3 / max(quotas - 2, 1)] * (quotas - 2) if quotas > 2 else [1.0] * quotas


def _quotas(nodes: list[Node], quotas: int, rng: random.Random, with_max: bool) -> list[Quota]:
    """A root (guaranteed the pool) and `quotas` teams sharing the guarantee unevenly."""
    capacity = {model: sum(n.gpus for n in nodes if n.gpu_type == model) for model in MODELS}
    shares = [rng.uniform(0.5, 2.0) for _ in range(quotas)]
    total = sum(shares)
    out = [Quota(name="root", parent=None)]
    for i, share in enumerate(shares):
        gpus = {gpu_key(m): int(capacity[m] * share / total) for m in MODELS}
        minimum = dict(gpus)
        minimum["cpu"] = sum(gpus.values()) * max(CPU_CORES_PER_GPU) * 1000
        minimum["memory"] = sum(gpus.values()) * MEMORY_GIB_PER_GPU * 1024
        maximum = {key: amount * 3 // 2 for key, amount in gpus.items()} if with_max and i % 4 == 3 else None
        out.append(Quota(name=f"team-{i:02d}", parent="root", min=minimum, max=maximum))
    # Children must not add up to more than the root: per-team cpu/memory follow their GPUs.
    return out


class _Filler:
    """First fit over shuffled nodes, for building a consistent set of running jobs."""

    def __init__(self, nodes: list[Node], rng: random.Random) -> None:
        self.order = [n.name for n in nodes]
        rng.shuffle(self.order)
        self.free = {n.name: [n.gpus, n.cpu_m, n.memory_mib] for n in nodes}
        self.model = {n.name: n.gpu_type for n in nodes}

    def place(self, pods: Sequence[Pod], model: str) -> tuple[str, ...] | None:
        chosen: list[str] = []
        taken: list[tuple[str, Pod]] = []
        for pod in pods:
            for node in self.order:
                free = self.free[node]
                if self.model[node] == model and free[0] >= pod.gpus and free[1] >= pod.cpu_m and free[2] >= pod.memory_mib:
                    free[0] -= pod.gpus
                    free[1] -= pod.cpu_m
                    free[2] -= pod.memory_mib
                    chosen.append(node)
                    taken.append((node, pod))
                    break
            else:
                for node, done in taken:
                    self.free[node][0] += done.gpus
                    self.free[node][1] += done.cpu_m
                    self.free[node][2] += done.memory_mib
                return None
        return tuple(chosen)


def build_synthetic_snapshot(
    nodes: int = 1000,
    gpus_per_node: int = 8,
    quotas: int = 20,
    pending: int = 10000,
    seed: int = 0,
    traces_dir: Path | None = None,
    busy: float = 0.5,
) -> Snapshot:
    """About `busy` of the GPUs running (In Quota up to each team's min, the rest idle jobs), and
    `pending` queued jobs of all idle modes, priorities and sizes."""
    rng = random.Random(seed)
    sizes = gpu_sizes(traces_dir)
    node_list = _nodes(nodes, gpus_per_node)
    quota_list = _quotas(node_list, quotas, rng, with_max=True)
    teams = quota_list[1:]
    weights = _team_weights(quotas)
    inq = {q.name: dict.fromkeys(q.min, 0) for q in teams}
    used = {q.name: dict.fromkeys(q.min, 0) for q in teams}
    filler = _Filler(node_list, rng)
    jobs: list[Job] = []
    target = busy * nodes * gpus_per_node
    running_gpus = 0
    while running_gpus < target:
        team = rng.choices(teams, weights)[0]
        model = rng.choice(MODELS)
        pods = _pods(rng, rng.choice(sizes), gpus_per_node, model)
        request = {gpu_key(model): sum(p.gpus for p in pods), "cpu": sum(p.cpu_m for p in pods),
                   "memory": sum(p.memory_mib for p in pods)}
        in_quota = all(inq[team.name].get(k, 0) + v <= team.min.get(k, 0) for k, v in request.items())
        if team.max is not None and any(used[team.name].get(k, 0) + v > team.max[k]
                                        for k, v in request.items() if k in team.max):
            continue
        placed = filler.place(pods, model)
        if placed is None:
            break
        for k, v in request.items():
            used[team.name][k] = used[team.name].get(k, 0) + v
            if in_quota:
                inq[team.name][k] = inq[team.name].get(k, 0) + v
        running_gpus += request[gpu_key(model)]
        jobs.append(Job(name=f"run-{len(jobs):05d}", quota=team.name, pods=pods, priority=rng.randint(1, 3),
                        idle=IDLE_OFF if in_quota else rng.choice((IDLE_ACCEPTABLE, IDLE_ONLY)),
                        submitted_at=float(len(jobs)), phase=RUNNING, in_quota=in_quota,
                        started_at=float(len(jobs)), nodes=placed))
    for i in range(pending):
        team = rng.choices(teams, weights)[0]
        named = rng.random() < 0.8
        jobs.append(Job(
            name=f"job-{i:05d}", quota=team.name,
            pods=_pods(rng, rng.choice(sizes), gpus_per_node, rng.choice(MODELS) if named else None),
            priority=rng.choices((1, 2, 3, 5, 9), (50, 25, 15, 7, 3))[0],
            idle=rng.choices((IDLE_OFF, IDLE_ACCEPTABLE, IDLE_ONLY), (55, 35, 10))[0],
            submitted_at=10_000.0 + i,
        ))
    return Snapshot(nodes=tuple(node_list), quotas=tuple(quota_list), jobs=tuple(jobs))


def build_reclaim_heavy_snapshot(
    nodes: int = 1000,
    gpus_per_node: int = 8,
    quotas: int = 20,
    pending: int = 2000,
    seed: int = 0,
    traces_dir: Path | None = None,
) -> Snapshot:
    """Every node full of idle jobs of a `borrowers` quota (no guarantee), and `pending` In Quota jobs
    of the teams, each team queueing no more than its min: most of them must reclaim."""
    rng = random.Random(seed)
    sizes = [s for s in gpu_sizes(traces_dir) if s <= gpus_per_node]
    node_list = _nodes(nodes, gpus_per_node)
    quota_list = _quotas(node_list, quotas, rng, with_max=False)
    quota_list.append(Quota(name="borrowers", parent="root"))
    jobs: list[Job] = []
    for node in node_list:
        left = node.gpus
        while left:
            size = min(rng.choice(sizes), left)
            pods = _pods(rng, size, gpus_per_node, node.gpu_type)
            left -= size
            jobs.append(Job(name=f"idle-{len(jobs):05d}", quota="borrowers", pods=pods, priority=rng.randint(1, 9),
                            idle=IDLE_ONLY, phase=RUNNING, in_quota=False, started_at=rng.uniform(0, 1000),
                            nodes=(node.name,) * len(pods)))
    teams = quota_list[1:-1]
    queued: dict[tuple[str, str], int] = {}
    made = misses = 0
    while made < pending and misses < 1000:  # stop early once the teams' guarantees are all queued
        team = rng.choice(teams)
        model = rng.choice(MODELS)
        size = rng.choice(sizes)
        key = (team.name, model)
        if queued.get(key, 0) + size > team.min.get(gpu_key(model), 0):
            misses += 1
            continue
        queued[key] = queued.get(key, 0) + size
        jobs.append(Job(name=f"job-{made:05d}", quota=team.name, pods=_pods(rng, size, gpus_per_node, model),
                        priority=rng.randint(1, 9), idle=IDLE_OFF, submitted_at=2000.0 + made))
        made += 1
    return Snapshot(nodes=tuple(node_list), quotas=tuple(quota_list), jobs=tuple(jobs))


def _timed(snapshot: Snapshot, repeat: int) -> tuple[float, object]:
    best = math.inf
    decisions = None
    for _ in range(repeat):
        start = time.perf_counter()
        decisions = run_cycle(snapshot)
        best = min(best, time.perf_counter() - start)
    return best, decisions


def measure(
    nodes: int = 1000,
    gpus_per_node: int = 8,
    quotas: int = 20,
    pending: int = 10000,
    seed: int = 0,
    repeat: int = 3,
    reclaim_pending: int = 2000,
    traces_dir: Path | None = None,
) -> dict:
    """Time full cycles (best of `repeat`) on the two synthetic snapshots."""
    snapshot = build_synthetic_snapshot(nodes, gpus_per_node, quotas, pending, seed, traces_dir)
    decided = sum(1 for job in snapshot.jobs if job.phase in (PENDING, NOMINATED))
    cycle_s, decisions = _timed(snapshot, repeat)
    heavy = build_reclaim_heavy_snapshot(nodes, gpus_per_node, quotas, reclaim_pending, seed, traces_dir)
    reclaim_s, heavy_decisions = _timed(heavy, repeat)
    return {
        "nodes": nodes,
        "gpus": nodes * gpus_per_node,
        "queued": decided,
        "running": len(snapshot.jobs) - decided,
        "cycle_s": round(cycle_s, 4),
        "decisions_per_s": round(decided / cycle_s),
        "admitted": len(decisions.admitted),
        "nominated": len(decisions.nominated),
        "preempted": len(decisions.preempted),
        "reclaim_queued": sum(1 for job in heavy.jobs if job.phase == PENDING),
        "reclaim_cycle_s": round(reclaim_s, 4),
        "reclaim_preempted": len(heavy_decisions.preempted),
        "reclaim_nominated": len(heavy_decisions.nominated),
    }


if __name__ == "__main__":
    print(measure())
