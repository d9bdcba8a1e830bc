"""Time limits for replayed jobs (DESIGN §2d) and how good the start estimates were.

A trace gives each job's real run time but no limit, so `--limits` models what users would have asked:
- `none`: no limits (the default; the engine plans no estimates, as before);
- `exact`: the limit is the job's run time (a perfect user; the bound of what estimates can do);
- `x2`: twice the run time — Mu'alem & Feitelson's "f-model" with a fixed factor (A. W. Mu'alem and
  D. G. Feitelson, "Utilization, predictability, workloads, and user runtime estimates in scheduling the
  IBM SP2 with backfilling", IEEE TPDS 12(6), 2001, which scaled run times by a factor to model estimates);
- `round`: the run time rounded up to the next of a few round values users pick (15 min, 30 min, 1, 2, 4,
  8, 12 h, 1, 2, 3, 7 days; longer: the run time), after Tsafrir, Etsion and Feitelson's finding that
  user estimates are modal — a handful of round values cover most jobs, and the actual run time is often
  a small part of the estimate (D. Tsafrir, Y. Etsion, D. G. Feitelson, "Modeling user runtime
  estimates", JSSPP 2005, LNCS 3834).
The replay never stops a job at its limit: the limits only feed the plan (a run that resumes after a
preemption may need a little more than its limit; the plan then counts it as ending now).

`estimate_quality(outcomes)`: of the jobs that waited at least 10 min, the share whose first estimate
(made at the first cycle that saw the job pending) was within 25 % of its wait, or 15 min, of its real
first start; jobs with no estimate (unknown) count as misses; rough estimates (`engine/plan_rough.py`) are
counted apart as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .model import JobOutcome

if TYPE_CHECKING:
    from scheduler.engine.types import Decisions

    from .jobs import SimJob
    from .ledger import JobClass

LIMIT_MODELS = ("none", "exact", "x2", "round")
ROUND_LIMITS_S = tuple(float(s) for s in (900, 1800, 3600, 7200, 4 * 3600, 8 * 3600, 12 * 3600, 86400,
                                          2 * 86400, 3 * 86400, 7 * 86400))
LONG_WAIT_S = 600.0  # jobs that waited at least this long are judged
CLOSE_SHARE = 0.25  # an estimate within this share of the wait...
CLOSE_S = 900.0  # ...or this many seconds of the real start is a hit


def time_limit(model: str, run_s: float) -> float | None:
    """The limit a job with this real run time is given under `model` (None: no limit)."""
    if model == "none":
        return None
    run_s = max(run_s, 1.0)  # the engine takes limits above 0
    if model == "exact":
        return run_s
    if model == "x2":
        return 2 * run_s
    if model == "round":
        return next((limit for limit in ROUND_LIMITS_S if limit >= run_s), run_s)
    raise ValueError(f"unknown limits model {model!r} (use {', '.join(LIMIT_MODELS)})")


def estimate_quality(outcomes: Iterable[JobOutcome]) -> dict:
    judged = hits = unknown = rough = rough_hits = 0
    errors: list[float] = []
    for job in outcomes:
        if job.rejected or job.first_start_s is None or job.estimate_made_s is None:
            continue
        wait = job.first_start_s - job.submit_s
        if wait < LONG_WAIT_S:
            continue
        judged += 1
        if job.estimated_start_s is None:
            unknown += 1
            continue
        error = job.estimated_start_s - job.first_start_s
        errors.append(error)
        hit = abs(error) <= max(CLOSE_S, CLOSE_SHARE * wait)
        hits += hit
        rough += job.estimate_rough
        rough_hits += hit and job.estimate_rough
    errors.sort()
    return {
        "judged": judged,
        "within": hits,
        "within_share": round(hits / judged, 4) if judged else None,
        "unknown": unknown,
        "median_error_s": round(errors[len(errors) // 2], 1) if errors else None,
        "rough": rough,  # of the judged, how many had a rough first estimate, and how many of those were within
        "rough_within": rough_hits,
    }


def note_first_estimates(decisions: Decisions, by_name: Mapping[str, SimJob], now: float) -> None:
    """Each job's first estimate, made at the first cycle that saw it pending."""
    for name, estimate in decisions.estimates.items():
        out = by_name[name].out
        if out.estimate_made_s is None and out.first_start_s is None:
            out.estimate_made_s, out.estimated_start_s, out.estimate_rough = now, estimate.start, estimate.rough


def estimate_heads(classes: Iterable[JobClass], quota_pool: Mapping[str, str], depth: int) -> list[int]:
    """The job indexes of the first `depth` pending jobs of each pool in pending order: the ones the engine
    plans, which go into a replay's snapshot even when pruning would leave them out. They can change
    decisions under the starvation guard (a long-waiting job among them may get a drain set that pruning's
    bound would not have given): docs/simulator.md measures by how much."""
    heads: dict[str, list[tuple[int, float, str, int]]] = {}
    for cls in classes:
        heads.setdefault(quota_pool[cls.quota], []).extend(
            (-cls.priority, t, name, index) for t, name, index in cls.queue[:depth])
    chosen: list[int] = []
    for entries in heads.values():
        entries.sort()
        chosen.extend(index for *_, index in entries[:depth])
    return chosen
