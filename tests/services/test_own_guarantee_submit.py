"""DESIGN §2, "a guarantee given to a child is the child's", at submission and through the live loop.

In the test world the root quota `general` (16 A100) gives its whole min to team-vision (8),
team-language (6) and team-shared (2): it keeps nothing for jobs submitted to it. So such a job can
only borrow: with idle resources off it can never run and is refused, naming the fix; with idle
resources allowed it runs Not in Quota, and bob's team takes its guarantee back from it. The demo's
roots keep nothing either; seed_cluster's root keeps all but team-vision's node for every team.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command

from scheduler.demo import seed_demo
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, JobEvent, JobRole, ResourceQuota, Workspace
from scheduler.selectors import quota_tree
from scheduler.services.jobs import job_submit
from scheduler.services.lifecycle import pod_exited, pod_running
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus
from tests.factories import World

EIGHT = {"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 8, "cpu": 8, "memory_gib": 64}


def counts() -> tuple[int, int, int]:
    return Job.objects.count(), JobRole.objects.count(), JobEvent.objects.count()


def submit(world: World, quota: Any, **changes: Any) -> Job:
    fields = {"user": world.alice, "workspace": world.vision, "quota": quota, "name": "job", "command": "train",
              "roles": [EIGHT], **changes}
    return job_submit(**fields)


@pytest.mark.django_db
def test_gpu_job_to_a_root_that_keeps_nothing_is_refused_with_idle_off(world: World) -> None:
    before = counts()
    with pytest.raises(ValidationError) as caught:
        submit(world, world.general, roles=[{**EIGHT, "gpus": 1}])
    message = " ".join(caught.value.message_dict["quota"])
    assert "quota general keeps no A100 for its own jobs" in message
    assert "its whole min is its child quotas' guarantee (team-language, team-shared, team-vision)" in message
    assert "submit it to a child quota, ask for less, or allow idle resources" in message
    assert counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("idle_mode", ["acceptable", "only"])
def test_a_job_that_may_borrow_is_accepted_by_that_root(world: World, idle_mode: str) -> None:
    job = submit(world, world.general, idle_mode=idle_mode, roles=[{**EIGHT, "pod_count": 2}])
    assert job.status == JobStatus.QUEUING and job.quota == world.general


@pytest.mark.django_db
def test_a_parent_with_a_remainder_runs_its_own_jobs_within_it(world: World) -> None:
    # team-shared (2) gets a child of 1 A100: it keeps 1 for its own jobs, with CPU and memory to spare.
    quota_create(name="shared-sub", parent=world.team_shared, min_gpus={"A100": 1}, min_cpu=4, min_memory_gib=32)
    small = {**EIGHT, "gpus": 1}
    assert submit(world, world.team_shared, name="fits", roles=[small]).pk
    with pytest.raises(ValidationError) as caught:
        submit(world, world.team_shared, name="too-big", roles=[{**small, "gpus": 2}])
    message = " ".join(caught.value.message_dict["quota"])
    assert "the job needs 2 A100 in all; quota team-shared keeps only 1 A100 for its own jobs" in message
    assert "(shared-sub)" in message and "submit it to a child quota" in message


@pytest.mark.django_db
def test_over_a_max_is_refused_whatever_the_idle_mode(world: World) -> None:
    world.team_vision.max_gpus = {"A100": 8}
    world.team_vision.save()
    with pytest.raises(ValidationError) as caught:
        submit(world, world.team_vision, idle_mode="acceptable", roles=[{**EIGHT, "pod_count": 2}])
    message = " ".join(caught.value.message_dict["quota"])
    assert "the job needs 16 A100 in all; quota team-vision has a max of 8" in message


def run_reported(executor: Any) -> None:
    for pod_id, attempt in list(executor.launched):
        pod_running(pod_id=pod_id, attempt=attempt)


@pytest.mark.django_db(transaction=True)
def test_a_job_of_general_cannot_keep_bob_s_team_from_its_guarantee(world: World, recording_executor) -> None:
    # alice's 16-GPU job of `general` takes both nodes, but only on idle resources.
    big = submit(world, world.general, name="general-big", idle_mode="acceptable", fault_tolerance=True,
                 roles=[{**EIGHT, "pod_count": 2}])
    schedule_once()
    run_reported(recording_executor)
    big.refresh_from_db()
    assert (big.status, big.in_quota) == (JobStatus.RUNNING, False)

    # bob asks for team-language's 6 GPUs, idle resources off: the borrower is reclaimed for him.
    bob_job = job_submit(user=world.bob, workspace=world.language, quota=world.team_language, name="bert",
                         command="train", roles=[{**EIGHT, "gpus": 6}])
    schedule_once()
    big.refresh_from_db()
    bob_job.refresh_from_db()
    assert big.status == JobStatus.PREEMPTED
    assert big.events.get(kind="preempted").reason == "reclaimed for a queued job of quota team-language"
    assert bob_job.status == JobStatus.QUEUING and bob_job.nominated_nodes

    for pod in big.pods.filter(status__in=["Pending", "Running"]):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome="preempted")
    schedule_once()
    run_reported(recording_executor)
    bob_job.refresh_from_db()
    assert (bob_job.status, bob_job.in_quota) == (JobStatus.RUNNING, True)


@pytest.mark.django_db
def test_the_demo_s_roots_keep_nothing_so_their_jobs_only_borrow() -> None:
    seed_demo()
    rooms = {usage.quota.name: usage.room for usage in quota_tree()}
    assert rooms["general"].keeps_nothing and rooms["lingjun"].keeps_nothing
    assert rooms["team-vision"].most == {"A100": 16} and rooms["lj-language"].most == {"H800": 6}
    alice = get_user_model().objects.get(username="alice")
    fields = {"user": alice, "workspace": Workspace.objects.get(name="vision"),
              "quota": ResourceQuota.objects.get(name="general"), "command": "train", "roles": [EIGHT]}
    with pytest.raises(ValidationError, match="quota general keeps no A100 for its own jobs"):
        job_submit(name="in-quota", **fields)
    assert job_submit(name="borrows", idle_mode="acceptable", **fields).pk


@pytest.mark.django_db
def test_seed_cluster_s_root_keeps_all_but_team_vision_s_node_for_every_team() -> None:
    call_command("seed_cluster", nodes=3, gpus=4, stdout=io.StringIO())
    rooms = {usage.quota.name: usage.room for usage in quota_tree()}
    assert rooms["general"].most == {"A100": 8} and rooms["general"].beside_children
    assert rooms["team-vision"].most == {"A100": 4}
    assert rooms["team-language"].keeps_nothing and rooms["team-research"].keeps_nothing
