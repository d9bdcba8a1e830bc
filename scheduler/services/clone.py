"""Clone a job: submit its settings again as a new job (through job_submit, so every rule applies)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from scheduler.models import Job
from scheduler.selectors.submission import job_submission
from scheduler.services.jobs import job_submit


def clone_name(name: str) -> str:
    base = name[: 100 - len("-clone")].rstrip("-")
    return f"{base}-clone"


def job_clone(*, job: Job, user: AbstractBaseUser, name: str | None = None) -> Job:
    """A new job with `job`'s settings, submitted by `user` (who must be able to use its workspace)."""
    body = job_submission(job)
    body.pop("workspace")
    body.pop("quota")
    body["name"] = name if name is not None else clone_name(job.name)
    return job_submit(user=user, workspace=job.workspace, quota=job.quota, **body)
