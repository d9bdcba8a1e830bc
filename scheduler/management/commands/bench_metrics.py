"""Benchmark: one /metrics scrape of a cluster with 10,000 jobs (docs/benchmarks.md; target ≤ 200 ms).

    python manage.py bench_metrics [--jobs 10000] [--nodes 250] [--quotas 20] [--scrapes 7]

Runs in a throwaway test database (created and dropped here) of whatever DATABASE_URL names.
The cluster: `--nodes` 8-GPU nodes, `--quotas` team quotas under one root, and `--jobs` jobs whose
timelines hold what a busy week leaves — every job submitted, queued and admitted once; one in
ten preempted, restarted and admitted again; one in twenty with a failed attempt — with the nodes
full of running pods. A scrape is the whole HTTP view (collector, text encoding, response); the
figure is the median of `--scrapes` scrapes after one warm-up, with the fastest, the slowest, this
process's CPU time per scrape (the whole scrape with SQLite; without the server's share with
PostgreSQL) and the machine's load average, since a shared machine's wall times move with it. The
last line printed is JSON.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection
from django.test import RequestFactory
from django.utils import timezone

from scheduler.metrics.http import metrics
from scheduler.models import Job, JobEvent, JobRole, Node, Pod, ResourceQuota, Workspace
from scheduler.states import EventKind, JobStatus, PodStatus


def build_cluster(*, jobs: int, nodes: int, quotas: int, seed: int = 7) -> dict[str, int]:
    """Long because: it writes every table a scrape reads, in bulk, with realistic proportions."""
    rng = random.Random(seed)
    now = timezone.now()
    owner = get_user_model().objects.create_user("bench")
    space = Workspace.objects.create(name="bench")
    root = ResourceQuota.objects.create(name="root", min_gpus={"A100": nodes * 8}, min_cpu=nodes * 96,
                                        min_memory_gib=nodes * 768)
    teams = [ResourceQuota.objects.create(name=f"team-{i:02d}", parent=root, min_gpus={"A100": nodes * 8 // quotas})
             for i in range(quotas)]
    Node.objects.bulk_create(Node(name=f"gpu-{i:04d}", gpu_type="A100", gpu_count=8, cpu=Decimal(96),
                                  memory_gib=Decimal(768), last_heartbeat=now) for i in range(nodes))
    node_ids = list(Node.objects.order_by("name").values_list("pk", flat=True))
    running_slots = nodes * 4  # two-GPU jobs fill every node
    statuses = []
    for i in range(jobs):
        if i < running_slots:
            statuses.append(JobStatus.RUNNING)
        else:
            statuses.append(rng.choice([JobStatus.SUCCEEDED] * 6 + [JobStatus.FAILED, JobStatus.STOPPED,
                                                                    JobStatus.QUEUING, JobStatus.PREEMPTED]))
    Job.objects.bulk_create(
        Job(name=f"job-{i}", workspace=space, quota=teams[i % quotas], owner=owner, command="train",
            status=status, in_quota=(i % 3 != 0) if status == JobStatus.RUNNING else None, attempt=1,
            queue_time=now - timedelta(hours=rng.uniform(1, 160)), gpu_type="A100")
        for i, status in enumerate(statuses)
    )
    job_ids = list(Job.objects.order_by("pk").values_list("pk", flat=True))
    JobRole.objects.bulk_create(JobRole(job_id=pk, name="worker", pod_count=1, gpu_type="A100", gpus=2)
                                for pk in job_ids)
    Pod.objects.bulk_create(
        Pod(job_id=pk, role="worker", index=0, rank=0, attempt=1, node_id=node_ids[i // 4],
            gpu_indices=[(i % 4) * 2, (i % 4) * 2 + 1], status=PodStatus.RUNNING, started_at=now)
        for i, pk in enumerate(job_ids[:running_slots])
    )
    events = []
    for i, pk in enumerate(job_ids):
        t = now - timedelta(hours=rng.uniform(1, 160))
        steps = [(EventKind.SUBMITTED, "submitted"), (EventKind.QUEUED, "queuing"), (EventKind.ADMITTED, "admitted")]
        if i % 10 == 0:
            steps += [(EventKind.PREEMPTED, "reclaimed by quota team-00 for job x"),
                      (EventKind.RESTARTING, "preempted: restarting in 5 s"), (EventKind.QUEUED, "queuing"),
                      (EventKind.ADMITTED, "admitted")]
        if i % 20 == 5:
            steps += [(EventKind.ATTEMPT_FAILED, "pod worker-0 failed: exit 1"),
                      (EventKind.RESTARTING, "failed: restarting in 5 s"), (EventKind.QUEUED, "queuing"),
                      (EventKind.ADMITTED, "admitted")]
        for kind, reason in steps:
            t += timedelta(seconds=rng.uniform(1, 600))
            events.append(JobEvent(job_id=pk, kind=kind, reason=reason))
            events[-1].time = t
    time_field = JobEvent._meta.get_field("time")
    time_field.auto_now_add = False  # keep the timeline's times (bulk_create would stamp "now")
    try:
        JobEvent.objects.bulk_create(events, batch_size=5000)
    finally:
        time_field.auto_now_add = True
    return {"jobs": len(job_ids), "events": len(events), "pods": running_slots, "nodes": nodes, "quotas": quotas}


class Command(BaseCommand):
    help = "Time a /metrics scrape of a synthetic 10,000-job cluster (throwaway database)."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, default=10_000)
        parser.add_argument("--nodes", type=int, default=250)
        parser.add_argument("--quotas", type=int, default=20)
        parser.add_argument("--scrapes", type=int, default=7)
        parser.add_argument("--profile", action="store_true", help="print a cProfile of one scrape")

    def handle(self, *args, jobs, nodes, quotas, scrapes, **options):
        self.stdout.write(f"database: creating a throwaway {connection.vendor} test database …")
        old_name = connection.settings_dict["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            shape = build_cluster(jobs=jobs, nodes=nodes, quotas=quotas)
            request = RequestFactory().get("/metrics", REMOTE_ADDR="127.0.0.1")
            response = metrics(request)  # warm-up
            if options.get("profile"):
                import cProfile
                import io
                import pstats

                profiler = cProfile.Profile()
                profiler.runcall(metrics, request)
                report = io.StringIO()
                pstats.Stats(profiler, stream=report).sort_stats("tottime").print_stats(20)
                self.stdout.write(report.getvalue())
            timings, cpu = [], []
            for _ in range(scrapes):
                started, started_cpu = time.perf_counter(), time.process_time()
                response = metrics(request)
                timings.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)  # this process only: not PostgreSQL's server
            assert response.status_code == 200
            figures = {**shape, "db_vendor": connection.vendor, "scrape_bytes": len(response.content),
                       "scrape_median_ms": round(1000 * statistics.median(timings), 1),
                       "scrape_min_ms": round(1000 * min(timings), 1),
                       "scrape_cpu_median_ms": round(1000 * statistics.median(cpu), 1),
                       "load_average_1m": round(os.getloadavg()[0], 1),
                       "scrape_max_ms": round(1000 * max(timings), 1)}
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0)
        self.stdout.write(f"  {figures['jobs']} jobs, {figures['events']} events, {figures['pods']} running pods: "
                          f"scrape median {figures['scrape_median_ms']} ms (min {figures['scrape_min_ms']}, max {figures['scrape_max_ms']} ms, "
                          f"{figures['scrape_bytes']} bytes; CPU {figures['scrape_cpu_median_ms']} ms; load {figures['load_average_1m']})")
        self.stdout.write(json.dumps(figures))
