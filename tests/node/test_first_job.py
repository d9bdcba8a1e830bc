"""A newcomer's first job on the embedded default (issue 25): `python examples/train_linear.py` runs
in the job's own directory, and a command that cannot find its file fails with a reason that says
where it ran and how to give it code. Real pod processes through the local executor."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Workspace
from scheduler.node.exit_hints import REASON_MAX, WorkPlace, exit_hint
from scheduler.node.local import LocalExecutor
from scheduler.paths import default_workdir, workspace_data_root
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PLACE = WorkPlace(workdir="/d/pods/u/work", own_code=False, code_root="/d/workspaces/vision", examples=True)


@pytest.mark.parametrize(("code", "log", "says"), [
    (2, "/usr/bin/python3: can't open file '/d/pods/u/work/train.py': [Errno 2] No such file or directory\n",
     "train.py is not in the job's working directory /d/pods/u/work (new and empty): use an absolute path, or "
     "copy your code under /d/workspaces/vision/ and set that directory as code_mount; examples/ is there"),
    (127, "/bin/sh: 2: python: not found\n", "python is not a program on the pod's PATH (try python3): name"),
    (127, "sh: line 1: trainer: command not found\n", "trainer is not a program on the pod's PATH"),
    (127, "/bin/sh: 2: ./train.sh: not found\n", "./train.sh is not in the job's working directory /d/pods/u/work"),
    (126, "/bin/sh: 2: ./train.sh: Permission denied\n", "./train.sh is not executable: chmod +x it"),
    (2, "/bin/sh: 2: cd: can't cd to src\n", "cd src: that directory is not in the job's working directory"),
])
def test_the_hint_names_the_problem_where_it_ran_and_what_to_do(code, log, says) -> None:
    hint = exit_hint(code, "=== tidepool: pod 1 (job 1) attempt 1 ===\n" + log, PLACE)
    assert hint.startswith(says)
    assert len(f"exit code {code}: {hint}") <= REASON_MAX


def test_long_paths_are_shortened_to_fit_the_reason() -> None:
    deep = "/srv/" + "very-long-directory-name/" * 8
    place = WorkPlace(workdir=deep + "pods/3f6b2a6b-e398-404e-ae04-ba2683698638/work", own_code=False,
                      code_root=deep + "workspaces/vision", examples=True)
    hint = exit_hint(2, "python3: can't open file '/x/train.py': [Errno 2] No such file or directory", place)
    assert len(hint) <= REASON_MAX - 20 and not hint.endswith("…")
    assert "…/pods/3f6b2a6b-e398-404e-ae04-ba2683698638/work (new and empty)" in hint
    assert "copy your code under …/workspaces/vision/ and set that directory as code_mount" in hint


def test_no_hint_for_a_program_that_failed_by_itself() -> None:
    assert exit_hint(1, "Traceback (most recent call last):\nValueError: bad learning rate\n", PLACE) == ""
    assert exit_hint(2, "usage: train.py [-h] --steps N\ntrain.py: error: argument --steps\n", PLACE) == ""
    assert exit_hint(137, "/bin/sh: 2: x: not found\n", PLACE) == ""


@pytest.fixture
def demo_setup():
    executor = LocalExecutor()
    previous = set_executor(executor)
    node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, inventory_source="demo")
    user = get_user_model().objects.create_user("alice")
    vision = Workspace.objects.create(name="vision")
    vision.members.add(user)
    quota = quota_create(name="team-vision", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64,
                         workspaces=[vision])
    yield executor, {"user": user, "workspace": vision, "quota": quota}
    executor.shutdown(grace_s=1)
    set_executor(previous)
    assert not executor.agent.supervisor.running(), "a pod process was left running"


def run_to_the_end(fields: dict, name: str, command: str) -> Job:
    job = job_submit(**fields, name=name, command=command, roles=[{"name": "worker", "pod_count": 1, "gpus": 1}])
    schedule_once()

    def ended() -> Job | None:
        job.refresh_from_db()
        return job if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None

    return wait_for(ended, 60, f"job {name} to end")


@pytest.mark.django_db(transaction=True)
def test_the_readme_first_job_runs_and_a_missing_file_says_what_to_do(demo_setup, settings, monkeypatch) -> None:
    _executor, fields = demo_setup
    short = tempfile.mkdtemp(prefix="tp-")  # paths as short as bin/start's, so the reason shows them whole
    settings.TIDEPOOL_DATA_DIR = Path(short)
    # As a newcomer writes it from the README: a relative path and plain `python` (bin/start puts the
    # venv first on PATH, which pods inherit; here the test's interpreter stands in for it).
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    try:
        check_first_job(fields)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def check_first_job(fields: dict) -> None:
    job = run_to_the_end(fields, "first", f"{Path(sys.executable).name} examples/train_linear.py --steps 20 "
                         "--checkpoint-every 10")
    assert job.status == JobStatus.SUCCEEDED, job.waiting_reason
    assert (default_workdir(job) / "examples").resolve() == ROOT / "examples"

    job = run_to_the_end(fields, "typo", "python3 examples/train_lineer.py")
    assert job.status == JobStatus.FAILED
    workdir = default_workdir(job)
    assert job.waiting_reason.startswith(
        f"pod worker-0 failed: exit code 2: examples/train_lineer.py is not in the job's working directory "
        f"{workdir} (new and empty): use an absolute path, or copy your code under "
        f"{workspace_data_root('vision')}/ and set that directory as code_mount"), job.waiting_reason
    pod = job.pods.get()
    assert pod.reason in job.waiting_reason and pod.exit_code == 2


def test_a_code_mount_at_the_checkout_is_refused_with_where_code_goes() -> None:
    from django.core.exceptions import ValidationError

    from scheduler.paths import clean_user_path

    with pytest.raises(ValidationError) as refused:
        clean_user_path(str(ROOT), workspace_name="vision", field="code_mount")
    root = workspace_data_root("vision")
    [message] = refused.value.message_dict["code_mount"]
    assert message == (f"code_mount must be a directory inside the workspace's data root {root}/ (got {str(ROOT)!r}). "
                       f"Copy or clone your code into a directory there (e.g. {root}/my-project, or just my-project) "
                       f"and name that; without code_mount the command runs in a new directory of the job (on the "
                       f"embedded default it holds examples/).")
    assert clean_user_path("my-project", workspace_name="vision", field="code_mount") == str(root / "my-project")
