"""Reads, with the permission rules in one place: pages, the API and websocket consumers all call these.

- `access`: whose workspaces, jobs and quotas a user may see (the one permission rule);
- `jobs`: the job list with filters and sorts, a job's detail;
- `cluster`: quotas and their use, nodes and GPUs, allocation history, dashboard figures.
"""

from scheduler.selectors.access import (
    job_for_user,
    user_can_use_workspace,
    user_quotas,
    user_workspaces,
    visible_jobs,
)
from scheduler.selectors.cluster import (
    AllocationRow,
    DashboardSummary,
    GpuCell,
    NodeGrid,
    QuotaChoice,
    QuotaUsage,
    allocation_by_quota,
    cluster_fingerprint,
    dashboard_summary,
    gpu_models_by_pool,
    job_status_counts,
    node_grid,
    pool_allocation_series,
    preemption_costs,
    preemption_times,
    queue_waits,
    quota_allocation_series,
    quota_choices,
    quota_tree,
    workspaces_overview,
)
from scheduler.selectors.jobs import (
    DEFAULT_JOB_SORT,
    JOB_SORTS,
    STATUS_GROUPS,
    JobFilters,
    job_detail,
    job_list,
    submitted_job_detail,
    with_row_data,
)

__all__ = [
    "DEFAULT_JOB_SORT", "JOB_SORTS", "STATUS_GROUPS", "AllocationRow", "DashboardSummary", "GpuCell", "JobFilters",
    "NodeGrid", "QuotaChoice", "QuotaUsage", "allocation_by_quota", "cluster_fingerprint", "dashboard_summary",
    "gpu_models_by_pool", "job_detail", "job_for_user", "job_list", "job_status_counts", "node_grid",
    "pool_allocation_series", "preemption_costs", "preemption_times", "quota_allocation_series", "quota_choices", "quota_tree",
    "queue_waits", "submitted_job_detail", "user_can_use_workspace", "user_quotas", "user_workspaces", "visible_jobs", "with_row_data",
    "workspaces_overview",
]
