"""Reasons keep their kind: the engine's reason code is stored on the job (`waiting_reason_code`) and
on the events it caused, and the API serves both next to the text (issue 9)."""

from __future__ import annotations

import pytest

from scheduler.loop.cycle import schedule_once
from scheduler.models import JobEvent
from scheduler.states import EventKind
from tests.services.test_scheduling_story import report_running, submit, two_teams  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_codes_on_jobs_events_and_the_api(two_teams, recording_executor, client):  # noqa: F811
    t = two_teams
    submit(t, "b", "b-own")
    borrower = submit(t, "b", "b-borrow", idle="only", fault_tolerance=True)
    schedule_once()
    report_running(recording_executor)
    # team-b is full: a second In Quota job of team-b waits with the code of a full quota.
    waiting = submit(t, "b", "b-more")
    submit(t, "a", "a-first")
    schedule_once()
    report_running(recording_executor)
    waiting.refresh_from_db()
    assert waiting.waiting_reason_code == "quota_full"
    assert "quota team-b full" in waiting.waiting_reason

    owner = submit(t, "a", "bert-large")
    schedule_once()  # reclaim: the borrower is preempted, the owner nominated
    owner.refresh_from_db()
    borrower.refresh_from_db()
    assert owner.waiting_reason_code == "waiting_for_victims"
    assert JobEvent.objects.get(job=owner, kind=EventKind.NOMINATED).code == "waiting_for_victims"
    assert borrower.waiting_reason_code == "reclaimed"
    assert JobEvent.objects.get(job=borrower, kind=EventKind.PREEMPTED).code == "reclaimed"

    client.force_login(t["ana"])
    answer = client.get(f"/api/v1/jobs/{owner.pk}/").json()
    assert answer["waiting_reason_code"] == "waiting_for_victims"
    assert {"kind": "nominated", "code": "waiting_for_victims"}.items() <= next(
        e for e in answer["events"] if e["kind"] == "nominated"
    ).items()
