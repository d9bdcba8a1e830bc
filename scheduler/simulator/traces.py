"""Workloads for the simulator: the Philly trace and a documented jobs CSV of our own.

A replay needs two things: the jobs (`TraceJob`, one per submission) and the cluster they meet
(`Cluster`: node inventory and quota tree, as engine types; built in clusters.py). Loaders here
read the Philly trace (`philly_pollux.csv`), Alibaba's openb pod trace (`openb_pod_list_default.csv`,
kept in the project's data folder) and a user's jobs CSV (format in docs/simulator.md), any of them
cut to a time window.

Everything is deterministic: rows are sorted by submission time with the file order breaking
ties, so two loads give identical replays.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from scheduler.engine.types import CPU, DEFAULT_POOL, IDLE_MODES, MEMORY, Node, Quota, gpu_key
from scheduler.engine_tools.bench import TRACES_DIR

# Where the public traces live (../shared/traces beside the project): one home, the engine's benchmark.
SHARED_TRACES = TRACES_DIR
PHILLY_JOBS = "philly_pollux.csv"
PHILLY_VCS = "philly_vc.csv"
OPENB_NODES = "openb_gpu_node.csv"
# The openb pods are not in shared/traces: the project keeps its own copy (data/README.md says whence).
DATA_DIR = Path(__file__).resolve().parent / "data"
OPENB_PODS = DATA_DIR / "openb_pod_list_default.csv"

# A window bound: seconds from the trace's first submission, or (Philly) a date and time.
Bound = float | datetime


class TraceError(ValueError):
    """A trace or cluster file that cannot be read; the message names the file and the row."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One submission of a trace, before any policy decides how it is scheduled."""

    name: str
    quota: str  # the team quota (Philly: the virtual cluster) the job was submitted to
    submit_s: float  # seconds from the first submission of the trace (or of its window)
    duration_s: float  # run time when never interrupted
    gpus: int  # GPUs of the whole job; split into pods by `pod_sizes`
    gpu_type: str | None = None  # None: any model (one model for the whole job)
    priority: int = 1
    idle: str | None = None  # the user's idle mode; None: the policy's default
    cpu_m: int = 0  # CPU of the whole job in millicores, split over its pods like its GPUs
    memory_mib: int = 0  # memory of the whole job in MiB, split the same way


@dataclass(frozen=True, slots=True)
class Cluster:
    """A node inventory and the quota tree that divides it (engine types, ready for a Snapshot)."""

    nodes: tuple[Node, ...]
    quotas: tuple[Quota, ...]
    description: str = ""
    source: str = ""  # where it came from (a file name), for descriptions of scaled copies

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


def pod_resources(gpus: int, cpu_m: int, memory_mib: int, max_per_pod: int) -> tuple[tuple[int, int, int], ...]:
    """(GPUs, millicores, MiB) of each pod: GPUs by `pod_sizes`, CPU and memory in proportion to them.

    Each pod gets the floor of its share; what the floors leave goes one unit at a time to the
    first pods, so the pods add up exactly to the job (12 GPUs, 30 cores: 8 + 4 GPUs, 20 + 10 cores).
    """
    sizes = pod_sizes(gpus, max_per_pod)

    def split(total: int) -> list[int]:
        if gpus <= 0:
            return [total]
        shares = [total * size // gpus for size in sizes]
        for i in range(total - sum(shares)):
            shares[i] += 1
        return shares

    return tuple(zip(sizes, split(cpu_m), split(memory_mib), strict=True))


def cut_window(jobs: Sequence[TraceJob], start: float | None, end: float | None) -> list[TraceJob]:
    """Jobs submitted in [start, end) (seconds on the jobs' own clock; None: open), shifted so the first is at 0."""
    kept = [
        job for job in jobs if (start is None or job.submit_s >= start) and (end is None or job.submit_s < end)
    ]
    if not kept:
        return []
    origin = kept[0].submit_s
    return [replace(job, submit_s=job.submit_s - origin) for job in kept]


def _seconds(bound: Bound | None, origin: datetime | None, path: Path) -> float | None:
    if bound is None or isinstance(bound, (int, float)):
        return bound
    if origin is None:
        raise TraceError(f"{path}: a window by date needs a trace with dates (Philly); give seconds")
    return (bound - origin).total_seconds()


# --- Philly -------------------------------------------------------------------------------------


def load_philly_jobs(
    path: Path | str, limit: int | None = None, window: tuple[Bound | None, Bound | None] = (None, None)
) -> list[TraceJob]:
    """Jobs of philly_pollux.csv in submission order, times relative to the first submission.

    Names are `p` plus the position in the whole file's order (p00000, p00001, ...), so name order
    equals queue order among jobs submitted in the same second, and a job keeps its name in any
    window. `window` keeps jobs submitted in [start, end): seconds from the file's first
    submission, or dates (UTC, as the trace); times are then relative to the window's first job.
    `limit` keeps the first N jobs (of the window).
    """
    path = Path(path)
    rows: list[tuple[datetime, int, float, int, str]] = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        require_columns(path, reader.fieldnames, ("timestamp", "duration", "num_gpus", "cluster"))
        for line, row in enumerate(reader, start=2):
            try:
                submitted = datetime.fromisoformat(row["timestamp"])
                duration = float(row["duration"])
                gpus = int(row["num_gpus"])
            except ValueError as exc:
                raise TraceError(f"{path}:{line}: {exc}") from exc
            rows.append((submitted, line, duration, gpus, row["cluster"]))
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return []
    origin = rows[0][0]
    jobs = [
        TraceJob(
            name=f"p{index:05d}",
            quota=vc,
            submit_s=(submitted - origin).total_seconds(),
            duration_s=duration,
            gpus=gpus,
        )
        for index, (submitted, _line, duration, gpus, vc) in enumerate(rows)
    ]
    start, end = (_seconds(bound, origin, path) for bound in window)
    if start is not None or end is not None:
        jobs = cut_window(jobs, start, end)
    return jobs[:limit] if limit is not None else jobs


# --- Alibaba openb pods (cluster-trace-gpu-v2023) -------------------------------------------------

OPENB_POD_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)


@dataclass(frozen=True, slots=True)
class OpenbPods:
    """The replayable pods of an openb pod list, and what was left out or changed, counted so that a
    replay can say it (docs/simulator.md, *openb pods*)."""

    jobs: list[TraceJob]
    rows: int = 0  # pods in the file
    never_ran: int = 0  # no scheduled_time (phase Pending): no run time to replay
    cpu_only: int = 0  # num_gpu 0 that ran: they ran on CPU nodes, which the GPU node list leaves out
    fractional: int = 0  # replayed pods that asked part of one GPU (gpu_milli < 1000): rounded up to 1 GPU
    failed: int = 0  # replayed pods whose phase is Failed: they held their resources until deleted
    by_class: dict[str, int] = field(default_factory=dict)  # replayed pods per QoS class

    def note(self) -> str:
        return (
            f"openb: {len(self.jobs):,} of {self.rows:,} pods replayed ({', '.join(f'{q} {n:,}' for q, n in self.by_class.items())}); "
            f"left out: {self.never_ran:,} never scheduled, {self.cpu_only:,} without GPUs; "
            f"{self.fractional:,} asking part of a GPU rounded up to 1 GPU; {self.failed:,} Failed replayed for the time they held"
        )


def read_openb_pods(path: Path | str) -> OpenbPods:
    """Every pod of an openb pod list that asked a GPU and was scheduled, as a job, in file order (the
    file is in creation order; names are the pods' own, `openb-pod-0000`..., so name order is queue order).

    - Submission: `creation_time`, seconds from the trace's start, shifted so the first kept pod is at 0.
    - Run time: `deletion_time - scheduled_time`. A `Running` pod was still running when the trace was cut
      (its deletion time is the trace's end), so its run time is a lower bound; a `Failed` pod held its
      resources from its start to its deletion like any other, so it is replayed for that time too.
    - Left out: pods never scheduled (`Pending`, no scheduled time: nothing says how long they would have
      run) and pods of 0 GPUs (they ran on the cluster's CPU nodes, which `openb_gpu_node.csv` leaves out).
    - A pod sharing a GPU (`gpu_milli` < 1000, always with `num_gpu` 1) gets one whole GPU: Tidepool hands
      out whole GPUs, so that is what it would hold here.
    - GPU model: `gpu_spec` when it names exactly one model; empty (every pod of the default list) or a
      choice of models (`V100M16|V100M32`): any model, since a job names one model or none.
    - Quota: the QoS class (`qos`), one team per class. CPU and memory as asked (millicores, MiB).
    """
    path = Path(path)
    kept: list[TraceJob] = []
    rows = never_ran = cpu_only = fractional = failed = 0
    by_class: dict[str, int] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        require_columns(path, reader.fieldnames, OPENB_POD_COLUMNS)
        for line, row in enumerate(reader, start=2):
            rows += 1
            try:
                gpus = int(row["num_gpu"])
                if not row["scheduled_time"]:
                    never_ran += 1
                    continue
                if gpus == 0:
                    cpu_only += 1
                    continue
                created, scheduled = int(row["creation_time"]), int(row["scheduled_time"])
                deleted = int(row["deletion_time"])
                milli, cpu_m, memory = int(row["gpu_milli"] or 0), int(row["cpu_milli"]), int(row["memory_mib"])
            except ValueError as exc:
                raise TraceError(f"{path}:{line}: {exc}") from exc
            if gpus < 0 or deleted <= scheduled or min(cpu_m, memory) < 0:
                raise TraceError(f"{path}:{line}: expected GPUs >= 0, CPU and memory >= 0 and deletion after "
                                 f"scheduling, got {gpus} GPUs, {cpu_m} m, {memory} MiB, {scheduled} -> {deleted}")
            spec = (row["gpu_spec"] or "").strip()
            qos = row["qos"].strip()
            if not qos:
                raise TraceError(f"{path}:{line}: empty qos")
            fractional += gpus == 1 and 0 < milli < 1000
            failed += row["pod_phase"] == "Failed"
            by_class[qos] = by_class.get(qos, 0) + 1
            kept.append(TraceJob(
                name=row["name"], quota=qos, submit_s=float(created), duration_s=float(deleted - scheduled),
                gpus=gpus, gpu_type=spec if spec and "|" not in spec else None, cpu_m=cpu_m, memory_mib=memory,
            ))
    # Sorted by creation time with file order breaking ties, like every loader here.
    kept = sorted(kept, key=lambda job: job.submit_s)
    origin = kept[0].submit_s if kept else 0.0
    return OpenbPods(
        jobs=[replace(job, submit_s=job.submit_s - origin) for job in kept], rows=rows, never_ran=never_ran,
        cpu_only=cpu_only, fractional=fractional, failed=failed, by_class=dict(sorted(by_class.items())),
    )


def load_openb_pods(
    path: Path | str, limit: int | None = None, window: tuple[Bound | None, Bound | None] = (None, None)
) -> list[TraceJob]:
    """`read_openb_pods`' jobs, cut to `window` (seconds from the first kept pod) and `limit`, like Philly's."""
    path = Path(path)
    jobs = read_openb_pods(path).jobs
    start, end = (_seconds(bound, None, path) for bound in window)
    if start is not None or end is not None:
        jobs = cut_window(jobs, start, end)
    return jobs[:limit] if limit is not None else jobs


# --- the user format ----------------------------------------------------------------------------

JOB_COLUMNS = ("name", "quota", "submit_s", "duration_s", "gpus")


def load_jobs_csv(
    path: Path | str, limit: int | None = None, window: tuple[Bound | None, Bound | None] = (None, None)
) -> list[TraceJob]:
    """A jobs CSV: `name,quota,submit_s,duration_s,gpus[,gpu_type,priority,idle,cpu,memory_gib]`.

    Rows are replayed in submission order (file order breaks ties); times are seconds and are
    shifted so the first submission is at 0. Empty optional cells take their defaults. `window`
    keeps jobs submitted in [start, end) seconds after the file's first submission (then the
    window's first job is at 0); `limit` keeps the first N of those.
    """
    path = Path(path)
    jobs: list[tuple[float, int, TraceJob]] = []
    names: set[str] = set()
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        require_columns(path, reader.fieldnames, JOB_COLUMNS)
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
    if not jobs:
        return []
    origin = jobs[0][0]
    shifted = [replace(job, submit_s=submit - origin) for submit, _line, job in jobs]
    start, end = (_seconds(bound, None, path) for bound in window)
    if start is not None or end is not None:
        shifted = cut_window(shifted, start, end)
    return shifted[:limit] if limit is not None else shifted


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
    cpu, memory = float(cell("cpu") or 0), float(cell("memory_gib") or 0)
    if cpu < 0 or memory < 0 or not (math.isfinite(cpu) and math.isfinite(memory)):
        raise ValueError(f"cpu and memory_gib must be finite and not negative, got {cpu} and {memory}")
    return TraceJob(
        name=name,
        quota=quota,
        submit_s=submit,
        duration_s=duration,
        gpus=gpus,
        gpu_type=cell("gpu_type") or None,
        priority=priority,
        idle=idle,
        cpu_m=round(cpu * 1000),
        memory_mib=round(memory * 1024),
    )


def _idle_mode(value: object) -> str:
    # YAML reads a bare `off` as False; accept both spellings like the scenario files do.
    text = "off" if value is False else str(value).strip().lower()
    if text not in IDLE_MODES:
        raise ValueError(f"idle must be one of {', '.join(IDLE_MODES)}, got {value!r}")
    return text


def require_columns(path: Path, found: Sequence[str] | None, needed: Iterable[str]) -> None:
    """Raise TraceError naming the file when a CSV lacks one of `needed` columns."""
    missing = [c for c in needed if c not in (found or ())]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")


def with_high_priority(jobs: Sequence[TraceJob], share: float, priority: int = 2) -> list[TraceJob]:
    """The jobs with a random `share` of them at `priority`: each job's draw is seeded by its name
    alone, so a job keeps its priority whatever the window, limit or policy."""
    return [replace(job, priority=priority) if random.Random(f"priority:{job.name}").random() < share else job
            for job in jobs]
