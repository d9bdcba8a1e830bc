"""`python manage.py simulate` and `python -m scheduler.simulator`: one set of options, one function.
No Django here, so the module entry point works without settings; the command forwards its options to `run`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from .charts import Scaled, duration
from .clusters import (
    load_cluster_yaml,
    load_openb_nodes,
    load_philly_vcs,
    openb_cluster,
    openb_pods_cluster,
    philly_cluster,
    scale_cluster,
)
from .elastic import DEFAULT_ALPHA, DEFAULT_SHARE
from .limits import LIMIT_MODELS
from .metrics import elastic_comparison
from .metrics import figures as replay_figures
from .metrics import targets as issue_targets
from .model import ReplayConfig, ReplayResult
from .policies import POLICIES
from .replay import replay
from .report import FIGURE_ROWS, write_report
from .traces import (
    OPENB_NODES,
    OPENB_PODS,
    PHILLY_JOBS,
    PHILLY_VCS,
    SHARED_TRACES,
    Bound,
    Cluster,
    TraceError,
    TraceJob,
    load_jobs_csv,
    load_openb_pods,
    load_philly_jobs,
    read_openb_pods,
    with_high_priority,
)

DEFAULT_REPORT = "build/simulation-report.html"
OPENB_TRACE = "openb"
SWEEP_SCALES = (0.25, 0.2, 0.15)

Write = Callable[[str], None]


class SimulationError(Exception):
    """A problem with the options or input files, said so that the user can fix it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace", default="philly",
        help="`philly` (../shared/traces/philly_pollux.csv), `openb` (Alibaba's 2023 GPU pods, kept in "
        "scheduler/simulator/data/, on the openb GPU nodes with one quota per QoS class) or a jobs CSV "
        "(name,quota,submit_s,duration_s,gpus[,gpu_type,priority,idle,cpu,memory_gib]; see docs/simulator.md)",
    )
    parser.add_argument("--cluster", help="cluster YAML (nodes and quotas); required with a jobs CSV")
    parser.add_argument(
        "--inventory", choices=("philly", "openb"), default="philly",
        help="nodes for the Philly trace: its VCs as 8-GPU P100 nodes, or the openb GPU nodes shared by VC size",
    )
    parser.add_argument(
        "--policy", default=",".join(POLICIES),
        help=f"comma-separated: {','.join(POLICIES)}, each optionally with +modifiers that override the options "
        "below for that column only: +fair, +fifo-share, +safe-point, +preempt-within, +min-runtime=S, "
        "+starvation=S (S: seconds, or 30m, 12h, 2d), +hold (the starvation hold), "
        "+starved-min-runtime=S, +limits=MODEL (see --limits), +elastic or +elastic=F (see --elastic, "
        "--elastic-share), +elastic-alpha=A, e.g. idle,idle+fair or idle,idle+elastic",
    )
    parser.add_argument("--scale", type=_positive_float, default=1.0,
                        help="multiply every quota and the inventory by F (rounded up: docs/simulator.md)")
    parser.add_argument("--sweep", action="store_true",
                        help="replay every policy at each of --sweep-scales (instead of --scale); one report")
    parser.add_argument("--sweep-scales", type=_scales, default=SWEEP_SCALES,
                        help="comma-separated scales for --sweep (default 0.25,0.2,0.15)")
    parser.add_argument("--window", nargs=2, metavar=("START", "END"),
                        help="only jobs submitted in [START, END): seconds from the trace's first submission "
                        "(suffix m, h or d allowed: 30d) or, for Philly, dates (2017-10-01)")
    parser.add_argument("--checkpoint-minutes", type=_positive_float, default=10.0,
                        help="work between two checkpoints of a job; work since the last one is redone")
    parser.add_argument("--checkpoint-cost-seconds", type=_non_negative_float, default=30.0,
                        help="wall time of one checkpoint save (no progress meanwhile)")
    parser.add_argument("--restart-seconds", type=_non_negative_float, default=60.0,
                        help="wall time a run resumed after a preemption spends before making progress")
    parser.add_argument("--checkpoint-seed", type=int, default=0,
                        help="seed of each job's random checkpoint phase (same seed, same replay)")
    parser.add_argument("--fixed-checkpoint-phase", action="store_true",
                        help="every job's first checkpoint one interval into its work (no random phase)")
    parser.add_argument("--grace-seconds", type=_non_negative_float, default=30.0,
                        help="grace period between SIGTERM and SIGKILL of a preempted job")
    parser.add_argument("--cycle-seconds", type=_non_negative_float, default=10.0,
                        help="least virtual time between two scheduling cycles")
    parser.add_argument("--limit", type=int, help="replay only the first N jobs (in submission order)")
    parser.add_argument("--report", default=DEFAULT_REPORT, help=f"HTML report path (default {DEFAULT_REPORT})")
    parser.add_argument("--traces-dir", default=str(SHARED_TRACES), help="folder of the public traces")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--idle-share", choices=("fifo", "fair"), default="fifo",
                        help="DESIGN §2b: the idle pass in pending order (fifo) or by lowest borrowed share (fair)")
    parser.add_argument("--min-runtime", type=_non_negative_float, default=0.0, metavar="SECONDS",
                        help="DESIGN §2b min_runtime_s: borrowers are not reclaimed before this run time (0: off)")
    parser.add_argument("--starvation", type=_non_negative_float, default=0.0, metavar="SECONDS",
                        help="DESIGN §2b starvation_s: drain sets for jobs waiting longer (0: off)")
    parser.add_argument("--starvation-hold", action="store_true",
                        help="with --starvation: starving jobs also hold the guarantee their quota frees, and a job "
                        "blocked by its own quota's use can starve (Tidepool's extension, docs/scheduling.md)")
    parser.add_argument("--starved-min-runtime", type=_non_negative_float, default=0.0, metavar="SECONDS",
                        help="with --starvation: a borrower whose run began after its wait passed the guard is not "
                        "reclaimed before this run time (Tidepool's extension, docs/scheduling.md; 0: off)")
    parser.add_argument("--safe-point", action="store_true",
                        help="give the engine each borrower's last simulated checkpoint (victims by safe point)")
    parser.add_argument("--preempt-within", action="store_true",
                        help="DESIGN §2b preempt_within on every quota: higher priority demotes, then preempts, "
                        "lower-priority In Quota jobs of the same quota")
    parser.add_argument("--high-priority-share", type=_share, default=0.0, metavar="F",
                        help="give a random share F of the jobs (seeded by name) priority 2, the rest keep theirs "
                        "(Philly has none): for preempt_within")
    parser.add_argument("--limits", choices=LIMIT_MODELS, default="none",
                        help="time limits given to the jobs (DESIGN §2d; simulator/limits.py): none, exact (the "
                        "run time), x2 (twice it), round (rounded up to 15 min, 30 min, 1-12 h, 1-7 days)")
    parser.add_argument("--estimates", type=int, default=200, metavar="N",
                        help="with limits: the pending jobs per pool the engine gives an exact start estimate")
    parser.add_argument(
        "--exact", action="store_true",
        help="give the engine every pending job at every cycle (no pruning or skipping): slow, for checking",
    )
    add_elastic_arguments(parser)


def add_elastic_arguments(parser: argparse.ArgumentParser) -> None:
    """DESIGN §2c's elastic jobs in a replay: the declared model's options (elastic.py)."""
    parser.add_argument("--elastic", action="store_true",
                        help="DESIGN §2c elastic jobs (idle policy only), by the declared model of docs/simulator.md: a "
                        "share of the jobs of 2+ GPUs, as the fewest equal pods (at least 2, none over a node), minimum "
                        "half of them, throughput (pods / max) ** alpha, every resize restarting from the checkpoint")
    parser.add_argument("--elastic-share", type=_share, default=DEFAULT_SHARE, metavar="F",
                        help=f"with --elastic: the share of the jobs of 2+ GPUs made elastic, each job's draw seeded by "
                        f"its name (default {DEFAULT_SHARE:g})")
    parser.add_argument("--elastic-alpha", type=_alpha, default=DEFAULT_ALPHA, metavar="A",
                        help=f"with --elastic: throughput grows as pods ** A, 0 < A <= 1 (default {DEFAULT_ALPHA:g})")


def run(options: Mapping[str, Any], write: Write, progress: Write) -> dict:
    """Load, replay every policy at every scale, print the figures, write the report; returns the closing JSON."""
    policies = policy_columns(options)
    scales = list(options.get("sweep_scales") or SWEEP_SCALES) if options.get("sweep") else [float(options["scale"])]
    jobs, trace_name = load_jobs(options)
    if not jobs:
        raise SimulationError("the trace has no jobs" + (" in that window" if options.get("window") else ""))
    settings = settings_text(options, policies)
    sweep: list[Scaled] = []
    notes: set[str] = set()
    if options["trace"] == OPENB_TRACE:  # what the loader left out or changed (docs/simulator.md), first
        note = read_openb_pods(OPENB_PODS).note()
        write(note)
        notes.add(note)
    for scale in scales:
        cluster = load_cluster(options, scale)
        write(f"{cluster.description}: {len(jobs):,} jobs, {cluster.total_gpus:,} GPUs; {settings}")
        results: list[ReplayResult] = []
        all_figures: dict[str, dict] = {}
        for policy in policies:
            label = f"{policy} {scale:g}" if len(scales) > 1 else policy
            config = replace(replay_config(variant_options(options, policy), policy.split("+")[0], label), name=policy)
            result = replay(jobs, cluster, config, progress=progress)
            results.append(result)
            all_figures[policy] = replay_figures(result)
            for note in result.notes:
                progress(f"[{label}] note: {note}")
                notes.add(note)
        for line in format_table(all_figures):
            write(line)
        for line in _estimate_lines(all_figures):
            write(line)
        for line in _elastic_lines(all_figures):
            write(line)
        checks = issue_targets(all_figures)
        if checks is not None:
            write(_targets_line(checks))
        sweep.append(Scaled(scale=scale, results=results, figures=all_figures))
    window = f", window {' to '.join(options['window'])}" if options.get("window") else ""
    scale_text = "scales " + ", ".join(f"{s:g}" for s in scales) if len(scales) > 1 else f"scale {scales[0]:g}"
    report = write_report(
        options.get("report") or DEFAULT_REPORT,
        sweep,
        title=f"Tidepool replay: {trace_name}{window}, {scale_text}",
        details=[f"{len(jobs):,} jobs; {settings}", *sorted(notes)],
    )
    write(f"report: {report}")
    closing: dict[str, Any] = {
        "trace": trace_name,
        "inventory": options["cluster"] if options.get("cluster") else (
            OPENB_TRACE if options["trace"] == OPENB_TRACE else options.get("inventory", "philly")),
        "window": options.get("window"),
        "jobs": len(jobs),
        "report": str(report),
    }
    if len(scales) == 1:
        only = sweep[0]
        closing |= {
            "scale": scales[0], "gpus": only.results[0].total_gpus, "policies": dict(only.figures),
            "targets": issue_targets(dict(only.figures)),
            "elastic_vs_idle": elastic_comparison(dict(only.figures)),
        }
    else:
        closing["sweep"] = [
            {"scale": s.scale, "gpus": s.results[0].total_gpus, "policies": dict(s.figures)} for s in sweep
        ]
    write(json.dumps(closing, sort_keys=False))
    return closing


def settings_text(options: Mapping[str, Any], policies: list[str]) -> str:
    """The replay settings, said once on the first line and in the report."""
    settings = (
        f"cycle {options['cycle_seconds']:g} s, grace {options['grace_seconds']:g} s, checkpoints every "
        f"{options['checkpoint_minutes']:g} min costing {options.get('checkpoint_cost_seconds', 30.0):g} s "
        f"({'fixed' if options.get('fixed_checkpoint_phase') else 'random'} phase), "
        f"restart {options.get('restart_seconds', 60.0):g} s"
    )
    if options.get("idle_share", "fifo") != "fifo" or options.get("min_runtime") or options.get("starvation") or (
            options.get("safe_point") or options.get("preempt_within")):
        settings += (f"; policies: idle share {options.get('idle_share') or 'fifo'}, min runtime "
                     f"{float(options.get('min_runtime') or 0):g} s, starvation {float(options.get('starvation') or 0):g} s"
                     f"{' with the quota hold' if options.get('starvation_hold') else ''}"
                     f"{_starved_text(options)}"
                     f"{', victims by safe point' if options.get('safe_point') else ''}"
                     f"{', preempt_within' if options.get('preempt_within') else ''}")
    if (options.get("limits") or "none") != "none":
        settings += f"; time limits {options['limits']}, {int(options.get('estimates', 200))} estimates per pool"
    if options.get("high_priority_share"):
        settings += f"; priority 2 for {100 * float(options['high_priority_share']):g} % of the jobs"
    if options.get("elastic") or any("+elastic" in p for p in policies):
        settings += (f"; elastic jobs (where asked): share {float(options.get('elastic_share', DEFAULT_SHARE)):g}, "
                     f"alpha {float(options.get('elastic_alpha', DEFAULT_ALPHA)):g}")
    return settings


def policy_columns(options: Mapping[str, Any]) -> list[str]:
    """The `--policy` columns, checked before any replay: an unknown policy, a bad modifier, or a policy
    setting that needs another one is a SimulationError saying so."""
    policies = [p.strip() for p in str(options["policy"]).split(",") if p.strip()]
    unknown = [p for p in policies if p.split("+")[0] not in POLICIES]
    if unknown or not policies:
        raise SimulationError(f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(POLICIES)}")
    for spec in policies:
        try:
            replay_config(variant_options(options, spec), spec.split("+")[0], spec)
        except ValueError as exc:
            raise SimulationError(f"{spec}: {exc}") from None
    return policies


def replay_config(options: Mapping[str, Any], policy: str, label: str) -> ReplayConfig:
    exact = bool(options.get("exact", False))
    return ReplayConfig(
        policy=policy,
        cycle_s=float(options["cycle_seconds"]),
        grace_s=float(options["grace_seconds"]),
        checkpoint_s=float(options["checkpoint_minutes"]) * 60,
        checkpoint_cost_s=float(options.get("checkpoint_cost_seconds", 30.0)),
        restart_s=float(options.get("restart_seconds", 60.0)),
        checkpoint_seed=None if options.get("fixed_checkpoint_phase") else int(options.get("checkpoint_seed", 0)),
        prune=not exact,
        skip_unchanged=not exact,
        label=label,
        progress_every=0.0 if options.get("quiet") else 0.05,
        idle_share=str(options.get("idle_share") or "fifo"),
        min_runtime_s=float(options.get("min_runtime") or 0.0),
        starvation_s=float(options.get("starvation") or 0.0),
        starvation_hold=bool(options.get("starvation_hold", False)),
        starved_min_runtime_s=float(options.get("starved_min_runtime") or 0.0),
        safe_point=bool(options.get("safe_point", False)),
        preempt_within=bool(options.get("preempt_within", False)),
        limits=str(options.get("limits") or "none"),
        estimates=int(options.get("estimates", 200)),
        elastic_share=float(options.get("elastic_share", DEFAULT_SHARE)) if options.get("elastic") else 0.0,
        elastic_alpha=float(options.get("elastic_alpha", DEFAULT_ALPHA)),
    )


_FLAGS = {"fair": ("idle_share", "fair"), "fifo-share": ("idle_share", "fifo"), "safe-point": ("safe_point", True),
          "preempt-within": ("preempt_within", True), "hold": ("starvation_hold", True)}
_VALUED = {"min-runtime": "min_runtime", "starvation": "starvation", "starved-min-runtime": "starved_min_runtime"}


def variant_options(options: Mapping[str, Any], spec: str) -> dict[str, Any]:
    """The options for one column `policy+modifier+...`: each modifier overrides one option (see --policy)."""
    changed = dict(options)
    for modifier in spec.split("+")[1:]:
        key, _, value = modifier.partition("=")
        if key in _FLAGS and not value:
            changed[_FLAGS[key][0]] = _FLAGS[key][1]
        elif key == "limits" and value in LIMIT_MODELS:
            changed["limits"] = value
        elif key == "elastic":
            changed["elastic"] = True
            if value:
                changed["elastic_share"] = _modifier_number(spec, key, value, _share)
        elif key == "elastic-alpha" and value:
            changed["elastic_alpha"] = _modifier_number(spec, key, value, _alpha)
        elif key in _VALUED and value:
            bound = parse_bound(value)
            if not isinstance(bound, float):
                raise SimulationError(f"{spec}: {key} takes seconds (600, 30m, 12h, 2d), got {value}")
            changed[_VALUED[key]] = bound
        else:
            raise SimulationError(f"{spec}: unknown modifier {modifier!r}; use "
                                  f"{', '.join([*_FLAGS, *_VALUED, 'limits', 'elastic', 'elastic-alpha'])}")
    return changed


def _modifier_number(spec: str, key: str, value: str, parse: Callable[[str], float]) -> float:
    try:
        return parse(value)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise SimulationError(f"{spec}: {key}: {exc}") from None


def _elastic_lines(all_figures: Mapping[str, dict]) -> list[str]:
    """Issue 24's figures: each column with elastic jobs against `idle` (metrics.elastic_comparison)."""
    lines = []
    for name, c in elastic_comparison(all_figures).items():
        jct, alloc, owners = c["mean_jct_s"], c["allocation_rate"], c["owners_p95_wait_s"]
        lines.append(
            f"elastic [{name}] vs [{c['baseline']}]: mean JCT {duration(jct[0])} -> {duration(jct[1])}; useful allocation "
            f"{100 * alloc[0]:.2f} % -> {100 * alloc[1]:.2f} %; whole-job preemptions {c['preemptions'][0]:,} -> "
            f"{c['preemptions'][1]:,} ({c['preemptions_avoided']:,} avoided); shrinks {c['shrinks']:,} "
            f"({c['pods_shrunk']:,} pods), growths {c['growths']:,} ({c['pods_grown']:,} pods), costing "
            f"{c['gpu_hours_resize_lost']:,.1f} GPU-h ({c['gpu_hours_growth_lost']:,.1f} the growths); GPU-h lost to preemption {c['gpu_hours_lost'][0]:,.1f} -> "
            f"{c['gpu_hours_lost'][1]:,.1f}; owners' p95 wait {duration(owners[0])} -> {duration(owners[1])} "
            f"({'not worse' if c['owners_p95_not_worse'] else 'WORSE'})"
        )
    return lines


def _estimate_lines(all_figures: Mapping[str, dict]) -> list[str]:
    """§2d: how good each column's start estimates were (columns with time limits only)."""
    return [
        f"estimates [{policy}]: {q['within']:,} of {q['judged']:,} jobs that waited 10 min or more within 25 % "
        f"of their wait or 15 min ({q['within_share']}); {q['unknown']:,} unknown; median error {q['median_error_s']} s"
        f"; rough: {q['rough_within']:,} of {q['rough']:,} within"
        for policy, figures in all_figures.items() if (q := figures.get("estimate_quality"))
    ]


def _starved_text(options: Mapping[str, Any]) -> str:
    seconds = float(options.get("starved_min_runtime") or 0)
    return f", runs begun after starving protected {seconds:g} s" if seconds else ""


def _targets_line(checks: Mapping[str, Any]) -> str:
    return (
        f"idle vs pool useful allocation {100 * checks['allocation_vs_pool']:.2f} % "
        f"({'ok' if checks['allocation_within_2pct'] else 'MISSED'}: within 2 %); "
        f"fits-quota p95 wait {checks['fits_quota_p95_s']:g} s vs allowed {checks['fits_quota_p95_allowed_s']:g} s "
        f"({'ok' if checks['fits_quota_p95_ok'] else 'MISSED'}); "
        f"lost {100 * checks['lost_share']:.3f} % ({'ok' if checks['lost_under_1pct'] else 'MISSED'}: under 1 %)"
    )


def load_jobs(options: Mapping[str, Any]) -> tuple[list[TraceJob], str]:
    traces = Path(options.get("traces_dir") or SHARED_TRACES)
    trace, limit = options["trace"], options.get("limit")
    window = tuple(parse_bound(text) for text in options["window"]) if options.get("window") else (None, None)
    try:
        if trace == "philly":
            jobs, name = load_philly_jobs(_need(traces / PHILLY_JOBS), limit=limit, window=window), "philly"
        elif trace == OPENB_TRACE:
            jobs, name = load_openb_pods(_need(OPENB_PODS), limit=limit, window=window), OPENB_TRACE
        else:
            jobs, name = load_jobs_csv(_need(Path(trace)), limit=limit, window=window), Path(trace).name
    except TraceError as exc:
        raise SimulationError(str(exc)) from exc
    share = float(options.get("high_priority_share") or 0.0)
    return (with_high_priority(jobs, share) if share else jobs), name


def load_cluster(options: Mapping[str, Any], scale: float) -> Cluster:
    traces = Path(options.get("traces_dir") or SHARED_TRACES)
    try:
        if options.get("cluster"):
            return scale_cluster(load_cluster_yaml(_need(Path(options["cluster"]))), scale)
        if options["trace"] == OPENB_TRACE:
            # The quotas are shared by the whole file's demand, so a window or --limit replays the same cluster.
            pods = read_openb_pods(_need(OPENB_PODS)).jobs
            return openb_pods_cluster(load_openb_nodes(_need(traces / OPENB_NODES)), pods, scale)
        if options["trace"] != "philly":
            raise SimulationError("a jobs CSV needs --cluster FILE (nodes and quotas)")
        vcs = load_philly_vcs(_need(traces / PHILLY_VCS))
        if options.get("inventory", "philly") == "openb":
            return openb_cluster(load_openb_nodes(_need(traces / OPENB_NODES)), vcs, scale)
        return philly_cluster(vcs, scale)
    except TraceError as exc:
        raise SimulationError(str(exc)) from exc


_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_bound(text: str) -> Bound:
    """A window bound: seconds (`3600`, `90m`, `12h`, `30d`) or an ISO date and time (`2017-10-01`)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smhd]?)\s*", text)
    if match:
        return float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise SimulationError(f"window bound {text!r}: expected seconds (3600, 90m, 12h, 30d) or a date") from None


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


def _scales(text: str) -> tuple[float, ...]:
    try:
        scales = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated scales, got {text}") from None
    if not scales or any(scale <= 0 for scale in scales):
        raise argparse.ArgumentTypeError(f"scales must be positive, got {text}")
    return scales


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _alpha(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text}")
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
