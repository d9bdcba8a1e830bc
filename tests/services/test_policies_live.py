"""DESIGN §2b policies in the live loop: pool policies and preempt_within come from the database,
each running job's last checkpoint of its current attempt reaches the engine, and a demotion is
written (Not in Quota, flagged, an event its owner reads) and undone by promotion."""

from __future__ import annotations

import pytest
from django.utils import timezone

from scheduler.engine.types import IDLE_SHARE_FAIR
from scheduler.loop.cycle import schedule_once
from scheduler.loop.snapshot import build_snapshot
from scheduler.models import Job, JobEvent, PoolPolicy
from scheduler.services.lifecycle import pod_exited
from scheduler.services.scheduling import DEMOTED_REASON
from scheduler.states import EventKind, JobStatus
from tests.services.test_scheduling_story import live_pods, report_running, submit, two_teams  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _snapshot():
    jobs = list(Job.objects.filter(status__in=[JobStatus.QUEUING, JobStatus.ENV_PREPARING, JobStatus.RUNNING]))
    return build_snapshot(jobs, timezone.now())[0]


def test_policies_and_checkpoints_reach_the_engine(two_teams, recording_executor):  # noqa: F811
    t = two_teams
    PoolPolicy.objects.create(resource_type="general", idle_share="fair", min_runtime_s=600, starvation_s=0)
    t["b"].preempt_within = True
    t["b"].save()
    job = submit(t, "b", "b-own")
    schedule_once()
    report_running(recording_executor)
    job.refresh_from_db()
    started = job.started_at.timestamp()
    job.progress = {"step": 10, "last_checkpoint_at": started + 50.0, "attempt": job.attempt}
    job.save()
    snapshot = _snapshot()
    engine_job = next(j for j in snapshot.jobs if j.name == job.engine_key)
    assert engine_job.checkpointed_at == started + 50.0
    assert engine_job.safe_point == started + 50.0
    policy = snapshot.policy_of("general")
    assert (policy.idle_share, policy.min_runtime_s) == (IDLE_SHARE_FAIR, 600.0)
    assert snapshot.now is not None
    assert {q.name: q.preempt_within for q in snapshot.quotas} == {"root": False, "team-a": False, "team-b": True}
    # A checkpoint reported by an earlier attempt is not this run's safe point.
    job.progress = {"last_checkpoint_at": started + 50.0, "attempt": job.attempt - 1}
    job.save()
    assert next(j for j in _snapshot().jobs if j.name == job.engine_key).checkpointed_at is None


def test_demotion_is_written_and_promotion_brings_it_back(two_teams, recording_executor):  # noqa: F811
    t = two_teams
    t["b"].preempt_within = True
    t["b"].save()
    low = submit(t, "b", "b-low", priority=1)
    schedule_once()
    report_running(recording_executor)
    high = submit(t, "b", "b-high", priority=5)
    schedule_once()  # team-b's guarantee (8) goes to the higher priority; b-low keeps running
    low.refresh_from_db()
    high.refresh_from_db()
    assert (low.status, low.in_quota, low.demoted) == (JobStatus.RUNNING, False, True)
    assert (high.status, high.in_quota) == (JobStatus.ENV_PREPARING, True)
    event = JobEvent.objects.get(job=low, kind=EventKind.DEMOTED)
    assert event.reason == DEMOTED_REASON
    report_running(recording_executor)
    for pod in live_pods(high):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="succeeded")
    schedule_once()  # the quota fits b-low again: promoted back although its idle mode is off
    low.refresh_from_db()
    assert (low.in_quota, low.demoted) == (True, False)
    assert JobEvent.objects.filter(job=low, kind=EventKind.PROMOTED).exists()


def test_a_demoted_job_preempted_for_its_own_quota_is_a_priority_preemption(two_teams, recording_executor):  # noqa: F811
    from scheduler.models import JobPreemption

    t = two_teams
    t["b"].preempt_within = True
    t["b"].save()
    low = submit(t, "b", "b-low", priority=1)
    submit(t, "a", "a-1")
    submit(t, "a", "a-2")
    schedule_once()
    report_running(recording_executor)
    high = submit(t, "b", "b-high", priority=5)
    schedule_once()  # b-low is demoted, then reclaimed for b-high: the cluster is full
    low.refresh_from_db()
    high.refresh_from_db()
    assert low.status == JobStatus.PREEMPTED
    assert not JobEvent.objects.filter(job=low, kind=EventKind.DEMOTED).exists()  # preempted: not listed
    assert high.nominated_nodes
    record = JobPreemption.objects.get(job=low)
    assert record.kind == JobPreemption.Kind.PRIORITY
    event = JobEvent.objects.get(job=low, kind=EventKind.PREEMPTED)
    assert event.code == "preempted_within_quota"
    assert "higher-priority job of the same quota" in event.reason


def test_a_run_begun_after_starving_keeps_its_gpus_for_the_starved_minimum_runtime(two_teams,  # noqa: F811
                                                                                  recording_executor):
    """starved_min_runtime_s in the live loop: a borrower whose queue time is older than the guard when
    it starts is not reclaimed by the owners' next job, which waits with a reason naming when; with
    the setting back at 0 the same borrower is reclaimed at once."""
    from datetime import timedelta

    t = two_teams
    policy = PoolPolicy.objects.create(resource_type="general", starvation_s=60, starved_min_runtime_s=3600)
    b_own = submit(t, "b", "b-own")
    borrower = submit(t, "b", "b-borrow", idle="only")
    Job.objects.filter(pk=borrower.pk).update(queue_time=timezone.now() - timedelta(hours=2))  # waited 2 h
    schedule_once()
    report_running(recording_executor)
    borrower.refresh_from_db()
    assert (borrower.status, borrower.in_quota) == (JobStatus.RUNNING, False)
    a_first, a_second = submit(t, "a", "a-first"), submit(t, "a", "a-second")
    schedule_once()  # a-first takes the free node; a-second would need the borrower's
    for job in (b_own, borrower, a_first, a_second):
        job.refresh_from_db()
    assert a_first.status in (JobStatus.ENV_PREPARING, JobStatus.RUNNING)
    assert borrower.status == JobStatus.RUNNING
    assert a_second.status == JobStatus.QUEUING and not a_second.nominated_nodes
    assert "until idle jobs have run their minimum runtime" in a_second.waiting_reason
    policy.starved_min_runtime_s = 0
    policy.save()
    schedule_once()
    borrower.refresh_from_db()
    a_second.refresh_from_db()
    assert borrower.status == JobStatus.PREEMPTED
    assert a_second.nominated_nodes
