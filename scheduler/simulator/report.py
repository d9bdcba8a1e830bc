"""A self-contained HTML report of a set of replays (Plotly's JavaScript is embedded: works offline)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from .metrics import allocation_series, percentile
from .replay import ReplayResult

# Policies keep one colour across charts.
COLOURS = {"strict": "#d62728", "idle": "#1f77b4", "pool": "#2ca02c"}
NICE_BUCKETS = (60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400)
MAX_POINTS = 2000  # per series: keeps the page light on a 100-day trace
CDF_POINTS = 400


def write_report(
    path: Path | str,
    results: Sequence[ReplayResult],
    figures: Mapping[str, dict],
    title: str,
    details: Sequence[str] = (),
) -> Path:
    """Write the report to `path` (folders created) and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    charts = [allocation_chart(results), wait_cdf_chart(results)]
    parts = [
        pio.to_html(chart, include_plotlyjs=(i == 0), full_html=False, config={"displaylogo": False})
        for i, chart in enumerate(charts)
    ]
    page = _PAGE.format(
        title=html.escape(title),
        details="".join(f"<li>{html.escape(line)}</li>" for line in details),
        table=_table(figures) + "<h2>Queueing delay by team: mean / p95 (jobs started)</h2>" + _team_table(figures),
        charts="\n".join(f'<div class="chart">{part}</div>' for part in parts),
    )
    path.write_text(page, encoding="utf-8")
    return path


def bucket_seconds(span: float) -> float:
    """The smallest round interval that keeps a series over `span` under MAX_POINTS points."""
    for bucket in NICE_BUCKETS:
        if span / bucket <= MAX_POINTS:
            return bucket
    return math.ceil(span / MAX_POINTS / 86400) * 86400


def allocation_chart(results: Sequence[ReplayResult]) -> go.Figure:
    end = max((r.end_s for r in results), default=0.0)
    bucket = bucket_seconds(end)
    figure = go.Figure()
    for result in results:
        series = allocation_series(result.allocation, 0.0, max(end, bucket), bucket)
        days = [(i + 0.5) * bucket / 86400 for i in range(len(series))]
        share = [100 * gpus / result.total_gpus if result.total_gpus else 0.0 for gpus in series]
        figure.add_trace(
            go.Scatter(
                x=days, y=share, mode="lines", name=result.policy,
                line={"color": COLOURS.get(result.policy), "width": 1},
                hovertemplate="day %{x:.2f}: %{y:.1f} %<extra>" + result.policy + "</extra>",
            )
        )
    figure.update_layout(
        title=f"GPUs allocated over time ({_duration(bucket)} averages)",
        xaxis_title="days since the first submission",
        yaxis_title="% of the cluster's GPUs",
        yaxis_range=[0, 100],
        template="plotly_white",
        height=420,
    )
    return figure


def wait_cdf_chart(results: Sequence[ReplayResult]) -> go.Figure:
    figure = go.Figure()
    for result in results:
        for label, dash, keep in (
            ("all jobs", "solid", lambda job: True),
            ("jobs that fit their quota", "dot", lambda job: job.fits_guarantee),
        ):
            waits = sorted(job.wait_s for job in result.jobs if job.wait_s is not None and keep(job))
            if not waits:
                continue
            quantiles = [i * 100 / (CDF_POINTS - 1) for i in range(CDF_POINTS)]
            # Log axis: waits under one second are drawn at one second.
            x = [max(percentile(waits, q), 1.0) / 60 for q in quantiles]
            figure.add_trace(
                go.Scatter(
                    x=x, y=quantiles, mode="lines", name=f"{result.policy}: {label}",
                    line={"color": COLOURS.get(result.policy), "dash": dash},
                    hovertemplate="%{y:.1f} % waited ≤ %{x:.1f} min<extra></extra>",
                )
            )
    figure.update_layout(
        title="Queueing delay (submission to first start), cumulative",
        xaxis={"title": "minutes (log; under 1 s drawn at 1 s)", "type": "log"},
        yaxis={"title": "% of started jobs", "range": [0, 100]},
        template="plotly_white",
        height=460,
    )
    return figure


FIGURE_ROWS = (
    ("GPUs", lambda f: f"{f['gpus']:,}"),
    ("jobs (refused / never started)", lambda f: f"{f['jobs']:,} ({f['rejected']} / {f['never_started']})"),
    ("GPU allocation rate", lambda f: f"{100 * f['allocation_rate']:.2f} %"),
    ("wait, all: mean / median / p95", lambda f: _waits(f["wait_s"]["all"])),
    ("wait, own quota: mean / median / p95", lambda f: _waits(f["wait_s"]["own_quota"])),
    ("wait, idle: mean / median / p95", lambda f: _waits(f["wait_s"]["idle"])),
    ("wait, fits quota: mean / median / p95", lambda f: _waits(f["wait_s"]["fits_quota"])),
    ("mean JCT", lambda f: _duration(f["mean_jct_s"])),
    ("preemptions (jobs)", lambda f: f"{f['preemptions']:,} ({f['preempted_jobs']:,})"),
    (
        "GPU-hours lost / delivered",
        lambda f: f"{f['gpu_hours_lost']:,.1f} / {f['gpu_hours_delivered']:,.0f} ({100 * f['lost_share']:.3f} %)",
    ),
    ("reclaim latency: n, mean / p95 / max", lambda f: _latency(f["reclaim_latency_s"])),
    ("  from nomination: mean / p95 / max", lambda f: _latency(f["nominated_to_start_s"])),
    ("replay wall time (engine)", lambda f: f"{f['wall_s']:.0f} s ({f['engine_s']:.0f} s, {f['engine_calls']:,} calls)"),
)


def _table(figures: Mapping[str, dict]) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in figures)
    rows = "".join(
        f"<tr><th>{html.escape(label)}</th>"
        + "".join(f"<td>{html.escape(render(f))}</td>" for f in figures.values())
        + "</tr>"
        for label, render in FIGURE_ROWS
    )
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _team_table(figures: Mapping[str, dict]) -> str:
    teams = sorted({team for f in figures.values() for team in f["wait_by_team_s"]})
    head = "".join(f"<th>{html.escape(name)}</th>" for name in figures)
    rows = "".join(
        f"<tr><th>{html.escape(team)}</th>"
        + "".join(f"<td>{html.escape(_team_cell(f['wait_by_team_s'].get(team)))}</td>" for f in figures.values())
        + "</tr>"
        for team in teams
    )
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _team_cell(stats: Mapping | None) -> str:
    if not stats or not stats["n"]:
        return "–"
    return f"{_duration(stats['mean'])} / {_duration(stats['p95'])} ({stats['n']:,})"


def _waits(stats: Mapping) -> str:
    if not stats["n"]:
        return "–"
    return f"{_duration(stats['mean'])} / {_duration(stats['median'])} / {_duration(stats['p95'])} (n={stats['n']:,})"


def _latency(stats: Mapping) -> str:
    if not stats["n"]:
        return "–"
    return f"{stats['n']:,}: {_duration(stats['mean'])} / {_duration(stats['p95'])} / {_duration(stats['max'])}"


def _duration(seconds: float | None) -> str:
    """Seconds in the unit a person reads best: 45 s, 12.5 min, 3.2 h, 4.1 d."""
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .35rem .8rem; text-align: right; }}
tbody th {{ text-align: left; font-weight: normal; color: #555; }}
.chart {{ margin: 1.5rem 0; }}
</style></head>
<body>
<h1>{title}</h1>
<ul>{details}</ul>
{table}
{charts}
</body></html>
"""
