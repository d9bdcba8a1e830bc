"""A job as the submission that would create it again: what clone, "Copy as YAML" and
`tidepool submit -f` share (the same keys as POST /api/v1/jobs/)."""

from __future__ import annotations

import shlex
from decimal import Decimal
from typing import Any

from scheduler.models import Job


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def job_submission(job: Job) -> dict[str, Any]:
    """The submission body for `job` (its roles in order); ids are replaced by names."""
    return {
        "name": job.name,
        "workspace": job.workspace.name,
        "quota": job.quota.name,
        "command": job.command,
        "roles": [
            {
                "name": role.name,
                "pod_count": role.pod_count,
                "gpu_type": role.gpu_type,
                "gpus": role.gpus,
                "cpu": _number(role.cpu),
                "memory_gib": _number(role.memory_gib),
                "shared_memory_gib": _number(role.shared_memory_gib),
            }
            for role in job.roles.all()
        ],
        "job_type": job.job_type,
        "image": job.image,
        "environment": dict(job.environment or {}),
        "data_mount": job.data_mount,
        "code_mount": job.code_mount,
        "priority": job.priority,
        "idle_mode": job.idle_mode,
        "max_running_minutes": job.max_running_minutes,
        "fault_tolerance": job.fault_tolerance,
        "max_restarts": job.max_restarts,
    }


def job_cli_command(job: Job) -> str:
    """A `tidepool submit` command line that submits `job` again (single-role jobs: flags; else -f)."""
    body = job_submission(job)
    roles = body["roles"]
    if len(roles) != 1:
        return "tidepool submit -f job.yaml   # save the YAML below as job.yaml"
    role = roles[0]
    words = [
        "tidepool", "submit", "--name", body["name"], "--workspace", body["workspace"], "--quota", body["quota"],
        "--pods", str(role["pod_count"]), "--gpus", str(role["gpus"]), "--cpu", str(role["cpu"]),
        "--memory-gib", str(role["memory_gib"]), "--priority", str(body["priority"]),
        "--idle-mode", body["idle_mode"],
    ]
    if role["gpu_type"]:
        words += ["--gpu-type", role["gpu_type"]]
    if role["name"] != "worker":
        words += ["--role", role["name"]]
    if body["fault_tolerance"]:
        words += ["--fault-tolerance", "--max-restarts", str(body["max_restarts"])]
    if body["image"]:
        words += ["--image", body["image"]]
    for key, value in sorted(body["environment"].items()):
        words += ["--env", f"{key}={value}"]
    words += ["--", body["command"]]
    return " ".join(shlex.quote(word) for word in words)
