"""Where a job's files live: one home for every path derived from a Job or Pod row.

Everything is keyed by the job's `uid` (a UUID never reused, even after a database reset), never
by its id, so a new job can never resume from, or append to the log of, an older one.

| what | where | root (created by the worker; below it 0700, the pod's user) |
|---|---|---|
| pod log, progress, exit files | `<data>/pods/<uid>/attempt-<n>/` | `<data>/pods` |
| default working directory (a job without code_mount) | `<data>/pods/<uid>/work` | `<data>/pods` |
| default checkpoint directory | `<checkpoint root>/<uid>` | TIDEPOOL_CHECKPOINT_ROOT |
| a job's own checkpoint_dir / code_mount / data_mount | inside `<workspace root>/<workspace>/` | TIDEPOOL_WORKSPACE_ROOT |

`<data>` is TIDEPOOL_DATA_DIR; the checkpoint root defaults to `<data>/checkpoints` and the
workspace root to `<data>/workspaces`. On the embedded default the default working directory also
holds `examples`, a link to the checkout's examples/ (scheduler/node/workplace.py), so the README's
`python examples/train_linear.py` runs there as it does in the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from scheduler.models import Job, Pod

USER_PATH_FIELDS = ("checkpoint_dir", "code_mount", "data_mount")


def data_dir() -> Path:
    return Path(settings.TIDEPOOL_DATA_DIR)


def pods_root() -> Path:
    return data_dir() / "pods"


def checkpoint_root() -> Path:
    return Path(settings.TIDEPOOL_CHECKPOINT_ROOT or data_dir() / "checkpoints")


def workspace_root() -> Path:
    return Path(settings.TIDEPOOL_WORKSPACE_ROOT or data_dir() / "workspaces")


def workspace_data_root(workspace_name: str) -> Path:
    """The only place a job of this workspace may name for its own directories."""
    return workspace_root() / workspace_name


def job_dir(job: Job) -> Path:
    return pods_root() / str(job.uid)


def pod_dir(job: Job, attempt: int) -> Path:
    return job_dir(job) / f"attempt-{attempt}"


def _pod_file(pod: Pod, name: str) -> Path:
    return pod_dir(pod.job, pod.attempt) / name


def pod_log_path(pod: Pod) -> Path:
    return _pod_file(pod, f"{pod.role}-{pod.index}.log")


def pod_progress_path(pod: Pod) -> Path:
    return _pod_file(pod, f"progress-{pod.rank}.json")


def pod_exit_path(pod: Pod) -> Path:
    """Written by the pod's shell when its command ends (its exit status)."""
    return _pod_file(pod, f"{pod.role}-{pod.index}.exit")


def default_checkpoint_dir(job: Job) -> Path:
    return checkpoint_root() / str(job.uid)


def default_workdir(job: Job) -> Path:
    return job_dir(job) / "work"


def is_inside(path: str | Path, root: str | Path) -> bool:
    """`path` is `root` or below it, after normalising `..` (no filesystem access)."""
    path, root = os.path.normpath(os.path.abspath(path)), os.path.normpath(os.path.abspath(root))
    return path == root or path.startswith(root + os.sep)


def clean_user_path(value: str, *, workspace_name: str, field: str) -> str:
    """A path a user gave (checkpoint_dir, code_mount, data_mount), normalised; '' stays ''.

    Relative paths are taken from the workspace's data root; any path that ends up outside it
    is refused with a ValidationError naming the field and saying where the directory must be (a
    checkout elsewhere, the usual first try for code_mount, is refused too: it would hand the pod
    whatever else lies there).
    """
    value = (value or "").strip()
    if not value:
        return ""
    root = workspace_data_root(workspace_name)
    if "\0" in value:
        raise ValidationError({field: f"{field} cannot contain a NUL character."})
    path = os.path.normpath(value if os.path.isabs(value) else os.path.join(root, value))
    if not is_inside(path, root) or path == os.path.normpath(root):
        how = (f" Copy or clone your code into a directory there (e.g. {root}/my-project, or just my-project) "
               f"and name that; without code_mount the command runs in a new directory of the job (on the "
               f"embedded default it holds examples/)." if field == "code_mount" else "")
        raise ValidationError(
            {field: f"{field} must be a directory inside the workspace's data root {root}/ (got {value!r}).{how}"}
        )
    return path


def root_of(job: Job, path: str) -> Path:
    """The operator root a job directory lies under; OSError when it lies under none (refused)."""
    for root in (pods_root(), checkpoint_root(), workspace_data_root(job.workspace.name)):
        if is_inside(path, root):
            return root
    raise OSError(f"{path} is outside the data roots this job may use")


def pod_user_name(job: Job) -> str:
    """TIDEPOOL_POD_USER with `{workspace}` replaced by the job's workspace ('' = the worker's user)."""
    return settings.TIDEPOOL_POD_USER.replace("{workspace}", job.workspace.name)
