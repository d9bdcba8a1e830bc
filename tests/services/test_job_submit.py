"""Submission invariants: priority, pod counts, resources, pool fit, workspace association."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from scheduler.models import Job, JobEvent, JobRole, Workspace
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    for i in (1, 2):
        node_register(name=f"gpu-{i}", gpu_type="A100", gpu_count=8, cpu=96, memory_gib=768)
    node_register(name="lj-1", resource_type="lingjun", gpu_type="H800", gpu_count=8, cpu=128, memory_gib=1024)
    vision = Workspace.objects.create(name="vision")
    other = Workspace.objects.create(name="other")
    alice = get_user_model().objects.create_user("alice", password="pw")
    vision.members.add(alice)
    root = quota_create(name="root", min_gpus={"A100": 16}, min_cpu=192, min_memory_gib=1536, workspaces=[vision])
    team = quota_create(name="team-a", parent=root, min_gpus={"A100": 8}, workspaces=[vision])
    lingjun = quota_create(name="lj", resource_type="lingjun", min_gpus={"H800": 8}, workspaces=[vision])
    foreign = quota_create(name="team-b", parent=root, min_gpus={"A100": 4}, workspaces=[other])
    return {"alice": alice, "vision": vision, "other": other, "team": team, "lingjun": lingjun, "foreign": foreign}


def submit(cluster, **overrides):
    fields = dict(
        user=cluster["alice"],
        workspace=cluster["vision"],
        quota=cluster["team"],
        name="bert-large",
        command="python train.py",
        roles=[{"name": "worker", "pod_count": 2, "gpu_type": "A100", "gpus": 4, "cpu": 8, "memory_gib": 64}],
    )
    fields.update(overrides)
    return job_submit(**fields)


def _counts() -> tuple[int, int, int]:
    return Job.objects.count(), JobRole.objects.count(), JobEvent.objects.count()


def refused(cluster, field: str, fragment: str, **overrides) -> None:
    before = _counts()
    with pytest.raises(ValidationError) as caught:
        submit(cluster, **overrides)
    messages = caught.value.message_dict
    assert field in messages, messages
    assert fragment in " ".join(messages[field]), messages[field]
    assert _counts() == before, "a refused submission wrote something"


def test_accepted_job_is_queuing_with_queue_time(cluster):
    job = submit(cluster)
    assert job.status == JobStatus.QUEUING and job.queue_time is not None
    assert [(r.name, r.pod_count, r.gpus) for r in job.roles.all()] == [("worker", 2, 4)]
    assert job.checkpoint_dir.endswith(str(job.uid))  # never the id: ids come back after a reset
    assert list(job.events.values_list("kind", flat=True)) == ["submitted", "queued"]


@pytest.mark.parametrize("priority", [0, 10, "high"])
def test_priority_1_to_9(cluster, priority):
    refused(cluster, "priority", "1 to 9", priority=priority)


def test_pod_count_at_least_one(cluster):
    refused(cluster, "roles[0].pod_count", "at least 1", roles=[{"name": "worker", "pod_count": 0, "gpus": 1}])


@pytest.mark.parametrize("resource", ["gpus", "cpu", "memory_gib", "shared_memory_gib"])
def test_no_negative_resources(cluster, resource):
    role = {"name": "worker", "pod_count": 1, "gpus": 1, resource: -1}
    refused(cluster, f"roles[0].{resource}", "cannot be negative", roles=[role])


def test_pod_must_fit_some_node_of_the_pool(cluster):
    role = {"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 16}
    refused(cluster, "roles[0].gpus", "no general node has 16 A100; the largest has 8", roles=[role])


def test_every_role_too_large_is_refused_at_its_field_beside_other_errors(cluster):
    roles = [{"name": "master", "pod_count": 1, "gpus": 1, "memory_gib": 5000},
             {"name": "worker", "pod_count": 1, "gpus": 16}]
    with pytest.raises(ValidationError) as caught:
        submit(cluster, roles=roles, command=" ", checkpoint_dir="/etc")
    messages = caught.value.message_dict
    assert set(messages) >= {"command", "checkpoint_dir", "roles[0].memory_gib", "roles[1].gpus"}, messages
    assert "the largest has 8" in messages["roles[1].gpus"][0]


def test_roles_that_fit_alone_but_not_together_are_refused_for_the_roles(cluster):
    roles = [{"name": "a", "pod_count": 2, "gpus": 8}, {"name": "b", "pod_count": 2, "gpus": 8}]
    refused(cluster, "roles", "cannot hold all 4 pods", roles=roles)


def test_pod_cpu_must_fit_some_node(cluster):
    role = {"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 500}
    refused(cluster, "roles[0].cpu", "CPU", roles=[role])


def test_lingjun_gpus_not_in_general_quota(cluster):
    role = {"name": "worker", "pod_count": 1, "gpu_type": "H800", "gpus": 8}
    refused(cluster, "roles[0].gpu_type", "H800", roles=[role])
    job = submit(cluster, quota=cluster["lingjun"], roles=[role])
    assert job.quota.resource_type == "lingjun"


def test_quota_must_be_associated_with_workspace(cluster):
    refused(cluster, "quota", "not associated with workspace vision", quota=cluster["foreign"])


def test_user_must_be_member_of_workspace(cluster):
    refused(cluster, "workspace", "not a member of workspace other", workspace=cluster["other"])


def test_idle_mode_and_name(cluster):
    refused(cluster, "idle_mode", "off, acceptable or only", idle_mode="sometimes")
    refused(cluster, "name", "lowercase", name="Bad Name!")
