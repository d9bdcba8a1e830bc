"""Benchmark: engine cycles (quiet, uniform reclaim-heavy, mixed-size reclaim storm) and one full cycle
through the database.

    python manage.py bench_engine [--nodes 1000] [--queued 10000] [--quotas 20] [--repeat 3] [--skip-db]
    python manage.py bench_engine --sweep [--sizes 500,1000,2000,5000]

Per size it prints each cycle's time (median of --repeat), decisions/s (queued jobs decided per
second, most of them by staying pending) and placements/s (jobs admitted or nominated per second)
apart; --sweep runs the engine at each size with 10 queued jobs per node and prints the growth
exponent of each cycle between sizes (engine only).

The full cycle runs in a throwaway test database (created and dropped here) of whatever
DATABASE_URL names: PostgreSQL in production. Pods are not started (no executor runs them):
it measures scheduling, from reading the rows to the committed decisions. The last line
printed is one JSON object with every figure.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from decimal import Decimal

from django.core.management.base import BaseCommand
from django.db import connection
from django.utils import timezone

from scheduler.engine.types import GPU_PREFIX
from scheduler.engine_tools.bench import (
    QUEUED_PER_NODE,
    SWEEP_NODES,
    build_synthetic_snapshot,
    growth,
    measure,
    sweep,
)


class CountingExecutor:
    """Counts what would be launched: the benchmark measures scheduling, not process starts."""

    def __init__(self) -> None:
        self.pods = 0

    def launch(self, launches) -> None:
        self.pods += sum(len(pods) for _job, pods in launches)

    def terminate(self, refs, *, grace_s: float, outcome: str) -> None:
        pass


def _gpus(vector) -> dict[str, int]:
    return {k.removeprefix(GPU_PREFIX): v for k, v in vector.items() if k.startswith(GPU_PREFIX)}


def full_cycle_on_database(*, pending: int, quotas: int, gpus_per_node: int, seed: int) -> dict:
    """Load `pending` queued jobs (Philly size mix, the synthetic teams) onto an empty cluster sized to
    hold them all, each team guaranteed what it queues, then time one schedule_once(): snapshot,
    engine, decisions written, commit."""
    from scheduler.executors import set_executor
    from scheduler.loop.cycle import schedule_once
    from scheduler.models import Job, JobRole, Node, ResourceQuota, Workspace
    from scheduler.states import JobStatus

    synthetic = build_synthetic_snapshot(nodes=10, gpus_per_node=gpus_per_node, quotas=quotas, pending=pending,
                                         seed=seed, busy=0.0)
    queued = [job for job in synthetic.jobs if job.phase == "pending"]
    # Enough whole nodes of each model for every queued job (plus 25 % for fragmentation).
    need: dict[str, int] = defaultdict(int)
    for job in queued:
        model = job.pods[0].gpu_type or "A100"
        need[model] += sum(p.gpus for p in job.pods)
    nodes = []
    for model, gpus in sorted(need.items()):
        for i in range(math.ceil(gpus * 1.25 / gpus_per_node)):
            nodes.append(Node(name=f"{model.lower()}-{i:05d}", gpu_type=model, gpu_count=gpus_per_node,
                              cpu=Decimal(gpus_per_node * 12), memory_gib=Decimal(gpus_per_node * 80),
                              inventory_source="demo"))
    Node.objects.bulk_create(nodes, batch_size=1000)
    capacity: dict[str, int] = defaultdict(int)
    for node in nodes:
        capacity[node.gpu_type] += node.gpu_count
    space = Workspace.objects.create(name="bench")
    root = ResourceQuota.objects.create(
        name="root", min_gpus=dict(capacity), min_cpu=sum(n.cpu for n in nodes),
        min_memory_gib=sum(n.memory_gib for n in nodes),
    )
    # Each team is guaranteed what it queues (so every job is admitted In Quota), the rest stays idle.
    demand: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in queued:
        demand[job.quota][job.pods[0].gpu_type or "A100"] += sum(p.gpus for p in job.pods)
    rows = [
        ResourceQuota(name=team, parent=root, min_gpus=dict(gpus),
                      min_cpu=Decimal(12 * sum(gpus.values())), min_memory_gib=Decimal(80 * sum(gpus.values())))
        for team, gpus in sorted(demand.items())
    ]
    ResourceQuota.objects.bulk_create(rows)
    by_name = {q.name: q for q in ResourceQuota.objects.all()}
    for quota in by_name.values():
        quota.workspaces.add(space)
    now = timezone.now()
    jobs = [
        Job(name=job.name, workspace=space, quota=by_name[job.quota], command="train", priority=job.priority,
            idle_mode="off", status=JobStatus.QUEUING, queue_time=now - timezone.timedelta(seconds=len(queued) - i))
        for i, job in enumerate(queued)
    ]
    Job.objects.bulk_create(jobs, batch_size=1000)
    roles = []
    for row, job in zip(jobs, queued, strict=True):
        pod = job.pods[0]
        roles.append(JobRole(job=row, name="worker", pod_count=len(job.pods), gpu_type=pod.gpu_type or "",
                             gpus=pod.gpus, cpu=Decimal(pod.cpu_m) / 1000, memory_gib=Decimal(pod.memory_mib) / 1024))
    JobRole.objects.bulk_create(roles, batch_size=1000)

    executor = CountingExecutor()
    previous = set_executor(executor)
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        result = schedule_once()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        set_executor(previous)
    return {
        "db_vendor": connection.vendor,
        "db_nodes": len(nodes),
        "db_queued": len(queued),
        "db_admitted": result.admitted,
        "db_pods_started": executor.pods,
        "db_full_cycle_s": round(wall, 3),
        "db_full_cycle_cpu_s": round(cpu, 3),  # this process only (PostgreSQL's own work is not in it)
        "db_phases_s": {phase: round(seconds, 3) for phase, seconds in result.phases.items()},
    }


CYCLES = (("", "quiet cycle"), ("reclaim_", "reclaim-heavy, uniform"), ("storm_", "reclaim storm, mixed sizes"))


def _cycle_lines(figures: dict) -> list[str]:
    lines = []
    for prefix, label in CYCLES:
        lines.append(
            f"  {label + ':':28} {figures[prefix + 'cycle_s']:7.3f} s (CPU {figures[prefix + 'cycle_cpu_s']:.3f} s)  "
            f"{figures[prefix + 'queued']:>6} queued  "
            f"{figures[prefix + 'decisions_per_s']:>9,} decisions/s  {figures[prefix + 'placements_per_s']:>8,} "
            f"placements/s  ({figures[prefix + 'admitted']} admitted, {figures[prefix + 'nominated']} nominated, "
            f"{figures[prefix + 'preempted']} preempted)"
        )
    return lines


class Command(BaseCommand):
    help = "Measure engine cycles (quiet, reclaim-heavy, reclaim storm) and one full cycle through the database."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=1000)
        parser.add_argument("--gpus-per-node", type=int, default=8)
        parser.add_argument("--quotas", type=int, default=20)
        parser.add_argument("--queued", "--pending", dest="queued", type=int, default=None,
                            help=f"queued jobs (default {QUEUED_PER_NODE} per node)")
        parser.add_argument("--reclaim-pending", type=int, default=None,
                            help="queued jobs of the reclaim snapshots (default: --queued)")
        parser.add_argument("--repeat", type=int, default=3, help="engine cycles timed; the median is kept")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--skip-db", action="store_true", help="engine figures only")
        parser.add_argument("--db-only", action="store_true", help="the full cycle through the database only")
        parser.add_argument("--sweep", action="store_true",
                            help=f"engine only, at each of --sizes nodes with {QUEUED_PER_NODE} queued per node")
        parser.add_argument("--sizes", default=",".join(map(str, SWEEP_NODES)), help="node counts of --sweep")

    def handle(self, *args, nodes, gpus_per_node, quotas, queued, reclaim_pending, repeat, seed, skip_db, db_only,
               sweep, sizes, **opts):
        if sweep:
            self._sweep([int(size) for size in sizes.split(",")], gpus_per_node, quotas, seed, repeat)
            return
        queued = QUEUED_PER_NODE * nodes if queued is None else queued
        figures: dict = {}
        if not db_only:
            self.stdout.write(f"engine: {nodes} nodes × {gpus_per_node} GPUs, {quotas} quotas, {queued} queued "
                              f"jobs, median of {repeat} cycles")
            figures = measure(nodes=nodes, gpus_per_node=gpus_per_node, quotas=quotas, pending=queued, seed=seed,
                              repeat=repeat, reclaim_pending=reclaim_pending)
            for line in _cycle_lines(figures):
                self.stdout.write(line)
        if not skip_db:
            self.stdout.write(f"database: creating a throwaway {connection.vendor} test database …")
            old_name = connection.settings_dict["NAME"]
            connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
            try:
                figures.update(full_cycle_on_database(pending=queued, quotas=quotas,
                                                      gpus_per_node=gpus_per_node, seed=seed))
            finally:
                connection.creation.destroy_test_db(old_name, verbosity=0)
            self.stdout.write(
                f"  full cycle through {figures['db_vendor']}: {figures['db_full_cycle_s']:.3f} s "
                f"(CPU of this process {figures['db_full_cycle_cpu_s']:.3f} s), "
                f"{figures['db_admitted']} of {figures['db_queued']} jobs admitted on {figures['db_nodes']} nodes"
            )
            self.stdout.write("  by phase: " + ", ".join(
                f"{phase} {seconds:.3f} s" for phase, seconds in figures["db_phases_s"].items()))
        self.stdout.write(json.dumps(figures))

    def _sweep(self, sizes: list[int], gpus_per_node: int, quotas: int, seed: int, repeat: int) -> None:
        self.stdout.write(f"engine sweep: {', '.join(map(str, sizes))} nodes × {gpus_per_node} GPUs, {quotas} quotas, "
                          f"{QUEUED_PER_NODE} queued per node, median of {repeat} cycles")
        rows = []
        for row in sweep(sizes, gpus_per_node, quotas, seed, repeat):
            rows.append(row)
            self.stdout.write(f"{row['nodes']} nodes, {row['queued']} queued, {row['running']} running:")
            for line in _cycle_lines(row):
                self.stdout.write(line)
            if len(rows) > 1:
                self.stdout.write(
                    f"  growth from {rows[-2]['nodes']} nodes (time ∝ nodes^b, wall / CPU): "
                    + ", ".join(f"{label.split(',')[0]} b={row[prefix + 'growth']} / {row[prefix + 'cpu_growth']}"
                                for prefix, label in CYCLES)
                )
            self.stdout.write("  reclaim ÷ quiet (wall / CPU): " + ", ".join(
                f"{label} {row[prefix + 'cycle_s'] / row['cycle_s']:.2f} / "
                f"{row[prefix + 'cycle_cpu_s'] / row['cycle_cpu_s']:.2f}" for prefix, label in CYCLES[1:]))
        result: dict = {"sweep": rows}
        if len(sizes) > 1:
            first, last = (1000, 5000) if {1000, 5000} <= set(sizes) else (sizes[0], sizes[-1])
            result["growth_span"] = [first, last]
            result["growth"] = {prefix or "quiet": growth(rows, prefix + "cycle_s", first, last)
                                for prefix, _ in CYCLES}
            result["cpu_growth"] = {prefix or "quiet": growth(rows, prefix + "cycle_cpu_s", first, last)
                                    for prefix, _ in CYCLES}
            self.stdout.write(f"growth from {first} to {last} nodes (wall / CPU): " + ", ".join(
                f"{label} b={result['growth'][prefix or 'quiet']} / {result['cpu_growth'][prefix or 'quiet']}"
                for prefix, label in CYCLES))
        self.stdout.write(json.dumps(result))
