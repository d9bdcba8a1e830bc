#!/usr/bin/env python3
"""Submit → Running on an idle cluster: host processes against containers, in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tidepool .venv/bin/python scripts/bench_pod_start.py --jobs 20

In a throwaway test database, one idle node; each round submits a one-pod job (1 GPU, `sleep 600`)
through `job_submit`, runs one scheduling cycle (`schedule_once`: admission and the launch), and
times until the job is Running (the node reported its pod started), then stops it and waits for it to
end, so every round starts on an idle cluster. Rounds alternate between the runtimes, so both see
the same load. Host pods run as TIDEPOOL_POD_RUNTIME=host does (in cgroups of their own where this
process may make them); containers as TIDEPOOL_POD_RUNTIME=podman (needs root, Podman and the
default image: `bin/build-pod-image`; skipped with the reason otherwise). Not in the figure: the
scheduler loop's wake-up after a submission (the loop cycles at once when woken) and the time the
job's command needs to start inside its pod. Prints one line per runtime and one JSON line, with
the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))] if ordered else float("nan")


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.005)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20, help="rounds per runtime (default 20)")
    parser.add_argument("--runtimes", default="host,podman", help="comma-separated: host, podman")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds per runtime first (caches, image)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import override_settings

    from scheduler.executors import set_executor
    from scheduler.loop.cycle import schedule_once
    from scheduler.models import Job, Workspace
    from scheduler.node.local import LocalExecutor
    from scheduler.node.runtime.container import podman_available
    from scheduler.node.runtimes import runtime_label
    from scheduler.services.jobs import job_stop, job_submit
    from scheduler.services.nodes import node_register
    from scheduler.services.quotas import quota_create
    from scheduler.states import JobStatus

    runtimes = [name.strip() for name in args.runtimes.split(",") if name.strip()]
    skipped: dict[str, str] = {}
    if "podman" in runtimes and (missing := podman_available(settings.TIDEPOOL_PODMAN)) is not None:
        skipped["podman"] = missing
        runtimes.remove("podman")
    old_name = connection.settings_dict["NAME"]
    # Its own database name: a test run's test_<name> elsewhere on this server must not be clobbered.
    connection.settings_dict.setdefault("TEST", {})["NAME"] = f"test_tidepool_bench_pods_{os.getpid()}"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    data_dir = tempfile.mkdtemp(prefix="tidepool-bench-pods-")
    load_before = os.getloadavg()
    figures: dict[str, dict] = {}
    try:
        with override_settings(TIDEPOOL_DATA_DIR=Path(data_dir), TIDEPOOL_CHECKPOINT_ROOT=None,
                               TIDEPOOL_WORKSPACE_ROOT=None):
            node_register(name="bench-01", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64,
                          address="127.0.0.1", inventory_source="demo")
            user = get_user_model().objects.create_user("bench")
            space = Workspace.objects.create(name="bench")
            space.members.add(user)
            quota = quota_create(name="bench", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64,
                                 workspaces=[space])
            executors, labels = {}, {}
            for runtime in runtimes:
                with override_settings(TIDEPOOL_POD_RUNTIME=runtime):
                    executors[runtime] = LocalExecutor(reconcile_s=0)
                labels[runtime] = runtime_label(executors[runtime].agent.supervisor)
            times: dict[str, list[float]] = {runtime: [] for runtime in runtimes}
            for round_number in range(args.warmup + args.jobs):
                for runtime in runtimes:  # alternating: both runtimes see the same load
                    set_executor(executors[runtime])
                    started = time.perf_counter()
                    job = job_submit(user=user, workspace=space, quota=quota, name=f"{runtime}-{round_number}",
                                     command="sleep 600", roles=[{"name": "worker", "pod_count": 1, "gpus": 1,
                                                                  "cpu": 1, "memory_gib": 1}])
                    schedule_once()
                    wait_until(lambda job=job: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists(),
                               120, f"{job.name} running")
                    if round_number >= args.warmup:
                        times[runtime].append(time.perf_counter() - started)
                    job_stop(job=job, user=user)
                    wait_until(lambda job=job: Job.objects.get(pk=job.pk).status == JobStatus.STOPPED, 120,
                               f"{job.name} stopped")
            for runtime, executor in executors.items():
                executor.shutdown(0)
                values = times[runtime]
                figures[runtime] = {"runtime": labels[runtime], "jobs": len(values),
                                    "p50_s": round(statistics.median(values), 3),
                                    "p95_s": round(percentile(values, 95), 3), "max_s": round(max(values), 3)}
    finally:
        set_executor(None)
        connection.creation.destroy_test_db(old_name, verbosity=0)
    load_after = os.getloadavg()
    for runtime, row in figures.items():
        print(f"{runtime:7} ({row['runtime']}): submit → Running p50 {row['p50_s']:.3f} s, p95 {row['p95_s']:.3f} s, "
              f"max {row['max_s']:.3f} s over {row['jobs']} jobs")
    if "host" in figures and "podman" in figures:
        print(f"containers add {figures['podman']['p50_s'] - figures['host']['p50_s']:+.3f} s at p50")
    for runtime, why in skipped.items():
        print(f"{runtime}: skipped ({why})")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); {os.cpu_count()} CPUs")
    print(json.dumps({"figures": figures, "skipped": skipped, "load_before": load_before, "load_after": load_after,
                      "database": connection.vendor}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
