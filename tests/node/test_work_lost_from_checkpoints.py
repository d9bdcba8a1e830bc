"""The work a preemption cost, for a job that saves its own checkpoints and reports no progress: the
newest file of its checkpoint directory is the safe point, not the attempt's start (issue 22)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from scheduler.paths import default_checkpoint_dir, workspace_data_root
from scheduler.services.preemption import preemption_record, preemption_settle
from tests.factories import JobFactory, NodeFactory, make_running

pytestmark = pytest.mark.django_db

GPUS = 4


@pytest.fixture
def preempted(settings, tmp_path: Path):
    """A job with 4 GPUs that ran 600 s, preempted now, no progress reported."""
    settings.TIDEPOOL_DATA_DIR = tmp_path
    job = JobFactory(roles=[{"gpus": GPUS}])
    make_running(job, NodeFactory())
    now = timezone.now()
    job.started_at = now - timedelta(seconds=600)
    job.save()
    preemption_record(job=job, kind="reclaim", reason="reclaimed", staff_reason="", now=now)
    return job, now


def write_checkpoint(directory: Path, name: str, written_at: float) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"weights")
    os.utime(path, (written_at, written_at))


def test_the_newest_checkpoint_file_is_the_safe_point(preempted) -> None:
    job, now = preempted
    directory = default_checkpoint_dir(job)
    write_checkpoint(directory, "model-100.pt", now.timestamp() - 500)
    write_checkpoint(directory / "step-200", "shard-0.distcp", now.timestamp() - 90)  # a framework's layout
    write_checkpoint(directory, ".model-300.pt.partial", now.timestamp() - 5)  # unfinished: ignored
    write_checkpoint(directory, "model-300.pt.tmp", now.timestamp() - 5)
    record = preemption_settle(job=job, now=now)
    assert record.lost_gpu_seconds == pytest.approx(GPUS * 90, abs=1)
    assert record.lost_steps is None  # no report: the steps are unknown, only the time is measured


def test_a_checkpoint_saved_in_the_grace_period_costs_nothing(preempted) -> None:
    job, now = preempted
    write_checkpoint(default_checkpoint_dir(job), "model.pt", now.timestamp() + 3)
    assert preemption_settle(job=job, now=now).lost_gpu_seconds == 0


def test_a_checkpoint_of_an_earlier_attempt_does_not_shrink_this_attempts_loss(preempted) -> None:
    job, now = preempted
    write_checkpoint(default_checkpoint_dir(job), "model.pt", now.timestamp() - 3600)
    assert preemption_settle(job=job, now=now).lost_gpu_seconds == pytest.approx(GPUS * 600, abs=1)


def test_no_checkpoint_file_counts_the_whole_attempt(preempted) -> None:
    job, now = preempted
    assert preemption_settle(job=job, now=now).lost_gpu_seconds == pytest.approx(GPUS * 600, abs=1)


def test_the_jobs_own_checkpoint_directory_is_read_and_a_path_outside_the_roots_never(preempted, tmp_path) -> None:
    job, now = preempted
    own = workspace_data_root(job.workspace.name) / "runs" / "bert"
    write_checkpoint(own, "model.pt", now.timestamp() - 60)
    job.checkpoint_dir = str(own)
    assert preemption_settle(job=job, now=now).lost_gpu_seconds == pytest.approx(GPUS * 60, abs=1)

    job.attempt += 1  # the next attempt, preempted the same way, names a directory outside the roots
    job.save()
    preemption_record(job=job, kind="reclaim", reason="reclaimed", staff_reason="", now=now)
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    write_checkpoint(outside, "model.pt", now.timestamp() - 10)
    job.checkpoint_dir = str(outside)
    assert preemption_settle(job=job, now=now).lost_gpu_seconds == pytest.approx(GPUS * 600, abs=1)


def test_a_reported_checkpoint_time_wins_over_the_files(preempted) -> None:
    job, now = preempted
    write_checkpoint(default_checkpoint_dir(job), "ckpt-000000000040.pkl", now.timestamp() - 10)
    job.progress = {"attempt": job.attempt, "step": 50, "last_checkpoint_step": 30,
                    "last_checkpoint_at": now.timestamp() - 120}
    record = preemption_settle(job=job, now=now)
    assert (record.lost_steps, record.lost_gpu_seconds) == (20, pytest.approx(GPUS * 120, abs=1))
