"""A member cannot reach staff through any job setting: paths outside the workspace's data root are
refused at submission (400 naming the field, nothing created), through the API as through the service."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from scheduler.models import Job
from scheduler.paths import workspace_data_root
from tests.factories import World

pytestmark = pytest.mark.django_db


def submission(**overrides: Any) -> dict[str, Any]:
    body = {"name": "resnet", "workspace": "vision", "quota": "team-vision", "command": "python train.py",
            "roles": [{"name": "worker", "pod_count": 1, "gpus": 1}]}
    body.update(overrides)
    return body


@pytest.mark.parametrize("field", ["checkpoint_dir", "code_mount", "data_mount"])
@pytest.mark.parametrize("value", [
    "/etc", "/", str(settings.BASE_DIR), "../language", "../../pods", "/tmp/../etc/cron.d", "ok/../../../etc",
    "a\0b",
])
def test_paths_outside_the_workspace_root_are_refused(world: World, alice_client: Client, field: str,
                                                       value: str) -> None:
    response = alice_client.post("/api/v1/jobs/", submission(**{field: value}), content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert Job.objects.count() == 0


def test_paths_inside_the_workspace_root_are_kept_normalised(world: World, alice_client: Client) -> None:
    root = workspace_data_root("vision")
    response = alice_client.post("/api/v1/jobs/", submission(checkpoint_dir="runs/./bert", code_mount=str(root / "code"),
                                                          data_mount="data/../imagenet"),
                                 content_type="application/json")
    assert response.status_code == 201, response.content
    job = Job.objects.get()
    assert (job.checkpoint_dir, job.code_mount, job.data_mount) == (
        str(root / "runs/bert"), str(root / "code"), str(root / "imagenet"))


def test_the_default_checkpoint_directory_is_the_jobs_uid_never_its_id(world: World, alice_client: Client) -> None:
    first = alice_client.post("/api/v1/jobs/", submission(), content_type="application/json").json()
    job = Job.objects.get(pk=first["id"])
    assert job.checkpoint_dir.endswith(str(job.uid)) and f"job-{job.pk}" not in job.checkpoint_dir


def test_the_node_derives_the_default_checkpoint_directory_from_its_own_root(world: World, alice_client: Client,
                                                                            settings) -> None:
    from scheduler.node.specs import checkpoint_dir_here

    created = alice_client.post("/api/v1/jobs/", submission(), content_type="application/json").json()
    job = Job.objects.get(pk=created["id"])
    settings.TIDEPOOL_CHECKPOINT_ROOT = "/shared/checkpoints"  # this node names the root differently
    assert checkpoint_dir_here(job) == f"/shared/checkpoints/{job.uid}"
    job.checkpoint_dir = str(workspace_data_root("vision") / "runs")
    assert checkpoint_dir_here(job) == job.checkpoint_dir  # the job's own, inside its workspace root
    job.checkpoint_dir = "/etc"  # a row written around the rules (e.g. before them): refused at launch
    with pytest.raises(OSError, match="outside the data roots"):
        checkpoint_dir_here(job)
