"""The OpenAPI schema's field descriptions and hooks (settings.SPECTACULAR_SETTINGS).

The serializers (scheduler.api.v1.serializers) carry no help texts; the descriptions of every
component's properties live here instead, keyed by component then property (COMMON: names shared by
several). `describe_fields` fills them in; tests/api/test_api_v1_schema.py fails on any property
left without one and on any difference from the committed docs/openapi.yaml.
"""

from __future__ import annotations

from typing import Any

COMMON = {
    "id": "Unique id.",
    "name": "Name: lowercase letters, digits and dashes.",
    "status": "Current state (docs/console.md lists them).",
    "time": "When it happened (ISO 8601, UTC).",
    "reason": "Why, in words a person can act on.",
    "description": "Free text.",
    "resource_type": "The resource pool: `general` or `lingjun`.",
    "gpu_type": "GPU model (e.g. `A100`); empty: any model.",
    "gpus": "GPUs per pod.",
    "cpu": "CPU cores per pod.",
    "memory_gib": "Memory per pod, GiB.",
    "shared_memory_gib": "Shared memory (/dev/shm) per pod, GiB.",
    "pod_count": "Number of pods of the role (an elastic role's maximum).",
    "min_pod_count": "Elastic role (DESIGN §2c): its minimum pods; null: exactly pod_count. Needs idle_mode "
                     "acceptable or only.",
    "shrink_count": "Times extra pods of this elastic job were reclaimed while it kept running (not preemptions).",
    "grow_count": "Times this elastic job grew onto idle resources.",
    "resized_at": "Its last shrink or growth in this attempt (null: none).",
    "attempt": "Admission number: increments each time the job is admitted; pods carry theirs.",
    "started_at": "When it started running (null: not yet).",
    "finished_at": "When it finished (null: not yet).",
    "node": "Node name (null: not placed).",
    "workspaces": "Names of workspaces.",
    "preemption_count": "Times it was preempted (reclaim, priority, drain, shutdown); never uses a restart.",
    "resumes_automatically": "Preempted and queued again: it resumes from its checkpoint when it runs again.",
    "gpu_hours": "GPU-hours used by every attempt so far.",
    "cpu_only": "A CPU-only role: no GPUs (otherwise at least 1 GPU per pod).",
}

DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Job": {
        "in_quota": "How the current attempt was admitted: true In Quota, false Not in Quota (idle resources); "
                    "null while waiting or once finished.",
        "workspace": "The workspace it belongs to.",
        "quota": "The quota it was submitted to.",
        "owner": "Who submitted it (null: the system).",
        "job_type": "Framework: pytorch, tensorflow, mpi, xgboost, ray or custom.",
        "priority": "1–9, higher first.",
        "idle_mode": "`off` quota only; `acceptable` quota first, idle resources when full; `only` idle resources only.",
        "gpus": "GPUs of all pods together.",
        "gpu_type": "The GPU model it runs on (empty before admission).",
        "nodes": "Nodes of the current attempt's pods.",
        "fault_tolerance": "Restart automatically after a preemption or failure.",
        "restart_count": "Automatic restarts after failures so far (preemptions are not counted).",
        "max_restarts": "Automatic restarts allowed after failures.",
        "queue_position": "Place in its pool's queue while pending (1 = next).",
        "estimated_start_at": "While pending: the earliest start the scheduler's plan finds from the time limits "
                              "of the jobs ahead (DESIGN §2d); null when unknown (see start_estimate).",
        "start_estimate": "The estimate as members read it: 'starts in about 2 h 10 min', 'starts in about 3 d 4 h "
                          "(rough)' (planned on the pool's total capacity, for a job far back in the queue), "
                          "'unknown: depends on jobs with no time limit', 'unknown: far back in the queue'; empty "
                          "when not pending.",
        "time_limit_note": "A running job near its maximum running time: 'time limit in 4 min'; else empty.",
        "waiting_reason": "Why it waits, or why it ended.",
        "waiting_reason_code": "The kind of the scheduler's waiting reason: quota_full, max_reached, no_capacity, "
                               "no_idle_capacity, quota_and_idle, waiting_for_victims, never_fits, any_model, "
                               "unknown_quota, reclaimed (docs/scheduling.md); empty for other reasons.",
        "created_at": "When it was submitted.",
        "queue_time": "Queue time: the first submission, kept across automatic restarts.",
    },
    "JobDetail": {
        "preemptions": "Each preemption with the work it lost, oldest first.",
        "image": "Container image (informational with the local executor).",
        "command": "Shell command each pod runs.",
        "environment": "Extra environment variables of the pods.",
        "data_mount": "Data path mounted into pods.",
        "code_mount": "Code path mounted into pods.",
        "max_running_minutes": "Stopped after this long running (null: no limit).",
        "checkpoint_dir": "Directory the checkpoint helper saves to and resumes from.",
        "progress": "The checkpoint helper's latest report ({} before one).",
        "roles": "Roles with pod counts and per-pod resources.",
        "pods": "Pods of every attempt, newest attempt first.",
        "events": "The timeline, oldest first.",
    },
    "Progress": {
        "step": "Training step reached.",
        "last_checkpoint_step": "Step of the latest checkpoint.",
        "last_checkpoint_at": "Time of the latest checkpoint, seconds since the epoch.",
        "resumed_from_step": "Step this attempt resumed from.",
        "attempt": "The attempt that reported.",
    },
    "Pod": {
        "role": "Its role's name.",
        "index": "Index within the role.",
        "rank": "RANK given to the process (0 is the master).",
        "gpu_indices": "GPU indices on its node (CUDA_VISIBLE_DEVICES).",
        "exit_code": "Exit status of its process (null: still running or never started).",
    },
    "Preemption": {
        "kind": "reclaim, priority, drain or shutdown.",
        "ran_gpu_seconds": "GPU time the attempt ran until it was preempted.",
        "lost_steps": "Steps since the attempt's last checkpoint (null: no progress reported).",
        "lost_gpu_seconds": "GPU time since the attempt's last checkpoint (null: pods still exiting).",
        "step": "Step the attempt had reached.",
        "checkpoint_step": "Step of the attempt's last checkpoint.",
    },
    "Event": {
        "kind": "Kind: submitted, queued, admitted, running, preempted, restarting, stopped, …",
        "code": "The reason's kind where the scheduler gave one (as Job.waiting_reason_code), else empty.",
    },
    "JobSubmitRequest": {
        "grace_seconds": "Seconds between SIGTERM and SIGKILL at a preemption or stop, 0–3600 (null: the cluster default).",
        "workspace": "Workspace name or id (one the caller is a member of).",
        "quota": "Quota name or id (associated with the workspace).",
        "command": "Shell command each pod runs.",
        "roles": "Roles (at least one): pod count and per-pod resources.",
        "job_type": "Framework: pytorch, tensorflow, mpi, xgboost, ray or custom.",
        "image": "Container image (informational with the local executor).",
        "environment": "Extra environment variables (NAME: value).",
        "data_mount": "Data path mounted into pods.",
        "code_mount": "Code path mounted into pods.",
        "priority": "1–9, higher first (default 1).",
        "idle_mode": "`off` (default), `acceptable` or `only`.",
        "max_running_minutes": "Stop after this long running (null: no limit).",
        "fault_tolerance": "Restart automatically after a preemption or failure.",
        "max_restarts": "Automatic restarts allowed after failures (default 3).",
        "checkpoint_dir": "Checkpoint directory (empty: one per job under the data directory).",
    },
    "RoleInputRequest": {"name": "Role name (default `worker`)."},
    "CloneRequest": {"name": "Name of the copy (default: `<name>-clone`)."},
    "Quota": {
        "parent": "Parent quota's name (null: a root, whose min is the pool's capacity).",
        "depth": "Depth in the tree (0: root).",
        "min_gpus": "Guaranteed GPUs per model.",
        "min_cpu": "Guaranteed CPU cores.",
        "min_memory_gib": "Guaranteed memory, GiB.",
        "max_gpus": "Ceiling on GPUs per model (null: none).",
        "max_cpu": "Ceiling on CPU cores (null: none).",
        "max_memory_gib": "Ceiling on memory, GiB (null: none).",
        "preempt_within": "Priority preemption inside the quota (DESIGN §2b): its guarantee goes to its own "
                          "highest-priority jobs, lower-priority ones moved to idle resources first (default false).",
        "workspaces": "Workspaces whose members may submit to it.",
        "usage": "GPU use of the quota's whole subtree.",
    },
    "QuotaUsage": {
        "min_gpus": "Guaranteed GPUs, all models.",
        "in_quota_gpus": "GPUs held In Quota.",
        "free_gpus": "Guaranteed GPUs not used In Quota.",
        "lent_gpus": "Estimate of others' Not in Quota GPUs on this unused guarantee.",
        "borrowed_gpus": "GPUs its jobs hold Not in Quota (on idle resources).",
        "running_jobs": "Running jobs.",
        "pending_jobs": "Pending jobs (Creating, Queuing, Restarting).",
    },
    "Node": {
        "gpu_type": "GPU model of its GPUs.",
        "gpu_count": "GPUs it has.",
        "cpu": "CPU cores.",
        "memory_gib": "Memory, GiB.",
        "schedulable": "false: cordoned, nothing new is placed there.",
        "draining": "Being drained: its jobs are preempted and restarted elsewhere.",
        "lost": "Stopped heartbeating; its pods failed.",
        "last_heartbeat": "Last heartbeat of its worker (null: never).",
        "gpus_used": "GPUs held by pods.",
        "gpus": "Each GPU with the job on it.",
    },
    "GpuCell": {
        "index": "GPU index on the node.",
        "job_id": "The job on it (null: free, or a job the caller may not see).",
        "job_name": "The job's name (null: free, or a job the caller may not see).",
        "used": "A pod holds it.",
        "in_quota": "Whether the job on it runs In Quota (null: free).",
    },
    "Workspace": {"quotas": "Names of the quotas its members may submit to."},
    "Log": {
        "pod": "The pod shown (null: the job has no pod yet).",
        "text": "Log text: the tail, or what was appended since `offset`.",
        "offset": "Byte offset to send back as `offset` (with `shown`) to get what follows.",
        "reset": "true: replace what you show (a tail, or the log was truncated).",
    },
    "LogPod": {"label": "`<role>-<index>`.", "rank": "RANK of the pod.", "status": "Pod state."},
    "GpuSample": {
        "pod_id": "The pod holding the GPU.",
        "gpu_index": "GPU index on the pod's node.",
        "utilization_percent": "NVML GPU utilisation over the last sample period, %.",
        "memory_used_mib": "GPU memory in use, MiB.",
        "memory_total_mib": "GPU memory, MiB.",
    },
    "Pool": {
        "nodes": "Nodes of the pool.",
        "gpus": "GPUs of its nodes.",
        "idle_share": "`fifo`: idle capacity in pending order (the default); `fair`: the highest priority, then "
                      "the quota borrowing least for its guarantee.",
        "min_runtime_s": "A job on idle resources is no reclaim candidate before it has run this long (0: off).",
        "starvation_s": "A job waiting longer than this gets nodes kept for it as they empty (0: off).",
        "starvation_hold": "Extends the starvation guard (only with `starvation_s` above 0): a starving job also "
                           "holds the guarantee its quota frees for it, and the first job of each quota blocked "
                           "only by the quota's own use counts as starving.",
        "starved_min_runtime_s": "Extends the starvation guard (only with `starvation_s` above 0): a job that "
                                 "starts on idle resources after waiting longer than `starvation_s` is no "
                                 "reclaim candidate before it has run this long (0: off).",
        "default_time_limit_s": "DESIGN §2d: the time limit of jobs that set no maximum running time; they are "
                                "stopped past it and start estimates count on it (0: none).",
        "grow_interval_s": "DESIGN §2c: an elastic job grows into idle capacity at most this often after its "
                           "start or last resize (every resize restarts its workers from their checkpoint); "
                           "0: every cycle.",
    },
    "Me": {
        "username": "The user the credentials belong to.",
        "is_staff": "Staff see every workspace.",
        "workspaces": "The user's workspaces.",
        "authenticated_by": "`token` or `session`.",
    },
    "Error": {"detail": "What went wrong."},
    "PaginatedJobList": {
        "count": "Jobs matching, on all pages.",
        "next": "URL of the next page (null: last page).",
        "previous": "URL of the previous page (null: first page).",
        "results": "This page's jobs.",
    },
}


def only_v1(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """Preprocessing hook: the schema covers /api/v1/ (not /api/, nor the schema views themselves)."""
    skip = ("/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/")
    return [e for e in endpoints if e[0].startswith("/api/v1/") and not e[0].startswith(skip)]


def describe_fields(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: every component property gets its description (left empty if unknown)."""
    for component, schema in result.get("components", {}).get("schemas", {}).items():
        docs = DESCRIPTIONS.get(component, {})
        if component.endswith("Request") and component not in DESCRIPTIONS:
            docs = DESCRIPTIONS.get(component.removesuffix("Request"), {})
        for prop, body in schema.get("properties", {}).items():
            text = docs.get(prop) or COMMON.get(prop)
            if text and not body.get("description"):
                body["description"] = text
    return result


DESCRIPTIONS["JobDetail"] = {**DESCRIPTIONS["Job"], **DESCRIPTIONS["JobDetail"]}
