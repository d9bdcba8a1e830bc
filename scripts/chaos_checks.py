"""Invariants the chaos run checks (scripts/chaos.py), read from the database and from /proc.

Needs Django set up (the chaos script does it with the run's own DATABASE_URL).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import close_old_connections
from django.db.models import Count
from django.utils import timezone

from scheduler.models import Job, Pod
from scheduler.states import FINAL_JOB_STATUSES, LIVE_POD_STATUSES, JobStatus, PodStatus


def pod_processes() -> dict[int, tuple[str, int]]:
    """Live pod process groups on this machine: pid → (job uid, pod id), from their environment."""
    found: dict[int, tuple[str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if os.getpgid(pid) != pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                items = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except (OSError, ValueError):
            continue
        if state in (b"Z", b"X") or b"TIDEPOOL_POD_ID" not in items or b"TIDEPOOL_JOB_UID" not in items:
            continue
        found[pid] = (items[b"TIDEPOOL_JOB_UID"].decode(), int(items[b"TIDEPOOL_POD_ID"]))
    return found


@dataclass
class Samples:
    taken: int = 0
    db_double_booked: list[str] = field(default_factory=list)  # (node, gpu) held by two live pods
    process_double_booked: list[str] = field(default_factory=list)  # two live processes on one GPU
    max_live_pods: int = 0
    max_pod_processes: int = 0


def sample_once(samples: Samples, our_uids: set[str]) -> None:
    """One moment: GPUs in the database, and GPUs of the pod processes really alive."""
    close_old_connections()
    held: dict[tuple[int, int], list[int]] = defaultdict(list)
    live = list(Pod.objects.filter(status__in=LIVE_POD_STATUSES).values_list("pk", "node_id", "gpu_indices"))
    for pod_id, node_id, gpus in live:
        for gpu in gpus or []:
            held[(node_id, gpu)].append(pod_id)
    now = time.strftime("%H:%M:%S")
    samples.db_double_booked += [f"{now} node {n} gpu {g}: pods {p}" for (n, g), p in held.items() if len(p) > 1]
    processes = {pid: pod for pid, (uid, pod) in pod_processes().items() if uid in our_uids}
    rows = dict((pk, (node, gpus)) for pk, node, gpus in Pod.objects.filter(
        pk__in=set(processes.values())).values_list("pk", "node_id", "gpu_indices"))
    on_gpu: dict[tuple[int, int], list[int]] = defaultdict(list)
    for pid, pod_id in processes.items():
        node, gpus = rows.get(pod_id, (None, []))
        for gpu in gpus or []:
            on_gpu[(node, gpu)].append(pid)
    samples.process_double_booked += [f"{now} node {n} gpu {g}: processes {p}" for (n, g), p in on_gpu.items()
                                      if len(p) > 1]
    samples.taken += 1
    samples.max_live_pods = max(samples.max_live_pods, len(live))
    samples.max_pod_processes = max(samples.max_pod_processes, len(processes))


class Sampler(threading.Thread):
    def __init__(self, our_uids, period_s: float = 1.0) -> None:
        super().__init__(name="chaos-sampler", daemon=True)
        self.samples = Samples()
        self.our_uids = our_uids
        self.period_s = period_s
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self.stop.wait(self.period_s):
            try:
                sample_once(self.samples, self.our_uids())
            except Exception:  # the database may be briefly busy; a sample is skipped, never faked
                self.errors += 1


def check_invariants(accepted: dict[str, int], intended_ok: set[str], pending_grace_s: float = 30.0) -> dict:
    """The figures at one moment (the deadline): lost, duplicated, stuck pods, wrong failures.

    Long because it is the list of checks, each a few lines, reported together.
    """
    close_old_connections()
    names = Counter(Job.objects.filter(name__startswith="chaos-").values_list("name", flat=True))
    ids = set(Job.objects.filter(pk__in=accepted.values()).values_list("pk", flat=True))
    lost = sorted(name for name, pk in accepted.items() if pk not in ids)
    duplicated = sorted(name for name, count in names.items() if count > 1)
    old = timezone.now() - timedelta(seconds=pending_grace_s)
    alive = {pod for _uid, pod in pod_processes().values()}
    stuck_pending = list(Pod.objects.filter(status=PodStatus.PENDING, created_at__lt=old).exclude(pk__in=alive)
                         .values_list("pk", "job__name", "reason"))
    running_without_process = list(
        Pod.objects.filter(status=PodStatus.RUNNING, started_at__lt=old).exclude(pk__in=alive)
        .values_list("pk", "job__name"))
    failed = Job.objects.filter(name__startswith="chaos-", status=JobStatus.FAILED)
    never_ran = sorted(failed.exclude(pods__started_at__isnull=False).values_list("name", flat=True).distinct())
    zero_failed = sorted(failed.filter(pods__status=PodStatus.FAILED, pods__exit_code=0)
                         .values_list("name", flat=True).distinct())
    ok_failed = sorted(set(failed.values_list("name", flat=True)) & intended_ok)
    pod_zero_failed = Pod.objects.filter(status=PodStatus.FAILED, exit_code=0).count()
    return {
        "jobs_accepted": len(accepted),
        "jobs_in_database": sum(names.values()),
        "lost": lost,
        "duplicated": duplicated,
        "pods_pending_without_process_over_30s": stuck_pending,
        "pods_running_without_process_over_30s": running_without_process,
        "failed_jobs_that_never_ran": never_ran,
        "failed_jobs_with_a_pod_exited_0_recorded_failed": zero_failed,
        "pods_exited_0_recorded_failed": pod_zero_failed,
        "ok_jobs_failed_by_faults": ok_failed,
    }


def status_counts() -> dict[str, int]:
    close_old_connections()
    return dict(Job.objects.filter(name__startswith="chaos-").values_list("status").annotate(n=Count("pk")))


def all_final() -> bool:
    close_old_connections()
    return not Job.objects.filter(name__startswith="chaos-").exclude(status__in=FINAL_JOB_STATUSES).exists()


def restart_figures() -> dict[str, int]:
    close_old_connections()
    jobs = Job.objects.filter(name__startswith="chaos-")
    return {
        "restarts_used": sum(jobs.values_list("restart_count", flat=True)),
        "never_started_requeues": sum(jobs.values_list("start_failures", flat=True)),
        "preempted_events": Job.objects.filter(name__startswith="chaos-", events__kind="preempted").count(),
        "pods_total": Pod.objects.filter(job__name__startswith="chaos-").count(),
        "pods_read_back_from_exit_files": Pod.objects.filter(reason__contains="exit file").count(),
    }
