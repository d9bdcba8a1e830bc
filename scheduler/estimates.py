"""How a start estimate and a time limit read (DESIGN §2d), written once for the console, the API and the
CLI (which shows the API's text): "starts in about 2 h 10 min", "starts in about 3 d 4 h (rough)",
"unknown: depends on jobs with no time limit", "time limit in 4 min". No Django here."""

from __future__ import annotations

from datetime import datetime

from scheduler.engine.types import ESTIMATE_ROUGH, UNKNOWN_TEXT

# A running job shows its time limit once this little is left (or less than a tenth of the limit).
LIMIT_NEAR_S = 15 * 60


def span_text(seconds: float) -> str:
    """`4 min`, `2 h 10 min`, `3 d 4 h`: rounded to the minute, two units at most."""
    minutes = max(1, round(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    return f"{minutes} min"


def estimate_text(start: datetime | None, unknown: str, now: datetime) -> str:
    """A pending job's estimate as members read it; "" when the scheduler has given none yet. `unknown` is
    why there is no time, or, beside a time, ESTIMATE_ROUGH for a rough one (planned on the pool's
    aggregate capacity: "starts in about 5 h (rough)")."""
    if start is None:
        return UNKNOWN_TEXT.get(unknown, "") if unknown else ""
    left = (start - now).total_seconds()
    rough = " (rough)" if unknown == ESTIMATE_ROUGH else ""
    if left < 60:
        return f"could start now{rough}"
    return f"starts in about {span_text(left)}{rough}"


def time_limit_note(started: datetime | None, limit_s: float | None, now: datetime) -> str:
    """"time limit in 4 min" for a running job near its limit (within LIMIT_NEAR_S or a tenth of it); ""."""
    if started is None or not limit_s:
        return ""
    left = (started.timestamp() + limit_s) - now.timestamp()
    if left > max(LIMIT_NEAR_S, limit_s / 10):
        return ""
    return "time limit reached" if left <= 0 else f"time limit in {span_text(left)}"
