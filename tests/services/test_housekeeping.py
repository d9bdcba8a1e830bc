"""Housekeeping and node operations through the services and the loop, time moved by schedule_once(now=...).

Restart backoff (doubles per restart, capped), hang detection (TIDEPOOL_HANG_TIMEOUT), cordon
(no new pods, running ones stay) and drain (the node's jobs are preempted and restart elsewhere).
The recording executor stands in for the nodes; pod starts and exits are reported through the
lifecycle services as a node would.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Node, Pod, Workspace
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import job_progress, pod_exited, pod_running
from scheduler.services.nodes import node_drain, node_register, node_set_schedulable
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus

pytestmark = pytest.mark.django_db(transaction=True)

LIVE = (PodStatus.PENDING, PodStatus.RUNNING)


@pytest.fixture
def team():
    # No heartbeat recorded: these nodes are never declared lost, however far time moves.
    for name in ("gpu-1", "gpu-2"):
        node_register(name=name, gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team-a")
    space.members.add(user)
    quota = quota_create(name="team-a", min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536,
                         workspaces=[space])
    return user, space, quota


def submit(team, name: str, gpus: int = 4, pods: int = 1, **extra) -> Job:
    user, space, quota = team
    return job_submit(user=user, workspace=space, quota=quota, name=name, command="train",
                      roles=[{"name": "worker", "pod_count": pods, "gpus": gpus, "cpu": 8, "memory_gib": 64}],
                      **extra)


def live_pods(job: Job) -> list[Pod]:
    return list(Pod.objects.filter(job=job, status__in=LIVE).select_related("node").order_by("rank"))


def report_running(job: Job) -> None:
    for pod in live_pods(job):
        assert pod_running(pod_id=pod.pk, attempt=pod.attempt)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING, job.status


def admit(job: Job, now) -> None:
    """Run cycles at `now` until the job is admitted, then report its pods running."""
    for _ in range(3):
        schedule_once(now=now)
        job.refresh_from_db()
        if job.status == JobStatus.ENV_PREPARING:
            report_running(job)
            return
    raise AssertionError(f"{job.name} was not admitted: {job.status} {job.waiting_reason}")


def exit_pods(job: Job, outcome: str, exit_code: int) -> None:
    for pod in live_pods(job):
        assert pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=exit_code, outcome=outcome)
    job.refresh_from_db()


def test_restart_backoff_doubles_per_restart_and_is_capped(team, recording_executor, settings):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 10
    settings.TIDEPOOL_RESTART_BACKOFF_CAP = 35
    job = submit(team, "flaky", fault_tolerance=True, max_restarts=5)
    now = timezone.now()
    admit(job, now)
    delays = []
    for restart in range(5):
        failed_at = timezone.now()
        exit_pods(job, "failed", exit_code=1)
        assert job.status == JobStatus.RESTARTING and job.restart_count == restart
        delay = (job.restart_after - failed_at).total_seconds()
        delays.append(round(delay))
        assert f"restarting in {round(delay)} s (restart {restart + 1} of 5)" in job.events.last().reason

        # Not before the backoff has passed: still Restarting a second early, Queuing after.
        schedule_once(now=job.restart_after - timedelta(seconds=1))
        job.refresh_from_db()
        assert job.status == JobStatus.RESTARTING
        now = job.restart_after + timedelta(seconds=1)
        admit(job, now)
        assert job.restart_count == restart + 1 and job.attempt == restart + 2
    assert delays == [10, 20, 35, 35, 35]  # 10 · 2^n, capped at 35

    # Restarts used up: the next failure is final, with no backoff.
    exit_pods(job, "failed", exit_code=1)
    assert job.status == JobStatus.FAILED and job.finished_at
    assert "all 5 restarts used" in job.events.last().reason


def test_hang_detection_restarts_silent_job_only(team, recording_executor, settings):
    settings.TIDEPOOL_HANG_TIMEOUT = 60
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 1
    t0 = timezone.now()
    silent = submit(team, "silent", fault_tolerance=True)
    talker = submit(team, "talker", fault_tolerance=True)
    admit(silent, t0)
    admit(talker, t0)

    def progress(job: Job, at, step: int) -> None:
        job_progress(job_id=job.pk, attempt=job.attempt,
                     progress={"step": step, "updated_at": at.timestamp()})

    progress(talker, t0 + timedelta(seconds=30), 100)
    schedule_once(now=t0 + timedelta(seconds=59))  # nobody has been silent for 60 s yet
    for job in (silent, talker):
        job.refresh_from_db()
        assert job.status == JobStatus.RUNNING and not job.stop_outcome

    progress(talker, t0 + timedelta(seconds=65), 200)
    schedule_once(now=t0 + timedelta(seconds=80))
    talker.refresh_from_db()
    assert talker.status == JobStatus.RUNNING and not talker.stop_outcome  # reported 15 s ago
    silent.refresh_from_db()
    assert silent.stop_outcome == "failed"
    assert silent.waiting_reason == "no progress reported for 60 s: hung"
    assert silent.events.filter(kind="attempt-failed", reason="no progress reported for 60 s: hung").exists()
    (pod,) = live_pods(silent)
    assert (pod.pk, pod.attempt, "stopped") in [(p, a, o) for p, a, o, _ in recording_executor.terminated]
    assert not [t for t in recording_executor.terminated if t[0] in {p.pk for p in live_pods(talker)}]
    exit_pods(silent, "stopped", exit_code=-15)
    assert silent.status == JobStatus.RESTARTING

    # The talker goes silent too: 60 s after its last report it restarts as well.
    schedule_once(now=t0 + timedelta(seconds=124))
    talker.refresh_from_db()
    assert talker.status == JobStatus.RUNNING and not talker.stop_outcome
    schedule_once(now=t0 + timedelta(seconds=126))
    talker.refresh_from_db()
    assert talker.stop_outcome == "failed" and "hung" in talker.waiting_reason


def test_hang_detection_is_off_by_default(team, recording_executor, settings):
    assert settings.TIDEPOOL_HANG_TIMEOUT == 0
    t0 = timezone.now()
    job = submit(team, "quiet", fault_tolerance=True)
    admit(job, t0)
    schedule_once(now=t0 + timedelta(days=3))
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and not job.stop_outcome
    assert not recording_executor.terminated


def test_restarted_job_is_not_judged_hung_by_its_last_attempts_progress(team, recording_executor, settings):
    settings.TIDEPOOL_HANG_TIMEOUT = 60
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 1
    t0 = timezone.now()
    job = submit(team, "resumer", fault_tolerance=True)
    admit(job, t0)
    reported = (t0 + timedelta(seconds=10)).timestamp()
    job_progress(job_id=job.pk, attempt=job.attempt, progress={"step": 10, "updated_at": reported})
    exit_pods(job, "failed", exit_code=1)  # attempt 1 fails at once; the job restarts later
    assert job.status == JobStatus.RESTARTING
    restarted_at = t0 + timedelta(seconds=300)  # e.g. it waited in the queue for its quota
    admit(job, restarted_at)
    assert job.attempt == 2
    schedule_once(now=restarted_at + timedelta(seconds=5))  # 5 s into the new attempt: not hung
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and not job.stop_outcome, job.waiting_reason


def test_cordoned_node_gets_no_new_pods_but_keeps_running_ones(team, recording_executor):
    now = timezone.now()
    resident = submit(team, "resident")  # 4 GPUs: best fit, then name → gpu-1
    admit(resident, now)
    (pod,) = live_pods(resident)
    assert pod.node.name == "gpu-1"

    node_set_schedulable(node=Node.objects.get(name="gpu-1"), schedulable=False)
    newcomer = submit(team, "newcomer")  # best fit would pick gpu-1 (4 free); it is cordoned
    admit(newcomer, now)
    assert [p.node.name for p in live_pods(newcomer)] == ["gpu-2"]
    big = submit(team, "big", gpus=8)  # 8 free GPUs only exist on... nowhere schedulable
    for _ in range(3):
        schedule_once(now=now)
    big.refresh_from_db()
    assert big.status == JobStatus.QUEUING and big.waiting_reason and big.queue_position == 1

    resident.refresh_from_db()
    assert resident.status == JobStatus.RUNNING and [p.pk for p in live_pods(resident)] == [pod.pk]
    assert not recording_executor.terminated, "cordon must not touch running pods"
    assert not resident.events.filter(kind__in=["preempted", "attempt-failed"]).exists()

    node_set_schedulable(node=Node.objects.get(name="gpu-1"), schedulable=True)
    after = submit(team, "after-uncordon")
    admit(after, now)
    assert [p.node.name for p in live_pods(after)] == ["gpu-1"]


def test_drain_preempts_the_nodes_jobs_and_they_restart_elsewhere(team, recording_executor, settings):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 1
    settings.TIDEPOOL_GRACE_SECONDS = 7
    now = timezone.now()
    tolerant = submit(team, "tolerant", fault_tolerance=True)
    fragile = submit(team, "fragile")  # fault tolerance off
    elsewhere = submit(team, "elsewhere", gpus=8)
    for job in (tolerant, fragile, elsewhere):
        admit(job, now)
    assert {j.name: live_pods(j)[0].node.name for j in (tolerant, fragile, elsewhere)} == {
        "tolerant": "gpu-1", "fragile": "gpu-1", "elsewhere": "gpu-2"}
    queue_time = Job.objects.get(pk=tolerant.pk).queue_time

    node_drain(node=Node.objects.get(name="gpu-1"))
    node = Node.objects.get(name="gpu-1")
    assert not node.schedulable and node.draining
    drained = {p.pk for j in (tolerant, fragile) for p in live_pods(j)}
    signalled = {(p, o, g) for p, _, o, g in recording_executor.terminated}
    assert signalled == {(p, "preempted", 7) for p in drained}
    for job in (tolerant, fragile):
        job.refresh_from_db()
        assert job.status == JobStatus.PREEMPTED
        assert job.events.filter(kind="preempted", reason="node gpu-1 drained").exists()
    elsewhere.refresh_from_db()
    assert elsewhere.status == JobStatus.RUNNING  # the other node's job is untouched

    # The drained pods exit on their SIGTERM.
    for job in (tolerant, fragile):
        exit_pods(job, "preempted", exit_code=0)
    assert Pod.objects.filter(pk__in=drained, status=PodStatus.PREEMPTED).count() == 2
    # A drain is a preemption (DESIGN §3): queued again at once, no backoff, no restart used.
    assert tolerant.status == JobStatus.PREEMPTED and tolerant.resumes_automatically
    assert tolerant.restart_after is None and tolerant.preemption_count == 1
    assert fragile.status == JobStatus.PREEMPTED and fragile.finished_at
    assert "fault tolerance is off" in fragile.events.last().reason
    assert tolerant.preemptions.get().kind == "drain"

    # gpu-2 is full: the preempted job waits, and never lands on the drained node.
    schedule_once(now=now)
    schedule_once(now=now)
    tolerant.refresh_from_db()
    assert tolerant.status == JobStatus.PREEMPTED and tolerant.queue_time == queue_time
    assert tolerant.queue_position == 1
    exit_pods(elsewhere, "succeeded", exit_code=0)
    admit(tolerant, now)
    assert [p.node.name for p in live_pods(tolerant)] == ["gpu-2"]
    assert tolerant.restart_count == 0 and tolerant.queue_time == queue_time
    fragile.refresh_from_db()
    assert fragile.status == JobStatus.PREEMPTED  # not restarted
