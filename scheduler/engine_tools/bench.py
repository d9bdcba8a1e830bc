"""Synthetic clusters for measuring the engine, with job sizes drawn from the Philly trace.

`measure()` times full cycles (the median of `repeat`) of three snapshots of one size:
- quiet (`build_synthetic_snapshot`): a half-busy cluster (In Quota and idle jobs running) and a
  long queue of mixed jobs, most of which stay pending;
- uniform reclaim-heavy (`build_reclaim_heavy_snapshot`): every node full of idle (Not in Quota)
  jobs of Philly sizes; half the queue In Quota jobs of the teams (each must reclaim), half `only`
  jobs that wait;
- mixed-size storm (`build_mixed_storm_snapshot`): every node full of borrowers of 1, 2, 4 and 8
  GPUs, two queued In Quota jobs per node of those sizes (each must reclaim), `only` jobs after.
Each reports its cycle time, decisions/s (queued jobs decided per second, most of them by staying
pending) and placements/s (jobs admitted or nominated per second) apart. `sweep()` runs `measure`
at 500 / 1,000 / 2,000 / 5,000 nodes with 10 queued jobs per node and the growth exponent between
sizes.

Job GPU counts follow the Philly trace's `num_gpus` mix (`shared/traces/philly_pollux.csv` beside
the project root); a job wider than a node becomes several full-node pods. Without the trace file,
a built-in copy of its mix is used and a note is printed.
"""

from __future__ import annotations

import csv
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from scheduler.engine.cycle import run_cycle
from scheduler.engine.plan import EXACT_PER_POOL, ROUGH_PER_POOL
from scheduler.engine.types import (
    IDLE_ACCEPTABLE,
    IDLE_OFF,
    IDLE_ONLY,
    NOMINATED,
    PENDING,
    RUNNING,
    Decisions,
    Job,
    Node,
    Pod,
    Quota,
    Snapshot,
    gpu_key,
)

# The public traces (../shared/traces beside the project, see its README): the one place this path is
# computed; the simulator and the tests import it.
TRACES_DIR = Path(__file__).resolve().parents[3] / "shared" / "traces"
PHILLY = "philly_pollux.csv"
# num_gpus counts in philly_pollux.csv (82,247 jobs), used when the file is absent.
PHILLY_MIX = {1: 76627, 2: 1818, 4: 1870, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}
MODELS = ("A100", "H100")
NODE_CPU_CORES = 96
NODE_MEMORY_GIB = 1024
MEMORY_GIB_PER_GPU = 64
CPU_CORES_PER_GPU = (6, 8, 10)  # a little spread, so pods differ in more than GPUs
BENCH_NOW = 100_000.0  # the cycle's time of a snapshot with time limits
LIMITS_S = (1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 24 * 3600.0, 72 * 3600.0)  # §2d limits drawn per job


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
    time_limits: bool = False,
) -> Snapshot:
    """About `busy` of the GPUs running (In Quota up to each team's min, the rest idle jobs), and
    `pending` queued jobs of all idle modes, priorities and sizes. `time_limits` (DESIGN §2d): the cycle
    has a `now` and every job a time limit (`LIMITS_S`), each running job having run part of it, so the
    cycle plans start estimates."""
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
    if time_limits:
        jobs = [replace(job, time_limit_s=(limit := rng.choice(LIMITS_S)), started_at=BENCH_NOW - rng.random() * limit)
                for job in jobs]
    for i in range(pending):
        team = rng.choices(teams, weights)[0]
        named = rng.random() < 0.8
        jobs.append(Job(
            name=f"job-{i:05d}", quota=team.name,
            pods=_pods(rng, rng.choice(sizes), gpus_per_node, rng.choice(MODELS) if named else None),
            priority=rng.choices((1, 2, 3, 5, 9), (50, 25, 15, 7, 3))[0],
            idle=rng.choices((IDLE_OFF, IDLE_ACCEPTABLE, IDLE_ONLY), (55, 35, 10))[0],
            submitted_at=10_000.0 + i, time_limit_s=rng.choice(LIMITS_S) if time_limits else None,
        ))
    return Snapshot(nodes=tuple(node_list), quotas=tuple(quota_list), jobs=tuple(jobs),
                    now=BENCH_NOW if time_limits else None)


def measure_estimates(nodes: int = 5000, pending: int = 50000, seed: int = 0, repeat: int = 3,
                      exact: int = EXACT_PER_POOL, rough: int = ROUGH_PER_POOL) -> dict:
    """DESIGN §2d's cost: the quiet snapshot with time limits, its cycle timed with the start estimates
    (`run_cycle`, `exact` and `rough` estimates per pool) and without them (the same steps, the plan left
    out), side by side (medians of `repeat`, alternating)."""
    snapshot = build_synthetic_snapshot(nodes, pending=pending, seed=seed, time_limits=True)
    with_plan, without = [], []
    decisions = Decisions()
    for _ in range(repeat):
        start = time.process_time()
        decisions = run_cycle(snapshot, estimates=exact, rough=rough)
        with_plan.append(time.process_time() - start)
        start = time.process_time()
        _cycle_without_plan(snapshot)
        without.append(time.process_time() - start)
    known = sum(1 for e in decisions.estimates.values() if e.start is not None)
    roughly = sum(1 for e in decisions.estimates.values() if e.rough)
    return {"nodes": nodes, "queued": pending, "pending": len(decisions.pending), "estimated": known, "rough": roughly,
            "with_estimates_cpu_s": round(statistics.median(with_plan), 4),
            "without_estimates_cpu_s": round(statistics.median(without), 4),
            "ratio": round(statistics.median(with_plan) / statistics.median(without), 3)}


def _cycle_without_plan(snapshot: Snapshot) -> Decisions:
    return run_cycle(snapshot, estimates=0)


def _fill_with_borrowers(node_list: list[Node], sizes: Sequence[int], rng: random.Random,
                         gpus_per_node: int, exact: bool = False) -> list[Job]:
    """Every GPU of every node held by an idle (Not in Quota) job of the `borrowers` quota. A size drawn
    larger than what is left is cut to fit, or with `exact` drawn again among the sizes that fit."""
    jobs: list[Job] = []
    for node in node_list:
        left = node.gpus
        while left:
            size = rng.choice([s for s in sizes if s <= left]) if exact else min(rng.choice(sizes), left)
            pods = _pods(rng, size, gpus_per_node, node.gpu_type)
            left -= size
            jobs.append(Job(name=f"idle-{len(jobs):05d}", quota="borrowers", pods=pods, priority=rng.randint(1, 9),
                            idle=IDLE_ONLY, phase=RUNNING, in_quota=False, started_at=rng.uniform(0, 1000),
                            nodes=(node.name,) * len(pods)))
    return jobs


def _idle_only_queue(count: int, teams: list[Quota], sizes: Sequence[int], rng: random.Random,
                     gpus_per_node: int, first: int) -> list[Job]:
    """Queued `only` jobs: they never reclaim, and on a full cluster they wait in the idle pass."""
    return [
        Job(name=f"job-{first + i:06d}", quota=rng.choice(teams).name,
            pods=_pods(rng, rng.choice(sizes), gpus_per_node, rng.choice(MODELS)), priority=rng.randint(1, 9),
            idle=IDLE_ONLY, submitted_at=2000.0 + first + i)
        for i in range(count)
    ]


def _in_quota_queue(count: int, teams: list[Quota], sizes: Sequence[int], rng: random.Random,
                    gpus_per_node: int) -> list[Job]:
    """Up to `count` queued In Quota jobs (`off`), each team queueing no more than its min, so each one
    fits in quota and, on a full cluster, must reclaim. Sizes that no team has room for any more shrink."""
    room = {(q.name, model): q.min.get(gpu_key(model), 0) for q in teams for model in MODELS}
    jobs: list[Job] = []
    for i in range(count):
        models = [model for model in MODELS if any(room[(q.name, model)] for q in teams)]
        if not models:
            break  # every guarantee is queued already
        model = rng.choice(models)
        size = rng.choice(sizes)
        while True:
            teams_with_room = [q for q in teams if room[(q.name, model)] >= size]
            if teams_with_room or size == 1:
                break
            size = max(s for s in sizes if s < size) if any(s < size for s in sizes) else 1
        team = rng.choice(teams_with_room)
        room[(team.name, model)] -= size
        jobs.append(Job(name=f"job-{i:06d}", quota=team.name, pods=_pods(rng, size, gpus_per_node, model),
                        priority=rng.randint(1, 9), idle=IDLE_OFF, submitted_at=2000.0 + i))
    return jobs


def build_reclaim_heavy_snapshot(
    nodes: int = 1000,
    gpus_per_node: int = 8,
    quotas: int = 20,
    pending: int = 2000,
    seed: int = 0,
    traces_dir: Path | None = None,
    in_quota_share: float = 0.5,
) -> Snapshot:
    """Every node full of idle jobs of a `borrowers` quota (no guarantee; Philly sizes up to a node),
    and `pending` queued jobs: `in_quota_share` of them In Quota jobs of the teams (each team queueing
    no more than its min: each one must reclaim), the rest `only` jobs that wait for idle capacity."""
    rng = random.Random(seed)
    sizes = [s for s in gpu_sizes(traces_dir) if s <= gpus_per_node]
    node_list = _nodes(nodes, gpus_per_node)
    quota_list = _quotas(node_list, quotas, rng, with_max=False)
    quota_list.append(Quota(name="borrowers", parent="root"))
    jobs = _fill_with_borrowers(node_list, sizes, rng, gpus_per_node)
    teams = quota_list[1:-1]
    in_quota = _in_quota_queue(round(pending * in_quota_share), teams, sizes, rng, gpus_per_node)
    jobs += in_quota + _idle_only_queue(pending - len(in_quota), teams, sizes, rng, gpus_per_node, len(in_quota))
    return Snapshot(nodes=tuple(node_list), quotas=tuple(quota_list), jobs=tuple(jobs))


STORM_SIZES = (1, 2, 4, 8)


def build_mixed_storm_snapshot(
    nodes: int = 1000,
    gpus_per_node: int = 8,
    quotas: int = 20,
    pending: int = 10000,
    seed: int = 0,
    per_node: int = 2,
) -> Snapshot:
    """A reclaim storm of mixed sizes: every node full of borrowers of 1, 2, 4 and 8 GPUs, `per_node`
    queued In Quota jobs per node of those sizes (each one must reclaim), and `only` jobs up to
    `pending` queued in all."""
    rng = random.Random(seed)
    sizes = [s for s in STORM_SIZES if s <= gpus_per_node]
    node_list = _nodes(nodes, gpus_per_node)
    quota_list = _quotas(node_list, quotas, rng, with_max=False)
    quota_list.append(Quota(name="borrowers", parent="root"))
    jobs = _fill_with_borrowers(node_list, sizes, rng, gpus_per_node, exact=True)
    teams = quota_list[1:-1]
    in_quota = _in_quota_queue(min(per_node * nodes, pending), teams, sizes, rng, gpus_per_node)
    jobs += in_quota + _idle_only_queue(pending - len(in_quota), teams, sizes, rng, gpus_per_node, len(in_quota))
    return Snapshot(nodes=tuple(node_list), quotas=tuple(quota_list), jobs=tuple(jobs))


def _timed(snapshot: Snapshot, repeat: int) -> tuple[float, float, Decisions]:
    """The medians of `repeat` cycles on the same snapshot — wall time, and this process's CPU time (what
    the cycle costs when the machine is shared: other processes' load inflates the wall time only) —
    and the decisions."""
    times = []
    cpu_times = []
    decisions = Decisions()
    for _ in range(repeat):
        start, cpu_start = time.perf_counter(), time.process_time()
        decisions = run_cycle(snapshot)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return statistics.median(times), statistics.median(cpu_times), decisions


def _figures(prefix: str, snapshot: Snapshot, repeat: int) -> dict:
    """One snapshot's cycle: its time, decisions/s (every queued job decided, most by staying pending)
    and placements/s (jobs admitted or nominated), and what was decided."""
    queued = sum(1 for job in snapshot.jobs if job.phase in (PENDING, NOMINATED))
    cycle_s, cpu_s, decisions = _timed(snapshot, repeat)
    placed = len(decisions.admitted) + len(decisions.nominated)
    return {
        f"{prefix}queued": queued,
        f"{prefix}cycle_s": round(cycle_s, 6),
        f"{prefix}cycle_cpu_s": round(cpu_s, 6),
        f"{prefix}decisions_per_s": round(queued / cycle_s),
        f"{prefix}placements_per_s": round(placed / cycle_s),
        f"{prefix}admitted": len(decisions.admitted),
        f"{prefix}nominated": len(decisions.nominated),
        f"{prefix}preempted": len(decisions.preempted),
    }


def measure(
    nodes: int = 1000,
    gpus_per_node: int = 8,
    quotas: int = 20,
    pending: int = 10000,
    seed: int = 0,
    repeat: int = 3,
    reclaim_pending: int | None = None,
    traces_dir: Path | None = None,
) -> dict:
    """Time full cycles (median of `repeat`) on three snapshots of one size: the quiet cluster
    (`build_synthetic_snapshot`), the uniform reclaim-heavy one and the mixed-size storm. The reclaim
    snapshots queue `reclaim_pending` jobs (default: as many as the quiet one)."""
    reclaim_pending = pending if reclaim_pending is None else reclaim_pending
    quiet = build_synthetic_snapshot(nodes, gpus_per_node, quotas, pending, seed, traces_dir)
    out: dict = {"nodes": nodes, "gpus": nodes * gpus_per_node,
                 "running": sum(1 for job in quiet.jobs if job.phase == RUNNING)}
    out.update(_figures("", quiet, repeat))
    del quiet
    heavy = build_reclaim_heavy_snapshot(nodes, gpus_per_node, quotas, reclaim_pending, seed, traces_dir)
    out.update(_figures("reclaim_", heavy, repeat))
    del heavy
    storm = build_mixed_storm_snapshot(nodes, gpus_per_node, quotas, reclaim_pending, seed)
    out.update(_figures("storm_", storm, repeat))
    return out


SWEEP_NODES = (500, 1000, 2000, 5000)
QUEUED_PER_NODE = 10


def growth(rows: Sequence[dict], key: str, first: int, last: int) -> float | None:
    """The exponent b in time ∝ nodes^b between two sizes of a sweep (None if either is missing)."""
    by_nodes = {row["nodes"]: row[key] for row in rows}
    if first not in by_nodes or last not in by_nodes or first == last:
        return None
    return round(math.log(by_nodes[last] / by_nodes[first]) / math.log(last / first), 2)


def sweep(sizes: Sequence[int] = SWEEP_NODES, gpus_per_node: int = 8, quotas: int = 20, seed: int = 0,
          repeat: int = 3, traces_dir: Path | None = None) -> list[dict]:
    """`measure` at each size with QUEUED_PER_NODE queued jobs per node, with each cycle's growth exponent
    from the previous size (`*_growth`)."""
    rows: list[dict] = []
    for nodes in sizes:
        row = measure(nodes, gpus_per_node, quotas, QUEUED_PER_NODE * nodes, seed, repeat, traces_dir=traces_dir)
        if rows:
            for prefix in ("", "reclaim_", "storm_"):
                for kind in ("", "cpu_"):
                    row[f"{prefix}{kind}growth"] = growth([rows[-1], row], f"{prefix}cycle_{kind}s",
                                                          rows[-1]["nodes"], nodes)
        rows.append(row)
    return rows


if __name__ == "__main__":
    print(measure())
