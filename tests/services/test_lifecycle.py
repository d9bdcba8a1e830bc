"""Pod reports, fencing, stop, failure, fault tolerance, lost nodes and the maximum running time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Node, Pod, Workspace
from scheduler.services.jobs import job_stop, job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def team():
    node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768, heartbeat=True)
    node_register(name="gpu-2", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768, heartbeat=True)
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team-a")
    space.members.add(user)
    quota = quota_create(name="team-a", min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536, workspaces=[space])
    return user, space, quota


def run_job(team, executor, pods: int = 2, **extra) -> Job:
    user, space, quota = team
    job = job_submit(user=user, workspace=space, quota=quota, name="job", command="train",
                     roles=[{"name": "worker", "pod_count": pods, "gpus": 4}], **extra)
    schedule_once()
    for pod in Pod.objects.filter(job=job):
        assert pod_running(pod_id=pod.pk, attempt=pod.attempt)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    return job


def test_all_pods_succeed_then_job_succeeds(team, recording_executor):
    job = run_job(team, recording_executor)
    first, second = Pod.objects.filter(job=job).order_by("rank")
    pod_exited(pod_id=first.pk, attempt=first.attempt, exit_code=0, outcome="succeeded")
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    pod_exited(pod_id=second.pk, attempt=second.attempt, exit_code=0, outcome="succeeded")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.finished_at


def test_stale_attempt_reports_are_fenced(team, recording_executor):
    job = run_job(team, recording_executor, pods=1)
    pod = Pod.objects.get(job=job)
    assert not pod_exited(pod_id=pod.pk, attempt=pod.attempt - 1, exit_code=1, outcome="failed")
    assert not pod_running(pod_id=pod.pk, attempt=pod.attempt + 1)
    pod.refresh_from_db()
    assert pod.status == PodStatus.RUNNING
    assert pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="succeeded")
    assert not pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=1, outcome="failed")  # reported once
    assert Pod.objects.get(pk=pod.pk).status == PodStatus.SUCCEEDED


def test_stop_sends_sigterm_then_stopped(team, recording_executor, settings):
    settings.TIDEPOOL_GRACE_SECONDS = 12
    job = run_job(team, recording_executor)
    job_stop(job=job, user=team[0])
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPING
    assert {(o, g) for _, _, o, g in recording_executor.terminated} == {("stopped", 12)}
    for pod in Pod.objects.filter(job=job):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=-15, outcome="stopped")
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED
    assert set(Pod.objects.filter(job=job).values_list("status", flat=True)) == {PodStatus.STOPPED}


def test_pending_job_stops_at_once(team, recording_executor):
    user, space, quota = team
    job = job_submit(user=user, workspace=space, quota=quota, name="big", command="x",
                     roles=[{"name": "worker", "pod_count": 1, "gpus": 8}])  # not scheduled yet
    job_stop(job=job, user=user)
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED and not recording_executor.terminated


def test_pod_failure_restarts_with_fault_tolerance(team, recording_executor, settings):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 10
    job = run_job(team, recording_executor, fault_tolerance=True, max_restarts=1)
    first, second = Pod.objects.filter(job=job).order_by("rank")
    pod_exited(pod_id=first.pk, attempt=first.attempt, exit_code=3, outcome="failed")
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING  # the sibling is still exiting
    assert (second.pk, second.attempt, "stopped") in [(p, a, o) for p, a, o, _ in recording_executor.terminated]
    pod_exited(pod_id=second.pk, attempt=second.attempt, exit_code=-15, outcome="stopped")
    job.refresh_from_db()
    assert job.status == JobStatus.RESTARTING
    assert 9 <= (job.restart_after - timezone.now()).total_seconds() <= 10
    schedule_once(now=timezone.now() + timedelta(seconds=11))
    job.refresh_from_db()
    assert job.restart_count == 1
    schedule_once(now=timezone.now() + timedelta(seconds=11))
    job.refresh_from_db()
    assert job.status == JobStatus.ENV_PREPARING and job.attempt == 2

    # Restarts used up (1 of 1): the next failure is final.
    for pod in Pod.objects.filter(job=job, attempt=2):
        pod_running(pod_id=pod.pk, attempt=2)
    for pod in Pod.objects.filter(job=job, attempt=2):
        pod_exited(pod_id=pod.pk, attempt=2, exit_code=1, outcome="failed")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "all 1 restarts used" in job.events.last().reason


def test_pod_failure_without_fault_tolerance_fails(team, recording_executor):
    job = run_job(team, recording_executor, pods=1)
    pod = Pod.objects.get(job=job)
    pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=2, outcome="failed")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "fault tolerance is off" in job.events.last().reason


def test_silent_node_is_lost_and_its_job_restarts(team, recording_executor, settings):
    settings.TIDEPOOL_NODE_TIMEOUT = 60
    job = run_job(team, recording_executor, pods=1, fault_tolerance=True)
    pod = Pod.objects.get(job=job)
    Node.objects.exclude(pk=pod.node_id).update(last_heartbeat=timezone.now() + timedelta(seconds=120))
    schedule_once(now=timezone.now() + timedelta(seconds=90))
    pod.refresh_from_db()
    job.refresh_from_db()
    assert pod.status == PodStatus.FAILED and "lost" in pod.reason
    assert Node.objects.get(pk=pod.node_id).lost
    assert job.status == JobStatus.RESTARTING
    assert job.events.filter(kind="node-lost").exists()


def test_maximum_running_time_stops_the_job(team, recording_executor):
    job = run_job(team, recording_executor, pods=1, max_running_minutes=5)
    Node.objects.update(last_heartbeat=timezone.now() + timedelta(minutes=6))  # nodes stay alive
    schedule_once(now=timezone.now() + timedelta(minutes=6))
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPING
    assert "time limit reached: 5 min (the maximum running time)" in job.waiting_reason


def test_console_stop_preempts_local_jobs_which_restart(team, recording_executor):
    from scheduler.services.lifecycle import local_nodes_release

    Node.objects.update(inventory_source="demo")
    job = run_job(team, recording_executor, pods=1, fault_tolerance=True)
    assert local_nodes_release(reason="the console stopped") == 1
    job.refresh_from_db()
    assert job.status == JobStatus.PREEMPTED
    pod = Pod.objects.get(job=job)
    pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="preempted")
    job.refresh_from_db()
    # A shutdown is a preemption (DESIGN §3): queued again at once, no restart used.
    assert job.status == JobStatus.PREEMPTED and job.resumes_automatically
    assert (job.preemption_count, job.restart_count, job.restart_after) == (1, 0, None)
    assert job.preemptions.get().kind == "shutdown"


def test_pods_ending_unasked_is_a_failed_attempt_not_success(team, recording_executor):
    job = run_job(team, recording_executor, pods=2)
    for pod in Pod.objects.filter(job=job):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=-15, outcome="stopped")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "ended without finishing" in job.events.get(kind="failed").reason
