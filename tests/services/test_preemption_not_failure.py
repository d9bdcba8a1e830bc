"""DESIGN §3 through the services and the loop: a preemption is not a failure (issue 11, Must show).

- A borrower reclaimed five times with `max_restarts` 1 resumes each time and finishes; its
  preemptions are counted apart, no restart is used, it is never Failed.
- After each reclaim its pods are placed again in the first cycle that has room, on the test's
  clock (the cycles run at one fixed `now`: any backoff would keep it out).
- The work lost per preemption is measured from the attempt's last progress report.
- A failing pod still backs off and ends Failed once its restarts are used.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Node, Pod, Workspace
from scheduler.services.jobs import job_can_restart, job_can_stop, job_restart, job_stop, job_submit
from scheduler.services.lifecycle import job_progress, pod_exited, pod_running
from scheduler.services.nodes import node_drain, node_register, node_set_schedulable
from scheduler.services.quotas import quota_create
from scheduler.states import LIVE_POD_STATUSES, EventKind, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)

ROLE_8 = [{"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 8, "cpu": 8, "memory_gib": 64}]


@pytest.fixture
def cluster():
    """One 8-GPU node. team-a is guaranteed all of it; team-b has no guarantee and borrows."""
    node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    user_model = get_user_model()
    ana, ben = user_model.objects.create_user("ana"), user_model.objects.create_user("ben")
    space_a, space_b = Workspace.objects.create(name="team-a"), Workspace.objects.create(name="team-b")
    space_a.members.add(ana)
    space_b.members.add(ben)
    root = quota_create(name="root", min_gpus={"A100": 8})
    quota_a = quota_create(name="team-a", parent=root, min_gpus={"A100": 8}, workspaces=[space_a])
    quota_b = quota_create(name="team-b", parent=root, min_gpus={}, workspaces=[space_b])
    return {"ana": ana, "ben": ben, "a": (space_a, quota_a), "b": (space_b, quota_b)}


def submit(cluster, who: str, name: str, **extra) -> Job:
    space, quota = cluster[who]
    user = cluster["ana"] if who == "a" else cluster["ben"]
    return job_submit(user=user, workspace=space, quota=quota, name=name, command="train", roles=ROLE_8, **extra)


def live(job: Job) -> list[Pod]:
    return list(job.pods.filter(status__in=LIVE_POD_STATUSES))


def run_pods(job: Job) -> None:
    for pod in live(job):
        assert pod_running(pod_id=pod.pk, attempt=pod.attempt)


def exit_pods(job: Job, outcome: str, exit_code: int = 0) -> None:
    for pod in live(job):
        assert pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=exit_code, outcome=outcome)


def report(job: Job, *, step: int, checkpoint: int | None, checkpoint_at: float | None, resumed: int | None) -> None:
    job.refresh_from_db()
    job_progress(job_id=job.pk, attempt=job.attempt, progress={
        "step": step, "last_checkpoint_step": checkpoint, "last_checkpoint_at": checkpoint_at,
        "resumed_from_step": resumed, "updated_at": time.time()})


def test_reclaimed_five_times_with_one_restart_still_finishes(cluster, recording_executor, settings):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 60  # a backoff, if one were used, would outlast the test
    # Every cycle runs at this one moment (a minute back, so that attempts started before the
    # checkpoints reported below): no backoff can pass.
    clock = timezone.now() - timedelta(minutes=1)
    borrower = submit(cluster, "b", "borrower", idle_mode="only", fault_tolerance=True, max_restarts=1)
    queue_time = borrower.queue_time
    schedule_once(now=clock)
    run_pods(borrower)
    seen: list[str] = []
    resumed_from = None
    for round_ in range(1, 6):
        borrower.refresh_from_db()
        assert (borrower.status, borrower.in_quota) == (JobStatus.RUNNING, False)
        # Training progress: 37 steps since the checkpoint of 10 s ago.
        report(borrower, step=100 * round_ + 37, checkpoint=100 * round_, checkpoint_at=time.time() - 10,
               resumed=resumed_from)

        owner = submit(cluster, "a", f"claim-{round_}")
        schedule_once(now=clock)  # the reclaim
        borrower.refresh_from_db()
        seen.append(borrower.status)
        assert borrower.status == JobStatus.PREEMPTED and borrower.preempted_exiting
        exit_pods(borrower, "preempted")
        borrower.refresh_from_db()
        seen.append(borrower.status)
        assert borrower.status == JobStatus.PREEMPTED and borrower.resumes_automatically
        assert (borrower.preemption_count, borrower.restart_count, borrower.restart_after) == (round_, 0, None)
        assert job_can_stop(borrower) and not job_can_restart(borrower, has_live_pods=False)

        schedule_once(now=clock)  # the owner takes the node; the borrower waits, still Preempted, first in line
        owner.refresh_from_db()
        borrower.refresh_from_db()
        assert owner.status == JobStatus.ENV_PREPARING and owner.in_quota
        assert (borrower.status, borrower.queue_position, borrower.queue_time) == (JobStatus.PREEMPTED, 1, queue_time)
        assert borrower.pods.filter(status__in=LIVE_POD_STATUSES).count() == 0
        run_pods(owner)
        exit_pods(owner, "succeeded")

        schedule_once(now=clock)  # the first cycle with room places it again, on the same clock
        borrower.refresh_from_db()
        seen.append(borrower.status)
        assert borrower.status == JobStatus.ENV_PREPARING and borrower.attempt == round_ + 1
        resumed_from = 100 * round_  # the checkpoint it resumes from
        run_pods(borrower)

    exit_pods(borrower, "succeeded")
    borrower.refresh_from_db()
    assert borrower.status == JobStatus.SUCCEEDED
    assert (borrower.preemption_count, borrower.restart_count, borrower.max_restarts) == (5, 0, 1)
    assert JobStatus.FAILED not in seen and JobStatus.RESTARTING not in seen
    kinds = list(borrower.events.values_list("kind", flat=True))
    assert kinds.count(EventKind.PREEMPTED) == 5 and kinds.count(EventKind.ADMITTED) == 6
    assert not {EventKind.FAILED, EventKind.RESTARTING, EventKind.ATTEMPT_FAILED} & set(kinds)
    # Work lost, per preemption: the 37 steps and ~10 s × 8 GPUs since each attempt's last checkpoint.
    preemptions = list(borrower.preemptions.order_by("attempt"))
    assert [p.attempt for p in preemptions] == [1, 2, 3, 4, 5]
    assert [p.lost_steps for p in preemptions] == [37] * 5
    assert all(80 <= p.lost_gpu_seconds < 8 * 30 for p in preemptions)
    assert all(p.kind == "reclaim" and p.reason == "reclaimed for a queued job of quota team-a" for p in preemptions)
    # Run time and GPU time add up over the six attempts.
    assert borrower.run_seconds > 0 and borrower.gpu_seconds == pytest.approx(8 * borrower.run_seconds)


def test_the_running_event_quotes_the_resume_step_of_the_attempt_that_resumed(cluster, recording_executor):
    clock = timezone.now()
    job = submit(cluster, "b", "resumer", idle_mode="only", fault_tolerance=True)
    schedule_once(now=clock)
    run_pods(job)
    report(job, step=1346, checkpoint=1346, checkpoint_at=time.time(), resumed=941)  # attempt 1 resumed from 941
    node_drain(node=Node.objects.get(name="gpu-1"))
    exit_pods(job, "preempted")
    node_set_schedulable(node=Node.objects.get(name="gpu-1"), schedulable=True)
    schedule_once(now=clock)
    job.refresh_from_db()
    assert job.attempt == 2
    run_pods(job)  # attempt 2's pods run before it reports: the old resume step is not quoted
    running = job.events.filter(kind=EventKind.RUNNING).last()
    assert running.reason == "all pods running"
    report(job, step=1346, checkpoint=1346, checkpoint_at=time.time(), resumed=1346)
    assert job.events.filter(kind=EventKind.RESUMED).last().reason == "resumed from step 1,346"

    # Attempt 3 reports before its pods all run: the running event quotes this attempt's step.
    node_drain(node=Node.objects.get(name="gpu-1"))
    exit_pods(job, "preempted")
    node_set_schedulable(node=Node.objects.get(name="gpu-1"), schedulable=True)
    schedule_once(now=clock)
    job.refresh_from_db()
    report(job, step=2000, checkpoint=2000, checkpoint_at=time.time(), resumed=2000)
    run_pods(job)
    assert job.events.filter(kind=EventKind.RUNNING).last().reason == "all pods running; resumed from step 2,000"
    job.refresh_from_db()
    assert (job.preemption_count, job.restart_count) == (2, 0)


def test_a_failing_pod_still_backs_off_and_fails_after_its_budget(cluster, recording_executor, settings):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 30
    clock = timezone.now()
    job = submit(cluster, "a", "flaky", fault_tolerance=True, max_restarts=1)
    schedule_once(now=clock)
    run_pods(job)
    # A drain first: a preemption, which uses nothing.
    node_drain(node=Node.objects.get(name="gpu-1"))
    exit_pods(job, "preempted")
    node_set_schedulable(node=Node.objects.get(name="gpu-1"), schedulable=True)
    schedule_once(now=clock)
    run_pods(job)
    job.refresh_from_db()
    assert (job.attempt, job.preemption_count, job.restart_count) == (2, 1, 0)

    before = timezone.now()
    exit_pods(job, "failed", exit_code=3)
    after = timezone.now()
    job.refresh_from_db()
    assert job.status == JobStatus.RESTARTING
    assert before + timedelta(seconds=30) <= job.restart_after <= after + timedelta(seconds=30)
    schedule_once(now=job.restart_after - timedelta(seconds=5))  # the node is free, but the backoff is not over
    job.refresh_from_db()
    assert job.status == JobStatus.RESTARTING and job.attempt == 2
    later = job.restart_after + timedelta(seconds=1)
    schedule_once(now=later)
    schedule_once(now=later)
    job.refresh_from_db()
    assert job.status == JobStatus.ENV_PREPARING and job.restart_count == 1 and job.attempt == 3
    run_pods(job)
    exit_pods(job, "failed", exit_code=3)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "all 1 restarts used" in job.events.filter(kind=EventKind.FAILED).get().reason
    assert (job.preemption_count, job.restart_count) == (1, 1)


def test_without_fault_tolerance_it_stays_preempted_and_offers_restart(cluster, recording_executor):
    clock = timezone.now()
    job = submit(cluster, "b", "fragile", idle_mode="only")
    schedule_once(now=clock)
    run_pods(job)
    submit(cluster, "a", "owner")
    schedule_once(now=clock)
    exit_pods(job, "preempted")
    job.refresh_from_db()
    assert job.status == JobStatus.PREEMPTED and job.stays_preempted and not job.resumes_automatically
    assert not job_can_stop(job) and job_can_restart(job, has_live_pods=False)
    schedule_once(now=clock)
    job.refresh_from_db()
    assert job.status == JobStatus.PREEMPTED and job.attempt == 1  # not scheduled again by itself
    job_restart(job=job, user=cluster["ben"])
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUING


def test_a_stop_while_the_preempted_pods_exit_ends_stopped(cluster, recording_executor):
    clock = timezone.now()
    job = submit(cluster, "b", "stopped-midway", idle_mode="only", fault_tolerance=True)
    schedule_once(now=clock)
    run_pods(job)
    submit(cluster, "a", "owner")
    schedule_once(now=clock)
    job.refresh_from_db()
    assert job.preempted_exiting and job_can_stop(job)
    job_stop(job=job, user=cluster["ben"])
    exit_pods(job, "stopped")
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED and job.preemption_count == 1
    assert job.preemptions.get().settled_at is not None
    schedule_once(now=clock)
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED and job.attempt == 1  # never queued again
