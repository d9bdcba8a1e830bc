"""The reclaim story through the services and the live loop (issue: scheduling engine, Must show).

A team's quota is full; another team's idle-only job runs on its idle GPUs; the owner submits; the
borrower turns Preempted with an event naming the reclaiming quota (and, for staff, the job); the owner's job runs
In Quota; the borrower (fault tolerance on) is queued again at once, shown Preempted, with its original queue
time and runs again Not in Quota once capacity frees. Runs on PostgreSQL (CI) and on SQLite.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Pod, Workspace
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus

pytestmark = pytest.mark.django_db(transaction=True)

ROLE_8 = [{"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 8, "cpu": 8, "memory_gib": 64}]


@pytest.fixture
def two_teams():
    for name in ("gpu-1", "gpu-2", "gpu-3"):
        node_register(name=name, gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    User = get_user_model()
    ana, ben = User.objects.create_user("ana"), User.objects.create_user("ben")
    space_a, space_b = Workspace.objects.create(name="team-a"), Workspace.objects.create(name="team-b")
    space_a.members.add(ana)
    space_b.members.add(ben)
    root = quota_create(name="root", min_gpus={"A100": 24}, min_cpu=288, min_memory_gib=2304)
    quota_a = quota_create(name="team-a", parent=root, min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536,
                           workspaces=[space_a])
    quota_b = quota_create(name="team-b", parent=root, min_gpus={"A100": 8}, min_cpu=96, min_memory_gib=768,
                           workspaces=[space_b])
    return {"ana": ana, "ben": ben, "space_a": space_a, "space_b": space_b, "a": quota_a, "b": quota_b}


def submit(t, who: str, name: str, idle: str = "off", **extra) -> Job:
    user = t["ana"] if who == "a" else t["ben"]
    space = t["space_a"] if who == "a" else t["space_b"]
    return job_submit(user=user, workspace=space, quota=t[who], name=name, command="train", roles=ROLE_8,
                      idle_mode=idle, **extra)


def report_running(executor) -> None:
    for pod_id, attempt in list(executor.launched):
        pod_running(pod_id=pod_id, attempt=attempt)


def live_pods(job: Job) -> list[Pod]:
    return list(job.pods.filter(status__in=["Pending", "Running"]))


def test_borrower_is_reclaimed_restarts_and_runs_again(two_teams, recording_executor, settings):
    t = two_teams
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 5
    # team-b fills its own quota (8 of 8), then borrows 8 idle GPUs of team-a with an idle-only job.
    b_own = submit(t, "b", "b-own")
    borrower = submit(t, "b", "b-borrow", idle="only", fault_tolerance=True, max_restarts=3)
    first_queue_time = borrower.queue_time
    schedule_once()
    report_running(recording_executor)
    b_own.refresh_from_db()
    borrower.refresh_from_db()
    assert (b_own.status, b_own.in_quota) == (JobStatus.RUNNING, True)
    assert (borrower.status, borrower.in_quota) == (JobStatus.RUNNING, False)

    # team-a uses 8 of its 16 and then needs the other 8: only the borrower's GPUs are left.
    a_first = submit(t, "a", "a-first")
    schedule_once()
    report_running(recording_executor)
    owner = submit(t, "a", "bert-large")
    schedule_once()

    borrower.refresh_from_db()
    owner.refresh_from_db()
    assert borrower.status == JobStatus.PREEMPTED
    event = borrower.events.get(kind="preempted")
    assert event.reason == "reclaimed for a queued job of quota team-a"  # what team-b's members read
    assert event.staff_reason == "reclaimed by quota team-a for job bert-large"
    victim_pods = live_pods(borrower)
    assert [(p, a, o) for p, a, o, _ in recording_executor.terminated] == [
        (victim_pods[0].pk, victim_pods[0].attempt, "preempted")
    ]
    assert owner.status == JobStatus.QUEUING and owner.nominated_nodes
    assert owner.waiting_reason == "waiting for 1 preempted job to exit"
    assert owner.waiting_reason_staff == "waiting for 1 job(s) to exit: b-borrow"

    # While the victim is still exiting, the owner stays nominated and nothing else takes its GPUs.
    schedule_once()
    owner.refresh_from_db()
    assert owner.status == JobStatus.QUEUING and owner.nominated_nodes

    # The victim's pod exits within its grace period (checkpoint saved on SIGTERM).
    pod = victim_pods[0]
    assert pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="preempted")
    borrower.refresh_from_db()
    # A preemption is not a failure: queued again at once, shown Preempted, no restart used.
    assert borrower.status == JobStatus.PREEMPTED and borrower.resumes_automatically
    assert Pod.objects.get(pk=pod.pk).status == PodStatus.PREEMPTED

    schedule_once()
    report_running(recording_executor)
    owner.refresh_from_db()
    assert (owner.status, owner.in_quota) == (JobStatus.RUNNING, True)

    # The borrower waits with its first queue time and no restart used.
    schedule_once()
    borrower.refresh_from_db()
    assert borrower.status == JobStatus.PREEMPTED and borrower.queue_position == 1
    assert borrower.queue_time == first_queue_time
    assert (borrower.restart_count, borrower.preemption_count) == (0, 1)
    assert borrower.waiting_reason  # a reason a person can act on

    # Capacity frees (team-b's own job finishes): the borrower runs again, Not in Quota.
    for pod in live_pods(b_own):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="succeeded")
    b_own.refresh_from_db()
    assert b_own.status == JobStatus.SUCCEEDED
    schedule_once()
    report_running(recording_executor)
    borrower.refresh_from_db()
    assert (borrower.status, borrower.in_quota, borrower.attempt) == (JobStatus.RUNNING, False, 2)
    kinds = list(borrower.events.values_list("kind", flat=True))
    assert kinds.index("preempted") < kinds.index("queued", kinds.index("preempted")) < len(kinds) - 1
    assert "restarting" not in kinds
    assert kinds.count("admitted") == 2 and kinds[-1] == "running"
    a_first.refresh_from_db()
    assert a_first.status == JobStatus.RUNNING


def test_gpu_indices_never_overlap_on_a_node(two_teams, recording_executor):
    t = two_teams
    small = [{"name": "worker", "pod_count": 3, "gpu_type": "A100", "gpus": 2}]
    for i in range(5):
        job_submit(user=t["ana"], workspace=t["space_a"], quota=t["a"], name=f"small-{i}", command="x", roles=small)
    schedule_once()
    seen: dict[int, set[int]] = {}
    for pod in Pod.objects.all():
        assert len(pod.gpu_indices) == 2
        taken = seen.setdefault(pod.node_id, set())
        assert not taken & set(pod.gpu_indices), f"GPU indices overlap on node {pod.node_id}"
        taken |= set(pod.gpu_indices)
        assert all(0 <= i < 8 for i in pod.gpu_indices)
