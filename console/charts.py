"""Plotly figures for the dashboard and the quota page, built server-side from the selectors.

Figures travel to the page as JSON inside <script type="application/json"> and are drawn by
console.js with the Plotly bundle the console serves itself. Each series ends with a point
for "now" computed from the live pods, so a chart is right even between allocation samples.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import datetime, timedelta

import plotly.graph_objects as go
from django.utils import timezone

from scheduler.models import ResourceType
from scheduler.selectors import (
    AllocationRow,
    QuotaUsage,
    allocation_by_quota,
    pool_allocation_series,
    preemption_times,
    queue_waits,
    quota_allocation_series,
)

IN_QUOTA_COLOR = "#16a34a"
NOT_IN_QUOTA_COLOR = "#f59e0b"
FREE_COLOR = "#cbd5e1"
PREEMPT_COLOR = "#ea580c"  # console.css --pre: a preemption is not a failure, so not red
WINDOW = timedelta(hours=24)

_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def figure_json(figure: go.Figure) -> str:
    """The figure as JSON that is safe inside a <script> element."""
    return figure.to_json(validate=False).translate(_JSON_ESCAPES)


def _layout(title: str, *, yaxis_title: str, height: int = 300) -> dict:
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        "height": height,
        "margin": {"l": 48, "r": 12, "t": 40, "b": 36},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#1f2937"},
        "legend": {"orientation": "h", "y": -0.18, "x": 0},
        "hovermode": "x unified",
        "yaxis": {"title": {"text": yaxis_title}, "rangemode": "tozero", "gridcolor": "#e5e7eb", "fixedrange": True},
        "xaxis": {"type": "date", "gridcolor": "#f1f5f9"},
    }


def _step(color: str) -> dict:
    """Allocation holds its value until the next sample: draw steps, not slopes."""
    return {"color": color, "shape": "hv", "width": 1.5}


def _last_day(figure: go.Figure, now: datetime) -> None:
    figure.update_xaxes(range=[now - WINDOW, now])


def _live_samples(now: datetime) -> list[AllocationRow]:
    """Allocation right now, appended to the stored history."""
    return allocation_by_quota()


def pool_allocation_figures(now: datetime | None = None) -> list[tuple[str, str]]:
    """Per pool: (title, figure JSON) of GPUs In Quota / Not in Quota / free over the last 24 h, stacked."""
    now = now or timezone.now()
    series = pool_allocation_series(since=now - WINDOW)
    for sample in _live_samples(now):
        if sample.quota_id is None:
            series.setdefault(sample.resource_type, []).append(
                (now, sample.in_quota_gpus, sample.not_in_quota_gpus, sample.total_gpus)
            )
    figures = []
    for pool in sorted(series):
        points = series[pool]
        times = [p[0] for p in points]
        used_in = [p[1] for p in points]
        used_out = [p[2] for p in points]
        free = [max(0, p[3] - p[1] - p[2]) for p in points]
        label = ResourceType(pool).label if pool in ResourceType.values else pool
        figure = go.Figure(
            data=[
                go.Scatter(x=times, y=used_in, name="In Quota", stackgroup="gpus", line=_step(IN_QUOTA_COLOR)),
                go.Scatter(x=times, y=used_out, name="Not in Quota", stackgroup="gpus", line=_step(NOT_IN_QUOTA_COLOR)),
                go.Scatter(x=times, y=free, name="Free", stackgroup="gpus", line=_step(FREE_COLOR)),
            ],
            layout=_layout(f"{label} pool: GPU allocation", yaxis_title="GPUs"),
        )
        figures.append((label, figure_json(figure)))
    return figures


def preemptions_figure(now: datetime | None = None) -> tuple[str, int]:
    """Preemptions per hour over the last 24 h (bars); also returns the 24 h total."""
    now = now or timezone.now()
    start = (now - WINDOW).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    hours = [start + timedelta(hours=i) for i in range(24)]
    counts: dict[datetime, int] = defaultdict(int)
    times = preemption_times(since=hours[0])
    for time in times:
        counts[time.replace(minute=0, second=0, microsecond=0)] += 1
    figure = go.Figure(
        data=[
            go.Bar(
                x=[hour + timedelta(minutes=30) for hour in hours],
                y=[counts[hour] for hour in hours],
                name="Preemptions",
                marker={"color": PREEMPT_COLOR},
                hovertemplate="%{y} preemption(s)<extra></extra>",
            )
        ],
        layout=_layout("Preemptions per hour", yaxis_title="preemptions"),
    )
    figure.update_layout(showlegend=False, bargap=0.15)
    _last_day(figure, now)
    return figure_json(figure), len(times)


def queue_wait_figure(now: datetime | None = None) -> tuple[str, float | None]:
    """Each admission's queue wait over the last 24 h, with the hourly median; also returns the median."""
    now = now or timezone.now()
    waits = queue_waits(since=now - WINDOW)
    by_hour: dict[datetime, list[float]] = defaultdict(list)
    for time, seconds in waits:
        by_hour[time.replace(minute=0, second=0, microsecond=0)].append(seconds)
    hours = sorted(by_hour)
    figure = go.Figure(
        data=[
            go.Bar(
                x=[hour + timedelta(minutes=30) for hour in hours],
                y=[statistics.median(by_hour[hour]) for hour in hours],
                name="Hourly median",
                marker={"color": "rgba(37, 99, 235, 0.18)"},
                hovertemplate="median %{y:.1f} s<extra></extra>",
            ),
            go.Scatter(
                x=[t for t, _ in waits],
                y=[s for _, s in waits],
                mode="markers",
                name="Admission",
                marker={"color": "#2563eb", "size": 6, "opacity": 0.7},
                hovertemplate="waited %{y:.1f} s<extra></extra>",
            ),
        ],
        layout=_layout("Queue wait", yaxis_title="seconds"),
    )
    figure.update_layout(bargap=0.1, hovermode="closest")
    _last_day(figure, now)
    median = statistics.median(s for _, s in waits) if waits else None
    return figure_json(figure), median


def quota_usage_figure(tree: list[QuotaUsage], now: datetime | None = None) -> str:
    """GPU use of each quota's subtree over 24 h, In Quota and Not in Quota stacked, with its min.

    One figure, one pair of traces per quota, and a menu that shows one quota at a time.
    """
    now = now or timezone.now()
    own = quota_allocation_series(since=now - WINDOW)
    for sample in _live_samples(now):
        if sample.quota_id is not None:
            own.setdefault(sample.quota_id, []).append((now, sample.in_quota_gpus, sample.not_in_quota_gpus))
    figure = go.Figure(layout=_layout("GPU use by quota", yaxis_title="GPUs", height=340))
    buttons = []
    traces_per_quota = 3
    for position, usage in enumerate(tree):
        times, used_in, used_out = _subtree_series(usage, own)
        visible = position == 0
        group = f"quota-{usage.quota.pk}"
        figure.add_trace(
            go.Scatter(x=times, y=used_in, name="In Quota", stackgroup=group, visible=visible,
                       line=_step(IN_QUOTA_COLOR))
        )
        figure.add_trace(
            go.Scatter(x=times, y=used_out, name="Not in Quota", stackgroup=group, visible=visible,
                       line=_step(NOT_IN_QUOTA_COLOR))
        )
        figure.add_trace(
            go.Scatter(x=[times[0], times[-1]] if times else [], y=[usage.min_gpus] * (2 if times else 0),
                       name="min (guaranteed)", mode="lines", visible=visible,
                       line={"color": "#475569", "dash": "dash", "width": 1.5})
        )
        mask = [False] * (traces_per_quota * len(tree))
        mask[position * traces_per_quota : (position + 1) * traces_per_quota] = [True] * traces_per_quota
        buttons.append({"label": ("· " * usage.depth) + usage.quota.name, "method": "update", "args": [{"visible": mask}]})
    if buttons:
        figure.update_layout(
            updatemenus=[{"buttons": buttons, "direction": "down", "x": 1, "xanchor": "right", "y": 1.18,
                          "yanchor": "top", "showactive": True}],
        )
    return figure_json(figure)


def _subtree_series(
    usage: QuotaUsage, own: dict[int, list[tuple[datetime, int, int]]]
) -> tuple[list[datetime], list[int], list[int]]:
    """Sum the quota's own samples and its descendants' at each sample time."""
    totals: dict[datetime, list[int]] = defaultdict(lambda: [0, 0])
    stack = [usage]
    while stack:
        node = stack.pop()
        for time, used_in, used_out in own.get(node.quota.pk, []):
            totals[time][0] += used_in
            totals[time][1] += used_out
        stack.extend(node.children)
    times = sorted(totals)
    return times, [totals[t][0] for t in times], [totals[t][1] for t in times]
