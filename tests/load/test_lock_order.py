"""Row locks are taken in one order, so concurrent writers never deadlock (PostgreSQL).

The loop, a user's stop and a failing pod lock a job, then its pods (job → pod). A node's pod
report must not lock the other way round (pod → job): when the two meet, PostgreSQL detects a
deadlock and aborts one of them, and nobody retries it. An aborted pod_exited loses the exit (the
pod stays Running in the database for good, holding its GPUs); an aborted pod_running breaks off
the executor's launch loop after commit; an aborted cycle is lost until the next one.

Each test makes the meeting happen deterministically: the job → pod writer is paused right after
it locked the job, the pod report is started and runs until it waits on a lock, then the writer
goes on. With one lock order, the report simply waits for the writer, and both succeed.
"""

from __future__ import annotations

import threading
import time
import traceback

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

import scheduler.services.jobs as job_services
import scheduler.services.lifecycle as lifecycle
import scheduler.services.scheduling
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Pod, Workspace
from scheduler.services.jobs import job_stop, job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.timeout(60)]



class Meeting:
    """Pause a job → pod writer after its job lock until a pod report waits on a lock."""

    def __init__(self) -> None:
        self.writer_holds_job = threading.Event()
        self.report_waiting = threading.Event()
        self.errors: list[str] = []

    def pause(self) -> None:
        if not self.writer_holds_job.is_set():
            self.writer_holds_job.set()
            self.report_waiting.wait(10)

    def run(self, name: str, call) -> threading.Thread:
        def target() -> None:
            try:
                call()
            except Exception:
                self.errors.append(f"{name}: {traceback.format_exc()}")
            finally:
                connection.close()

        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def meet(self, writer, report) -> None:
        first = self.run("job → pod writer", writer)
        assert self.writer_holds_job.wait(10), "the writer never reached its pause"
        second = self.run("pod report", report)
        deadline = time.monotonic() + 5
        met = False
        while time.monotonic() < deadline and second.is_alive():
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    met = True
                    break
            time.sleep(0.02)
        reported_early = not second.is_alive()
        self.report_waiting.set()
        # The meeting this test is about: the report really waited on a lock the writer held.
        assert met and not reported_early, "the pod report never waited on the writer's lock: no meeting"
        for thread in (first, second):
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} is stuck"
        assert not self.errors, "\n".join(self.errors)


@pytest.fixture
def team(postgres_db):
    node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    user = get_user_model().objects.create_user("ana")
    owners, borrowers = Workspace.objects.create(name="owners"), Workspace.objects.create(name="borrowers")
    for space in (owners, borrowers):
        space.members.add(user)
    root = quota_create(name="root", min_gpus={"A100": 8}, min_cpu=96, min_memory_gib=768)
    owner = quota_create(name="owner", parent=root, min_gpus={"A100": 8}, min_cpu=96, min_memory_gib=768,
                         workspaces=[owners])
    borrower = quota_create(name="borrower", parent=root, workspaces=[borrowers])
    return {"user": user, "owners": owners, "borrowers": borrowers, "owner": owner, "borrower": borrower}


def submit(team, name: str, *, who: str = "owner", pods: int = 1, gpus: int = 8, **extra) -> Job:
    space = team["owners"] if who == "owner" else team["borrowers"]
    return job_submit(user=team["user"], workspace=space, quota=team[who], name=name, command="train",
                      roles=[{"name": "worker", "pod_count": pods, "gpus": gpus}], **extra)


def test_reclaim_and_the_victims_exit_report_do_not_deadlock(team, recording_executor, monkeypatch):
    victim = submit(team, "borrower-job", who="borrower", idle_mode="only", fault_tolerance=True)
    schedule_once()
    (pod,) = Pod.objects.filter(job=victim)
    assert pod_running(pod_id=pod.pk, attempt=pod.attempt)
    owner = submit(team, "owner-job")

    meeting = Meeting()
    preempt = scheduler.services.scheduling.job_preempt

    def paused_preempt(**kwargs):
        meeting.pause()  # the cycle holds every active job's lock here
        preempt(**kwargs)

    monkeypatch.setattr(scheduler.services.scheduling, "job_preempt", paused_preempt)
    meeting.meet(schedule_once, lambda: pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0,
                                                   outcome="succeeded"))
    pod.refresh_from_db()
    victim.refresh_from_db()
    assert pod.status == PodStatus.PREEMPTED  # it exited while being reclaimed: recorded as asked
    assert victim.status == JobStatus.PREEMPTED and victim.resumes_automatically  # queued again at once
    schedule_once()
    owner.refresh_from_db()
    assert owner.status == JobStatus.ENV_PREPARING and owner.in_quota


def test_failing_pod_and_its_siblings_start_report_do_not_deadlock(team, recording_executor, monkeypatch):
    job = submit(team, "gang", pods=2, gpus=4, fault_tolerance=True)
    schedule_once()
    first, second = Pod.objects.filter(job=job).order_by("rank")
    assert pod_running(pod_id=first.pk, attempt=first.attempt)  # the second has not reported yet

    meeting = Meeting()
    event = lifecycle.job_event

    def paused_event(job, kind, reason):
        if kind == "pod-failed":
            meeting.pause()  # pod_exited holds the failed pod's and the job's locks here
        event(job, kind, reason)

    monkeypatch.setattr(lifecycle, "job_event", paused_event)
    meeting.meet(lambda: pod_exited(pod_id=first.pk, attempt=first.attempt, exit_code=1, outcome="failed"),
                 lambda: pod_running(pod_id=second.pk, attempt=second.attempt))
    first.refresh_from_db()
    second.refresh_from_db()
    job.refresh_from_db()
    assert first.status == PodStatus.FAILED and job.stop_outcome == "failed"
    assert second.terminate_requested == "stopped"  # the rest of the gang is told to stop
    signalled = [(p, a, o) for p, a, o, _ in recording_executor.terminated]
    assert (second.pk, second.attempt, "stopped") in signalled


def test_user_stop_and_the_pods_exit_report_do_not_deadlock(team, recording_executor, monkeypatch):
    job = submit(team, "stopped-job")
    schedule_once()
    (pod,) = Pod.objects.filter(job=job)
    assert pod_running(pod_id=pod.pk, attempt=pod.attempt)

    meeting = Meeting()
    terminate = job_services.job_terminate

    def paused_terminate(**kwargs):
        meeting.pause()  # job_stop holds the job's lock here
        terminate(**kwargs)

    monkeypatch.setattr(job_services, "job_terminate", paused_terminate)
    meeting.meet(lambda: job_stop(job=job, user=None),
                 lambda: pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="succeeded"))
    job.refresh_from_db()
    pod.refresh_from_db()
    assert job.status == JobStatus.STOPPED and pod.status == PodStatus.STOPPED
