"""Plotly charts of replays: useful allocation over time, wait CDFs by job size, per-quota slowdown.

Each chart takes `Scaled` results (one scale, its replays and their figures) and draws one row
of panels per scale, so the same functions serve one replay and a sweep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .metrics import SIZE_BUCKETS, percentile, size_bucket
from .model import ReplayResult

# Policies keep one colour across charts.
COLOURS = {"fifo": "#9467bd", "strict": "#d62728", "idle": "#1f77b4", "pool": "#2ca02c"}
NICE_BUCKETS = (60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400)
MAX_POINTS = 2000  # per series: keeps the page light on a 100-day trace
CDF_POINTS = 200
PANEL_HEIGHT = 300


@dataclass(frozen=True, slots=True)
class Scaled:
    """The replays of one scale and their figures, by policy."""

    scale: float
    results: Sequence[ReplayResult]
    figures: Mapping[str, dict]


def bucket_seconds(span: float) -> float:
    """The smallest round interval that keeps a series over `span` under MAX_POINTS points."""
    for bucket in NICE_BUCKETS:
        if span / bucket <= MAX_POINTS:
            return bucket
    return math.ceil(span / MAX_POINTS / 86400) * 86400


def useful_series(result: ReplayResult, start: float, end: float, bucket: float) -> list[float]:
    """Average GPUs doing useful work in each `bucket`-second interval of [start, end)."""
    count = max(1, math.ceil((end - start) / bucket))
    totals = [0.0] * count
    for record in result.runs:
        first = max(0, int((record.run.start - start) // bucket))
        last = min(count - 1, int((record.end - start) // bucket))
        for index in range(first, last + 1):
            low = start + index * bucket
            totals[index] += record.split(low, low + bucket)["useful"]
    return [total / bucket for total in totals]


def allocation_chart(sweep: Sequence[Scaled]) -> go.Figure:
    figure = make_subplots(
        rows=len(sweep), cols=1, shared_xaxes=True, subplot_titles=[f"scale {s.scale:g}" for s in sweep]
    )
    end = max((r.end_s for s in sweep for r in s.results), default=0.0)
    bucket = bucket_seconds(end)
    for row, scaled in enumerate(sweep, start=1):
        for result in scaled.results:
            series = useful_series(result, 0.0, max(end, bucket), bucket)
            share = [100 * gpus / result.total_gpus if result.total_gpus else 0.0 for gpus in series]
            figure.add_trace(
                go.Scatter(
                    x=[(i + 0.5) * bucket / 86400 for i in range(len(series))], y=share, mode="lines",
                    name=result.policy, legendgroup=result.policy, showlegend=row == 1,
                    line={"color": COLOURS.get(result.policy), "width": 1},
                    hovertemplate="day %{x:.2f}: %{y:.1f} %<extra>" + result.policy + "</extra>",
                ),
                row=row, col=1,
            )
        figure.update_yaxes(title_text="% of GPUs", range=[0, 100], row=row, col=1)
    figure.update_xaxes(title_text="days since the first submission", row=len(sweep), col=1)
    figure.update_layout(
        title=f"GPUs doing useful work over time ({duration(bucket)} averages; redone work and overheads left out)",
        template="plotly_white", height=120 + PANEL_HEIGHT * len(sweep),
    )
    return figure


def wait_cdf_chart(sweep: Sequence[Scaled]) -> go.Figure:
    """One panel per scale and job size: the CDF of all time queued, one line per policy."""
    labels = [label for label, _, _ in SIZE_BUCKETS]
    figure = make_subplots(
        rows=len(sweep), cols=len(labels), shared_yaxes=True,
        subplot_titles=[f"{s.scale:g}: {label} GPU" for s in sweep for label in labels],
    )
    for row, scaled in enumerate(sweep, start=1):
        for result in scaled.results:
            groups: dict[str, list[float]] = {label: [] for label in labels}
            for job in result.jobs:
                if not job.rejected:
                    groups[size_bucket(job.gpus)].append(job.queued_s)
            for col, label in enumerate(labels, start=1):
                waits = sorted(groups[label])
                if not waits:
                    continue
                quantiles = [i * 100 / (CDF_POINTS - 1) for i in range(CDF_POINTS)]
                # Log axis: waits under a minute are drawn at one minute.
                x = [max(percentile(waits, q) / 3600, 1 / 60) for q in quantiles]
                figure.add_trace(
                    go.Scatter(
                        x=x, y=quantiles, mode="lines", name=result.policy, legendgroup=result.policy,
                        showlegend=row == 1 and col == 1, line={"color": COLOURS.get(result.policy)},
                        hovertemplate="%{y:.1f} % waited ≤ %{x:.2f} h<extra>" + result.policy + "</extra>",
                    ),
                    row=row, col=col,
                )
                figure.update_xaxes(type="log", row=row, col=col)
        figure.update_yaxes(title_text="% of jobs", range=[0, 100], row=row, col=1)
    figure.update_xaxes(title_text="hours queued (log)", row=len(sweep))
    figure.update_layout(
        title="Time queued (first start and every re-queue; never started: censored), cumulative, by job size",
        template="plotly_white", height=140 + PANEL_HEIGHT * len(sweep),
    )
    return figure


def quota_slowdown_chart(sweep: Sequence[Scaled]) -> go.Figure:
    figure = make_subplots(rows=len(sweep), cols=1, subplot_titles=[f"scale {s.scale:g}" for s in sweep])
    for row, scaled in enumerate(sweep, start=1):
        for policy, figures in scaled.figures.items():
            quotas = list(figures["by_quota"])
            figure.add_trace(
                go.Bar(
                    x=quotas, y=[figures["by_quota"][q]["slowdown"]["mean"] for q in quotas],
                    name=policy, legendgroup=policy, showlegend=row == 1,
                    marker={"color": COLOURS.get(policy)},
                    hovertemplate="%{x}: %{y:.1f}<extra>" + policy + "</extra>",
                ),
                row=row, col=1,
            )
        figure.update_yaxes(title_text="mean slowdown (log)", type="log", row=row, col=1)
    figure.update_layout(
        title="Mean slowdown per quota (Jain's index of these in the tables)", barmode="group",
        template="plotly_white", height=120 + PANEL_HEIGHT * len(sweep),
    )
    return figure


def duration(seconds: float | None) -> str:
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

