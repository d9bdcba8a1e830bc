"""The scheduler cycle's duration by phase: a histogram in the process that runs the loop.

`scheduler/loop/cycle.py` times its phases with a `PhaseClock` and calls `cycle_observed` once per
cycle. The embedded scheduler runs inside the console, so /metrics serves it; a separate
`run_scheduler` process serves it on TIDEPOOL_SCHEDULER_METRICS_PORT (docs/metrics.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Histogram

CYCLE_REGISTRY = CollectorRegistry(auto_describe=True)
PHASES = ("housekeeping", "snapshot", "engine", "apply", "commit")
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

CYCLE_SECONDS = Histogram(
    "tidepool_scheduler_cycle_phase_seconds",
    "Duration of one phase of a scheduling cycle (housekeeping, snapshot, engine, apply, commit).",
    ["phase"],
    buckets=BUCKETS,
    registry=CYCLE_REGISTRY,
)


class PhaseClock:
    """Laps of one cycle: `lap("engine")` ends the phase named and starts the next."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._last
        self._last = now


def cycle_observed(phase_seconds: Mapping[str, float]) -> None:
    """Record one cycle's phase durations (seconds)."""
    for phase, seconds in phase_seconds.items():
        CYCLE_SECONDS.labels(phase=phase).observe(seconds)
