"""A self-contained HTML report of replays at one or more scales (Plotly's JavaScript embedded: works offline).

With more than one scale, a comparison across scales comes first; then the charts (charts.py);
then, per scale, the figures of every policy, waits and slowdowns by job size, and per-quota figures.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import plotly.io as pio

from .charts import Scaled, allocation_chart, duration, quota_slowdown_chart, wait_cdf_chart
from .metrics import SIZE_BUCKETS

Render = Callable[[dict], str]


def write_report(path: Path | str, sweep: Sequence[Scaled], title: str, details: Sequence[str] = ()) -> Path:
    """Write the report to `path` (folders created) and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    charts = [allocation_chart(sweep), wait_cdf_chart(sweep), quota_slowdown_chart(sweep)]
    parts = [
        pio.to_html(chart, include_plotlyjs=(i == 0), full_html=False, config={"displaylogo": False})
        for i, chart in enumerate(charts)
    ]
    summary = "<h2>Across scales</h2>" + sweep_table(sweep) if len(sweep) > 1 else ""
    tables = []
    for scaled in sweep:
        tables.append(f"<h2>Scale {scaled.scale:g}</h2>" + figure_table(scaled.figures))
        tables.append(f"<h3>By job size, scale {scaled.scale:g}</h3>" + size_table(scaled.figures))
        tables.append(f"<h3>By quota, scale {scaled.scale:g}</h3>" + quota_table(scaled.figures))
    page = _PAGE.format(
        title=html.escape(title),
        details="".join(f"<li>{html.escape(line)}</li>" for line in details),
        summary=summary,
        tables="\n".join(tables),
        charts="\n".join(f'<div class="chart">{part}</div>' for part in parts),
    )
    path.write_text(page, encoding="utf-8")
    return path


def _stats(stats: Mapping, unit: Callable[[float | None], str] = duration) -> str:
    if not stats["n"]:
        return "–"
    return " / ".join(unit(stats[key]) for key in ("mean", "median", "p95", "p99", "max"))


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def _hours(f: dict) -> str:
    h = f["gpu_hours"]
    return (
        f"{h['useful']:,.0f} / {h['redone']:,.1f} / {h['checkpoint']:,.0f} / {h['restart']:,.1f} / {h['grace']:,.1f}"
    )


FIGURE_ROWS: tuple[tuple[str, Render], ...] = (
    ("GPUs", lambda f: f"{f['gpus']:,}"),
    ("jobs (refused / never started)", lambda f: f"{f['jobs']:,} ({f['rejected']} / {f['never_started']})"),
    ("allocation: useful (held)", lambda f: f"{100 * f['allocation_rate']:.2f} % ({100 * f['held_rate']:.2f} %)"),
    ("GPU-h useful / redone / ckpt / restart / grace", _hours),
    ("wait, all: mean / p50 / p95 / p99 / max", lambda f: _stats(f["wait_s"]["all"])),
    ("wait, fits quota: mean / p50 / p95 / p99 / max", lambda f: _stats(f["wait_s"]["fits_quota"])),
    ("wait, own quota: mean / p50 / p95 / p99 / max", lambda f: _stats(f["wait_s"]["own_quota"])),
    ("wait, idle: mean / p50 / p95 / p99 / max", lambda f: _stats(f["wait_s"]["idle"])),
    ("first-start wait (classic): mean / p50 / p95 / p99 / max", lambda f: _stats(f["first_wait_s"])),
    ("re-queued after preemption: n; mean / p50 / p95 / p99 / max",
     lambda f: f"{f['requeued_s']['n']:,}; {_stats(f['requeued_s'])}"),
    ("slowdown: mean / p50 / p95 / p99 / max", lambda f: _stats(f["slowdown"], _ratio)),
    *(
        (f"  {label} GPU (n): wait p50 / p95 / p99 / max",
         lambda f, label=label: f"({f['by_size'][label]['n']:,}) " + _percentiles(f["by_size"][label]["wait_s"]))
        for label, _, _ in SIZE_BUCKETS
    ),
    ("32+ vs 1 GPU p95 wait, per quota (met: at most 2x)", lambda f: "; ".join(
        f"{team} {duration(g['p95_32_s'])} vs {duration(g['p95_1_s'])} ({'met' if g['met'] else 'not met'})"
        for team, g in f["gang_starvation"].items()) or "–"),
    ("Jain's index of per-quota mean slowdown", lambda f: f"{f['jain_slowdown']:.4f}"),
    ("mean JCT", lambda f: duration(f["mean_jct_s"])),
    ("wait by priority: (n) mean / p95 / max", lambda f: "; ".join(
        f"{p}: ({w['n']:,}) " + " / ".join(duration(w[k]) for k in ("mean", "p95", "max"))
        for p, w in f["wait_by_priority_s"].items())),
    ("preemptions (jobs); of In Quota jobs; demotions",
     lambda f: f"{f['preemptions']:,} ({f['preempted_jobs']:,}); {f['in_quota_preemptions']:,}; {f['demotions']:,}"),
    (
        "GPU-h lost to preemption / held",
        lambda f: f"{f['gpu_hours_lost']:,.1f} / {f['gpu_hours_delivered']:,.0f} ({100 * f['lost_share']:.3f} %)",
    ),
    ("elastic jobs: shrinks (pods) / growths (pods); GPU-h the resizes cost (of it growths)",
     lambda f: f"{f['elastic_jobs']:,}: {f['shrinks']:,} ({f['pods_shrunk']:,}) / {f['growths']:,} ({f['pods_grown']:,}); "
     f"{f['gpu_hours_resize_lost']:,.1f} ({f['gpu_hours_growth_lost']:,.1f})" if f["elastic_share"] else "–"),
    ("reclaim latency: n; mean / p50 / p95 / p99 / max",
     lambda f: f"{f['reclaim_latency_s']['n']:,}; {_stats(f['reclaim_latency_s'])}"),
    ("replay wall time (engine)", lambda f: f"{f['wall_s']:.0f} s ({f['engine_s']:.0f} s, {f['engine_calls']:,} calls)"),
)


def _percentiles(stats: Mapping) -> str:
    if not stats["n"]:
        return "–"
    return " / ".join(duration(stats[key]) for key in ("median", "p95", "p99", "max"))


def _grid(head: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> str:
    cells = "".join(f"<th>{html.escape(name)}</th>" for name in head)
    body = "".join(
        f"<tr><th>{html.escape(label)}</th>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for label, row in rows
    )
    return f"<table><thead><tr><th></th>{cells}</tr></thead><tbody>{body}</tbody></table>"


def figure_table(figures: Mapping[str, dict]) -> str:
    return _grid(list(figures), [(label, [render(f) for f in figures.values()]) for label, render in FIGURE_ROWS])


def size_table(figures: Mapping[str, dict]) -> str:
    rows = []
    for label, _, _ in SIZE_BUCKETS:
        cells = []
        for f in figures.values():
            group = f["by_size"][label]
            cells.append(
                f"n {group['n']:,} ({group['never_started']} never started); wait p50/p95/p99/max "
                f"{_percentiles(group['wait_s'])}; slowdown p50/p95/p99/max "
                + (" / ".join(_ratio(group["slowdown"][k]) for k in ("median", "p95", "p99", "max"))
                   if group["n"] else "–")
            )
        rows.append((f"{label} GPU", cells))
    return _grid(list(figures), rows)


def quota_table(figures: Mapping[str, dict]) -> str:
    quotas = sorted({q for f in figures.values() for q in f["by_quota"]})
    rows = []
    for quota in quotas:
        cells = []
        for f in figures.values():
            q = f["by_quota"].get(quota)
            if not q:
                cells.append("–")
                continue
            cells.append(
                f"n {q['n']:,}; wait mean {duration(q['wait_s']['mean'])}, p95 {duration(q['wait_s']['p95'])}, "
                f"max {duration(q['wait_s']['max'])}; slowdown mean {_ratio(q['slowdown']['mean'])}; "
                f"redone {q['redone_gpu_h']:,.1f} GPU-h; {q['preemptions']:,} preemptions; p95 wait by size: "
                + ", ".join(f"{size} {duration(p95)}" for size, p95 in q["wait_p95_by_size_s"].items())
            )
        rows.append((quota, cells))
    return _grid(list(figures), rows)


SWEEP_COLUMNS: tuple[tuple[str, Render], ...] = (
    ("GPUs", lambda f: f"{f['gpus']:,}"),
    ("allocation (useful)", lambda f: f"{100 * f['allocation_rate']:.2f} %"),
    ("wait mean / p95 / p99 / max", lambda f: " / ".join(duration(f["wait_s"]["all"][k]) for k in ("mean", "p95", "p99", "max"))),
    ("32+ GPU wait p95", lambda f: duration(f["by_size"]["32+"]["wait_s"]["p95"])),
    ("slowdown mean / p95", lambda f: f"{_ratio(f['slowdown']['mean'])} / {_ratio(f['slowdown']['p95'])}"),
    ("Jain (quota slowdown)", lambda f: f"{f['jain_slowdown']:.4f}"),
    ("redone GPU-h", lambda f: f"{f['gpu_hours']['redone']:,.1f}"),
    ("preemptions", lambda f: f"{f['preemptions']:,}"),
    ("never started", lambda f: f"{f['never_started']:,}"),
)


def sweep_table(sweep: Sequence[Scaled]) -> str:
    rows = [
        (f"{scaled.scale:g} {policy}", [render(f) for _, render in SWEEP_COLUMNS])
        for scaled in sweep
        for policy, f in scaled.figures.items()
    ]
    return _grid([name for name, _ in SWEEP_COLUMNS], rows)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1300px; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; font-size: .9rem; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .3rem .6rem; text-align: right; }}
tbody th {{ text-align: left; font-weight: normal; color: #555; }}
.chart {{ margin: 1.5rem 0; }}
</style></head>
<body>
<h1>{title}</h1>
<ul>{details}</ul>
{summary}
{charts}
{tables}
</body></html>
"""
