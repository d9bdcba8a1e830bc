"""DESIGN §2d in the live system: each cycle stores a pending job's start estimate (the running job's
maximum running time is its time limit), members read it where the queue position is, a pool's
default time limit applies to jobs that set none, and the stop says "time limit reached"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from test_lifecycle import run_job, team  # noqa: F401  (the fixture)

from scheduler.estimates import estimate_text, span_text, time_limit_note
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Node, PoolPolicy
from scheduler.services.jobs import job_submit
from scheduler.states import JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(team, name, **extra) -> Job:  # noqa: F811
    user, space, quota = team
    return job_submit(user=user, workspace=space, quota=quota, name=name, command="train",
                      roles=[{"name": "worker", "pod_count": 4, "gpus": 4}], **extra)


def test_a_pending_job_gets_the_running_jobs_planned_end_as_its_estimate(team, recording_executor):  # noqa: F811
    running = run_job(team, recording_executor, pods=4, max_running_minutes=130)
    waiting = _submit(team, "waiting")
    schedule_once()
    waiting.refresh_from_db()
    assert waiting.status == JobStatus.QUEUING and waiting.queue_position == 1
    planned_end = running.started_at + timedelta(minutes=130)
    assert abs((waiting.estimated_start_at - planned_end).total_seconds()) <= 1 and waiting.estimate_unknown == ""
    assert waiting.start_estimate in ("starts in about 2 h 10 min", "starts in about 2 h 9 min")


def test_a_job_past_the_first_20_of_its_pool_gets_a_rough_estimate(team, recording_executor):  # noqa: F811
    """Issue 26: the 21st waiting job is planned on the pool's aggregate capacity; it is stored with its
    kind, "rough", and read so."""
    run_job(team, recording_executor, pods=4, max_running_minutes=60)
    waiting = [_submit(team, f"w{k:02d}", max_running_minutes=60) for k in range(1, 22)]
    schedule_once()
    for job in waiting:
        job.refresh_from_db()
    assert waiting[19].estimate_unknown == "" and waiting[19].start_estimate in ("starts in about 20 h",
                                                                                 "starts in about 19 h 59 min")
    last = waiting[20]
    assert last.queue_position == 21 and last.estimate_unknown == "rough" and last.estimated_start_at is not None
    assert last.estimated_start_at.timestamp() % 300 == 0  # stored to 5 min
    assert last.start_estimate.startswith("starts in about 2") and last.start_estimate.endswith(" (rough)")


def test_without_limits_the_estimate_is_unknown_and_says_why(team, recording_executor):  # noqa: F811
    run_job(team, recording_executor, pods=4)
    waiting = _submit(team, "waiting")
    schedule_once()
    waiting.refresh_from_db()
    assert waiting.estimated_start_at is None and waiting.estimate_unknown == "no_limit"
    assert waiting.start_estimate == "unknown: depends on jobs with no time limit"


def test_the_pools_default_time_limit_stops_a_job_that_sets_none(team, recording_executor):  # noqa: F811
    PoolPolicy.objects.create(resource_type="general", default_time_limit_s=600)
    job = run_job(team, recording_executor, pods=1)
    Node.objects.update(last_heartbeat=timezone.now() + timedelta(minutes=11))  # nodes stay alive
    schedule_once(now=timezone.now() + timedelta(minutes=11))
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPING
    assert "time limit reached: 10 min (the pool's default)" in job.waiting_reason


def test_texts():
    now = timezone.now()
    assert span_text(130 * 60) == "2 h 10 min" and span_text(3 * 86400 + 4 * 3600) == "3 d 4 h" and span_text(20) == "1 min"
    assert estimate_text(now + timedelta(minutes=130), "", now) == "starts in about 2 h 10 min"
    assert estimate_text(now, "", now) == "could start now"
    assert estimate_text(None, "far_back", now) == "unknown: far back in the queue"
    assert estimate_text(now + timedelta(hours=76), "rough", now) == "starts in about 3 d 4 h (rough)"
    assert estimate_text(None, "", now) == ""
    started = now - timedelta(minutes=56)
    assert time_limit_note(started, 3600, now) == "time limit in 4 min"
    assert time_limit_note(started, 7200, now) == ""  # an hour left: not near
    assert time_limit_note(started, 3000, now) == "time limit reached"
    assert time_limit_note(None, 3600, now) == "" and time_limit_note(started, None, now) == ""
