"""The scrape: a prometheus_client Collector that reads the database each time /metrics is asked.

Gauges (now): GPUs per pool and quota by use, pending jobs, node GPUs free / allocated / unhealthy.
Counters and the queue-wait histogram: from the job event timelines (`scheduler.selectors.metrics`),
so they never reset with a process. Names and meanings: docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from scheduler.selectors.cluster import quota_tree
from scheduler.selectors.metrics import job_history, node_gpus


class TidepoolCollector(Collector):
    def collect(self) -> Iterator:
        yield from self._quotas()
        yield from self._history()
        yield from self._nodes()

    def describe(self) -> list:
        return []  # computed at scrape time: nothing to check at registration

    @staticmethod
    def _quotas() -> Iterator:
        labels = ["pool", "quota"]
        minimum = GaugeMetricFamily("tidepool_quota_min_gpus", "GPUs guaranteed to the quota (min, all models).",
                                    labels=labels)
        in_quota = GaugeMetricFamily(
            "tidepool_quota_in_quota_gpus", "GPUs held In Quota by the quota's jobs (its subtree).", labels=labels
        )
        not_in_quota = GaugeMetricFamily(
            "tidepool_quota_not_in_quota_gpus",
            "GPUs held Not in Quota (on idle resources) by the quota's jobs (its subtree): what it borrows.",
            labels=labels,
        )
        lent = GaugeMetricFamily(
            "tidepool_quota_lent_gpus",
            "Others' Not in Quota GPUs running on the quota's unused guarantee (an estimate, docs/console.md).",
            labels=labels,
        )
        pending = GaugeMetricFamily("tidepool_quota_pending_jobs", "Pending jobs of the quota (its subtree).",
                                    labels=labels)
        running = GaugeMetricFamily("tidepool_quota_running_jobs", "Running jobs of the quota (its subtree).",
                                    labels=labels)
        pools: dict[str, list[int]] = {}
        for usage in quota_tree():
            key = [usage.quota.resource_type, usage.quota.name]
            minimum.add_metric(key, usage.min_gpus)
            in_quota.add_metric(key, usage.in_quota)
            not_in_quota.add_metric(key, usage.borrowed)
            lent.add_metric(key, usage.lent)
            pending.add_metric(key, usage.pending_jobs)
            running.add_metric(key, usage.running_jobs)
            if usage.depth == 0:
                totals = pools.setdefault(usage.quota.resource_type, [0, 0, 0])
                totals[0] += usage.in_quota
                totals[1] += usage.borrowed
                totals[2] += usage.pending_jobs
        pool_gpus = GaugeMetricFamily("tidepool_pool_gpus", "GPUs of a pool held by jobs, In Quota or Not in Quota.",
                                      labels=["pool", "use"])
        pool_pending = GaugeMetricFamily("tidepool_pool_pending_jobs", "Pending jobs of a pool.", labels=["pool"])
        for pool, (used_in, used_out, waiting) in sorted(pools.items()):
            pool_gpus.add_metric([pool, "in_quota"], used_in)
            pool_gpus.add_metric([pool, "not_in_quota"], used_out)
            pool_pending.add_metric([pool], waiting)
        yield from (minimum, in_quota, not_in_quota, lent, pending, running, pool_gpus, pool_pending)

    @staticmethod
    def _history() -> Iterator:
        history = job_history()
        wait = HistogramMetricFamily(
            "tidepool_queue_wait_seconds", "Seconds from queuing to admission, per admission.",
            labels=["pool", "quota"],
        )
        for (pool, quota), histogram in sorted(history.queue_wait.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*histogram.buckets, float("inf")), histogram.counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", cumulative))
            wait.add_metric([pool, quota], buckets, histogram.total)
        labels = ["pool", "quota", "reason"]
        preemptions = CounterMetricFamily(
            "tidepool_preemptions", "Jobs preempted, by cause (reclaim, priority, drain, shutdown, other).",
            labels=labels,
        )
        for key, count in sorted(history.preemptions.items()):
            preemptions.add_metric(list(key), count)
        lost = CounterMetricFamily(
            "tidepool_work_lost_gpu_seconds",
            "GPU time lost to preemptions: since the preempted attempt's last checkpoint (docs/metrics.md).",
            labels=labels,
        )
        for key, seconds in sorted(history.work_lost.items()):
            lost.add_metric(list(key), seconds)
        restarts = CounterMetricFamily(
            "tidepool_restarts", "Automatic restarts, by what ended the attempt before.", labels=labels
        )
        for key, count in sorted(history.restarts.items()):
            restarts.add_metric(list(key), count)
        yield from (wait, preemptions, lost, restarts)

    @staticmethod
    def _nodes() -> Iterator:
        gpus = GaugeMetricFamily("tidepool_node_gpus", "A node's GPUs by state: free, allocated, unhealthy (node lost).",
                                 labels=["node", "pool", "gpu_type", "state"])
        schedulable = GaugeMetricFamily("tidepool_node_schedulable",
                                        "1 when new pods may be placed on the node (not cordoned, draining or lost).",
                                        labels=["node", "pool"])
        for node in node_gpus():
            for state, value in (("free", node.free), ("allocated", node.allocated), ("unhealthy", node.unhealthy)):
                gpus.add_metric([node.name, node.pool, node.gpu_type, state], value)
            schedulable.add_metric([node.name, node.pool], 1 if node.schedulable else 0)
        yield from (gpus, schedulable)
