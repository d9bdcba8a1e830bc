"""Prometheus metrics (docs/metrics.md): scraped at /metrics.

- `cycle`: the scheduler cycle's duration by phase, observed in the process that runs the loop;
- `collector`: everything else, computed from the database at scrape time, so counters survive
  restarts and agree across processes.
"""
