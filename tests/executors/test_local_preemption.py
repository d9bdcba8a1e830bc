"""Real processes on the local executor: the example job is reclaimed mid-run, saves on SIGTERM,
restarts, resumes from the saved step, and ends with exactly an uninterrupted run's result."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Pod, Workspace
from scheduler.node.local import LocalExecutor
from scheduler.paths import pod_log_path
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_linear.py"
STEPS = 400
ARGS = f"--steps {STEPS} --checkpoint-every 50 --seed 7"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def local_executor():
    executor = LocalExecutor()
    previous = set_executor(executor)
    yield executor
    executor.shutdown(grace_s=1)
    set_executor(previous)
    assert not executor.agent.supervisor.running(), "a pod process was left running"


def test_reclaimed_job_resumes_and_matches_uninterrupted_run(local_executor, settings, tmp_path):
    settings.TIDEPOOL_GRACE_SECONDS = 10
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 0.2
    reference = tmp_path / "reference.json"
    subprocess.run([sys.executable, str(EXAMPLE), *ARGS.split(), "--checkpoint-dir", str(tmp_path / "ref-ckpt"),
                    "--output", str(reference)], check=True, capture_output=True, timeout=120)

    node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, inventory_source="demo")
    user = get_user_model().objects.create_user("ana")
    owners, borrowers = Workspace.objects.create(name="owners"), Workspace.objects.create(name="borrowers")
    owners.members.add(user)
    borrowers.members.add(user)
    root = quota_create(name="root", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64)
    owner_quota = quota_create(name="team-a", parent=root, min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64,
                               workspaces=[owners])
    borrow_quota = quota_create(name="team-b", parent=root, workspaces=[borrowers])
    result = tmp_path / "preempted.json"
    borrower = job_submit(
        user=user, workspace=borrowers, quota=borrow_quota, name="linear", idle_mode="only",
        command=f"{sys.executable} {EXAMPLE} {ARGS} --step-sleep 0.01 --output {result}",
        roles=[{"name": "worker", "pod_count": 1, "gpus": 8}], fault_tolerance=True, max_restarts=3,
    )
    schedule_once()
    borrower.refresh_from_db()
    assert (borrower.status, borrower.in_quota) == (JobStatus.RUNNING, False)

    def progressed() -> int | None:
        borrower.refresh_from_db()
        step = borrower.progress.get("step") or 0
        return step if step >= 120 else None

    wait_for(progressed, 60, "the borrower to pass step 120")
    owner = job_submit(user=user, workspace=owners, quota=owner_quota, name="owner", command="sleep 0.5",
                       roles=[{"name": "worker", "pod_count": 1, "gpus": 8}])
    reclaimed_at = time.monotonic()
    schedule_once()
    borrower.refresh_from_db()
    assert borrower.status == JobStatus.PREEMPTED

    first = Pod.objects.get(job=borrower, attempt=1)
    wait_for(lambda: Pod.objects.get(pk=first.pk).status != PodStatus.RUNNING, 15, "the victim to exit")
    first.refresh_from_db()
    assert first.status == PodStatus.PREEMPTED and first.exit_code == 0  # saved and exited on SIGTERM
    assert time.monotonic() - reclaimed_at < settings.TIDEPOOL_GRACE_SECONDS
    borrower.refresh_from_db()
    saved_step = borrower.progress["last_checkpoint_step"]
    assert 120 <= saved_step < STEPS

    def done(job: Job) -> bool:
        schedule_once()
        job.refresh_from_db()
        return job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)

    wait_for(lambda: done(owner), 30, "the owner's job to finish", step=0.2)
    assert owner.status == JobStatus.SUCCEEDED and owner.in_quota
    wait_for(lambda: done(borrower), 60, "the borrower to finish", step=0.2)
    assert borrower.status == JobStatus.SUCCEEDED and (borrower.restart_count, borrower.preemption_count) == (0, 1)
    second_log = pod_log_path(Pod.objects.get(job=borrower, attempt=2))
    assert f"resumed from step {saved_step}" in second_log.read_text()
    assert json.loads(result.read_text()) == json.loads(reference.read_text())
    assert borrower.events.filter(kind="resumed", reason=f"resumed from step {saved_step:,}").exists()
