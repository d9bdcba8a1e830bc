"""`python manage.py simulate` and `python -m scheduler.simulator`: one set of options, one function.

No Django here, so the module entry point works without settings; the management command only
forwards its parsed options to `run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .metrics import figures as replay_figures
from .metrics import targets as issue_targets
from .policies import POLICIES
from .replay import ReplayConfig, ReplayResult, replay
from .report import FIGURE_ROWS, write_report
from .traces import (
    OPENB_NODES,
    PHILLY_JOBS,
    PHILLY_VCS,
    SHARED_TRACES,
    Cluster,
    TraceError,
    TraceJob,
    load_cluster_yaml,
    load_jobs_csv,
    load_openb_nodes,
    load_philly_jobs,
    load_philly_vcs,
    openb_cluster,
    philly_cluster,
    scale_cluster,
)

DEFAULT_REPORT = "build/simulation-report.html"

Write = Callable[[str], None]


class SimulationError(Exception):
    """A problem with the options or input files, said so that the user can fix it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace", default="philly",
        help="`philly` (../shared/traces/philly_pollux.csv) or a jobs CSV "
        "(name,quota,submit_s,duration_s,gpus[,gpu_type,priority,idle]; see docs/simulator.md)",
    )
    parser.add_argument("--cluster", help="cluster YAML (nodes and quotas); required with a jobs CSV")
    parser.add_argument(
        "--inventory", choices=("philly", "openb"), default="philly",
        help="nodes for the Philly trace: its VCs as 8-GPU P100 nodes, or the openb GPU nodes shared by VC size",
    )
    parser.add_argument("--policy", default=",".join(POLICIES), help="comma-separated: strict,idle,pool")
    parser.add_argument("--scale", type=_positive_float, default=1.0,
                        help="multiply every quota and the inventory by F (whole nodes, rounded up)")
    parser.add_argument("--checkpoint-minutes", type=_positive_float, default=10.0,
                        help="checkpoint interval of every job; work since the last one is redone")
    parser.add_argument("--grace-seconds", type=_non_negative_float, default=30.0,
                        help="grace period between SIGTERM and SIGKILL of a preempted job")
    parser.add_argument("--cycle-seconds", type=_non_negative_float, default=10.0,
                        help="least virtual time between two scheduling cycles")
    parser.add_argument("--limit", type=int, help="replay only the first N jobs (in submission order)")
    parser.add_argument("--report", default=DEFAULT_REPORT, help=f"HTML report path (default {DEFAULT_REPORT})")
    parser.add_argument("--traces-dir", default=str(SHARED_TRACES), help="folder of the public traces")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--exact", action="store_true",
        help="give the engine every pending job at every cycle (no pruning or skipping): slow, for checking",
    )


def run(options: Mapping[str, Any], write: Write, progress: Write) -> dict:
    """Load, replay every policy, print the figures, write the report; returns the closing JSON object."""
    policies = [p.strip() for p in str(options["policy"]).split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise SimulationError(f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(POLICIES)}")
    jobs, cluster, trace_name = load_inputs(options)
    if not jobs:
        raise SimulationError("the trace has no jobs")
    write(
        f"{cluster.description}: {len(jobs):,} jobs, {cluster.total_gpus:,} GPUs; cycle {options['cycle_seconds']:g} s, "
        f"grace {options['grace_seconds']:g} s, checkpoints every {options['checkpoint_minutes']:g} min"
    )
    results: list[ReplayResult] = []
    all_figures: dict[str, dict] = {}
    for policy in policies:
        config = ReplayConfig(
            policy=policy,
            cycle_s=float(options["cycle_seconds"]),
            grace_s=float(options["grace_seconds"]),
            checkpoint_s=float(options["checkpoint_minutes"]) * 60,
            prune=not options.get("exact", False),
            skip_unchanged=not options.get("exact", False),
            label=policy,
            progress_every=0.0 if options.get("quiet") else 0.05,
        )
        result = replay(jobs, cluster, config, progress=progress)
        results.append(result)
        all_figures[policy] = replay_figures(result)
        for note in result.notes:
            progress(f"[{policy}] note: {note}")
    for line in format_table(all_figures):
        write(line)
    report = write_report(
        options.get("report") or DEFAULT_REPORT,
        results,
        all_figures,
        title=f"Tidepool replay: {trace_name}, scale {options['scale']:g}",
        details=[
            cluster.description,
            f"{len(jobs):,} jobs; cycle {options['cycle_seconds']:g} s, grace {options['grace_seconds']:g} s, "
            f"checkpoints every {options['checkpoint_minutes']:g} min",
            *{note for r in results for note in r.notes},
        ],
    )
    write(f"report: {report}")
    checks = issue_targets(all_figures)
    if checks is not None:
        write(
            f"idle vs pool allocation {100 * checks['allocation_vs_pool']:.2f} % "
            f"({'ok' if checks['allocation_within_2pct'] else 'MISSED'}: within 2 %); "
            f"fits-quota p95 {checks['fits_quota_p95_s']:g} s vs allowed {checks['fits_quota_p95_allowed_s']:g} s "
            f"({'ok' if checks['fits_quota_p95_ok'] else 'MISSED'}); "
            f"lost {100 * checks['lost_share']:.3f} % ({'ok' if checks['lost_under_1pct'] else 'MISSED'}: under 1 %)"
        )
    closing = {
        "trace": trace_name,
        "inventory": options.get("inventory", "philly") if not options.get("cluster") else options["cluster"],
        "scale": options["scale"],
        "jobs": len(jobs),
        "gpus": cluster.total_gpus,
        "report": str(report),
        "policies": all_figures,
        "targets": checks,
    }
    write(json.dumps(closing, sort_keys=False))
    return closing


def load_inputs(options: Mapping[str, Any]) -> tuple[list[TraceJob], Cluster, str]:
    traces = Path(options.get("traces_dir") or SHARED_TRACES)
    trace, scale, limit = options["trace"], float(options["scale"]), options.get("limit")
    try:
        if trace == "philly":
            _need(traces / PHILLY_JOBS)
            jobs = load_philly_jobs(traces / PHILLY_JOBS, limit=limit)
            name = "philly"
        else:
            jobs = load_jobs_csv(_need(Path(trace)), limit=limit)
            name = Path(trace).name
        if options.get("cluster"):
            cluster = scale_cluster(load_cluster_yaml(_need(Path(options["cluster"]))), scale)
        elif trace != "philly":
            raise SimulationError("a jobs CSV needs --cluster FILE (nodes and quotas)")
        else:
            vcs = load_philly_vcs(_need(traces / PHILLY_VCS))
            if options.get("inventory", "philly") == "openb":
                cluster = openb_cluster(load_openb_nodes(_need(traces / OPENB_NODES)), vcs, scale)
            else:
                cluster = philly_cluster(vcs, scale)
    except TraceError as exc:
        raise SimulationError(str(exc)) from exc
    return jobs, cluster, name


def format_table(all_figures: Mapping[str, dict]) -> list[str]:
    """The figures as aligned text: one row per figure, one column per policy."""
    labels = [label for label, _ in FIGURE_ROWS]
    cells = [[render(f) for f in all_figures.values()] for _, render in FIGURE_ROWS]
    first = max(len(label) for label in labels)
    widths = [max(len(name), *(len(row[i]) for row in cells)) for i, name in enumerate(all_figures)]
    lines = [" " * first + "  " + "  ".join(name.ljust(w) for name, w in zip(all_figures, widths, strict=True))]
    for label, row in zip(labels, cells, strict=True):
        lines.append(label.ljust(first) + "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return [line.rstrip() for line in lines]


def _need(path: Path) -> Path:
    if not path.exists():
        raise SimulationError(f"{path} not found")
    return path


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.simulator", description="Replay a trace through the scheduling engine."
    )
    add_arguments(parser)
    options = vars(parser.parse_args(argv))

    def write(line: str) -> None:
        print(line, flush=True)

    def progress(line: str) -> None:
        if not options["quiet"]:
            print(line, file=sys.stderr, flush=True)

    try:
        run(options, write, progress)
    except SimulationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
