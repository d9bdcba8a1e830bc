"""Elastic jobs through the services and the loop (DESIGN §2c): an elastic borrower starts on its base,
grows onto idle GPUs once its growth interval has passed, is shrunk (not preempted) when an owner needs
part of it — only the chosen pods get SIGTERM, the job stays Running, no restart or preemption is counted —
and the owner's job gets the freed GPUs; events, counters and the cost of each resize are recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, JobResize, Pod, Workspace
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import LIVE_POD_STATUSES, EventKind, JobStatus, PodOutcome, PodStatus

pytestmark = pytest.mark.django_db(transaction=True)

ELASTIC = [{"name": "worker", "pod_count": 4, "min_pod_count": 1, "gpu_type": "A100", "gpus": 2, "cpu": 2,
            "memory_gib": 16}]


@pytest.fixture
def cluster():
    node_register(name="gpu-1", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    users = get_user_model().objects
    ana, ben = users.create_user("ana"), users.create_user("ben")
    space_a, space_b = Workspace.objects.create(name="team-a"), Workspace.objects.create(name="team-b")
    space_a.members.add(ana)
    space_b.members.add(ben)
    root = quota_create(name="root", min_gpus={"A100": 8})
    quota_a = quota_create(name="team-a", parent=root, min_gpus={"A100": 8}, workspaces=[space_a])
    quota_b = quota_create(name="team-b", parent=root, min_gpus={}, workspaces=[space_b])
    return {"ana": (ana, space_a, quota_a), "ben": (ben, space_b, quota_b)}


def submit(cluster, who: str, name: str, roles, **extra) -> Job:
    user, space, quota = cluster[who]
    return job_submit(user=user, workspace=space, quota=quota, name=name, command="train", roles=roles, **extra)


def live(job: Job) -> list[Pod]:
    return list(job.pods.filter(status__in=LIVE_POD_STATUSES).order_by("index"))


def start(job: Job) -> None:
    for pod in live(job):
        if pod.status == PodStatus.PENDING:
            assert pod_running(pod_id=pod.pk, attempt=pod.attempt)


def events(job: Job, kind: str) -> list:
    return list(job.events.filter(kind=kind).values_list("reason", "staff_reason"))


def test_an_elastic_borrower_grows_is_shrunk_for_an_owner_and_keeps_running(cluster, recording_executor):
    now = timezone.now()
    elastic = submit(cluster, "ben", "elastic", ELASTIC, idle_mode="only")
    schedule_once(now)
    elastic.refresh_from_db()
    assert [pod.index for pod in live(elastic)] == [0]  # the base alone
    start(elastic)
    schedule_once(now + timedelta(seconds=299))
    assert len(live(elastic)) == 1  # not before its growth interval (300 s)
    schedule_once(now + timedelta(seconds=300))
    assert [pod.index for pod in live(elastic)] == [0, 1, 2, 3]
    assert len(recording_executor.launched) == 4  # the base, then the three new pods
    start(elastic)
    elastic.refresh_from_db()
    assert elastic.status == JobStatus.RUNNING and elastic.grow_count == 1
    assert events(elastic, EventKind.GREW) == [("grew from 1 to 4 pods on idle resources", "")]

    owner = submit(cluster, "ana", "bert-large", [{"name": "worker", "pod_count": 1, "gpu_type": "A100",
                                                  "gpus": 4, "cpu": 2, "memory_gib": 16}])
    schedule_once(now + timedelta(seconds=400))
    elastic.refresh_from_db()
    shrunk = [pod for pod in live(elastic) if pod.terminate_requested == PodOutcome.SHRUNK]
    assert [pod.index for pod in shrunk] == [2, 3]  # the highest indexes first, never the base
    # SIGTERM (then the grace period) to those two pods only
    assert sorted((pod_id, outcome, grace) for pod_id, _attempt, outcome, grace in recording_executor.terminated) == [
        (pod.pk, PodOutcome.SHRUNK, 30.0) for pod in shrunk]
    assert elastic.status == JobStatus.RUNNING
    assert (elastic.shrink_count, elastic.preemption_count, elastic.restart_count) == (1, 0, 0)
    assert events(elastic, EventKind.SHRUNK) == [(
        "shrunk from 4 to 2 pods: reclaimed for a queued job of quota team-a",
        "shrunk from 4 to 2 pods: reclaimed by quota team-a for job bert-large")]
    assert not events(elastic, EventKind.PREEMPTED)
    resize = JobResize.objects.get(job=elastic, kind=JobResize.Kind.SHRINK)
    assert (resize.from_pods, resize.to_pods, resize.indexes, resize.gpus) == (4, 2, [2, 3], 8)
    assert resize.lost_gpu_seconds == pytest.approx(8 * 100, abs=1)  # no checkpoint: since the growth

    for pod in shrunk:  # they exit on SIGTERM with a non-zero code: neither a failure nor the job's end
        assert pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=143, outcome=PodOutcome.FAILED)
    elastic.refresh_from_db()
    assert elastic.status == JobStatus.RUNNING and len(live(elastic)) == 2
    assert set(Pod.objects.filter(pk__in=[p.pk for p in shrunk]).values_list("status", flat=True)) == {
        PodStatus.PREEMPTED}
    schedule_once(now + timedelta(seconds=401))
    owner.refresh_from_db()
    assert owner.status == JobStatus.ENV_PREPARING  # admitted on what the shrink freed

    for pod in live(elastic):  # the job ends well on its remaining pods: Succeeded, not Failed
        assert pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome=PodOutcome.SUCCEEDED)
    elastic.refresh_from_db()
    assert elastic.status == JobStatus.SUCCEEDED


def test_a_shrunk_job_grows_back_into_the_pods_it_lost(cluster, recording_executor):
    now = timezone.now()
    elastic = submit(cluster, "ben", "elastic", ELASTIC, idle_mode="only")
    schedule_once(now)
    start(elastic)
    schedule_once(now + timedelta(seconds=300))
    start(elastic)
    owner = submit(cluster, "ana", "owner", [{"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 2,
                                             "cpu": 2, "memory_gib": 16}])
    schedule_once(now + timedelta(seconds=310))
    for pod in Pod.objects.filter(job=elastic, terminate_requested=PodOutcome.SHRUNK):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=143, outcome=PodOutcome.FAILED)
    schedule_once(now + timedelta(seconds=311))
    start(owner)
    for pod in live(owner):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome=PodOutcome.SUCCEEDED)
    schedule_once(now + timedelta(seconds=620))  # 310 s after the shrink
    assert [pod.index for pod in live(elastic)] == [0, 1, 2, 3]
    elastic.refresh_from_db()
    assert (elastic.grow_count, elastic.shrink_count, elastic.preemption_count) == (2, 1, 0)


def test_an_elastic_role_needs_idle_resources(cluster):
    with pytest.raises(ValidationError) as refused:
        submit(cluster, "ben", "elastic", ELASTIC, idle_mode="off")
    assert "roles[0].min_pod_count" in refused.value.message_dict
    with pytest.raises(ValidationError) as refused:
        submit(cluster, "ben", "elastic", [dict(ELASTIC[0], min_pod_count=5)], idle_mode="only")
    assert "roles[0].min_pod_count" in refused.value.message_dict


def test_a_resize_of_an_earlier_attempt_is_not_this_runs_start(cluster, recording_executor):
    from scheduler.loop.snapshot import build_snapshot

    now = timezone.now()
    elastic = submit(cluster, "ben", "elastic", ELASTIC, idle_mode="only")
    schedule_once(now)
    start(elastic)
    elastic.refresh_from_db()
    elastic.resized_at = elastic.started_at - timedelta(seconds=50)  # left by the previous attempt
    elastic.save()
    snapshot, _index = build_snapshot(list(Job.objects.filter(pk=elastic.pk)), now)
    (shown,) = snapshot.jobs
    assert shown.elastic.resized_at is None and shown.run_started_at == elastic.started_at.timestamp()
    elastic.resized_at = elastic.started_at + timedelta(seconds=5)
    elastic.save()
    (shown,) = build_snapshot(list(Job.objects.filter(pk=elastic.pk)), now)[0].jobs
    assert shown.run_started_at == elastic.resized_at.timestamp()
