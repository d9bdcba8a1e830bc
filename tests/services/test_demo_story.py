"""The README's story, as alice can see it (issue 25): after `bin/start` (seed_demo --sample-jobs) the
borrower research-sweep runs on idle GPUs in a workspace of hers; she submits an 8-GPU job to
team-vision and sees, in her own job list, the borrower reclaimed for it. Through the services and the
scheduling cycle, with a recording executor instead of pod processes."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, ResourceQuota, Workspace
from scheduler.selectors.access import user_quotas, user_workspaces, visible_jobs
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import pod_running
from scheduler.states import JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def report_running(executor) -> None:
    for pod_id, attempt in list(executor.launched):
        pod_running(pod_id=pod_id, attempt=attempt)


def test_alice_sees_the_borrower_reclaimed_for_her_job(recording_executor) -> None:
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", "--sample-jobs", stdout=quiet)
    schedule_once()
    report_running(recording_executor)
    alice = get_user_model().objects.get(username="alice")
    mine = visible_jobs(user=alice)
    borrower = mine.get(name="research-sweep")  # "the borrower": in alice's job list
    assert (borrower.status, borrower.in_quota, borrower.total_gpus) == (JobStatus.RUNNING, False, 16)
    assert borrower.quota.name == "team-research"

    # "Log in as alice and submit an 8-GPU job to team-vision (it has 8 of its 16 left)".
    vision = Workspace.objects.get(name="vision")
    team_vision = ResourceQuota.objects.get(name="team-vision")
    assert vision in user_workspaces(user=alice) and team_vision in user_quotas(user=alice)
    mine_8 = job_submit(user=alice, workspace=vision, quota=team_vision, name="alice-8", command="train",
                        roles=[{"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 8}])
    schedule_once()

    borrower = visible_jobs(user=alice).get(pk=borrower.pk)
    assert borrower.status == JobStatus.PREEMPTED
    event = borrower.events.get(kind="preempted")
    assert event.reason == "reclaimed for a queued job of quota team-vision"
    mine_8 = Job.objects.get(pk=mine_8.pk)
    assert mine_8.status == JobStatus.QUEUING and mine_8.nominated_nodes  # runs once the borrower has exited
