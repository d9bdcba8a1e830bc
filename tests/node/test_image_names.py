"""Image names are checked at submission (a reference grammar), refused at the `image` field with
the reason; the node puts the operator's registry in front of a name that names none."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.image_names import image_reference_problem, qualified
from scheduler.models import Job
from tests.factories import World

VALID = [
    "ubuntu", "ubuntu:22.04", "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", "docker.io/library/python:3.12",
    "registry.example.com:5000/team/train:v2", "localhost/tidepool-pod:0.1", "localhost:5000/a/b/c",
    "my_org/my__repo-name.x", "nvcr.io/nvidia/pytorch:24.05-py3", "quay.io/x/y@sha256:" + "a" * 64,
    "ghcr.io/x/y:v1@sha256:" + "0123456789abcdef" * 4, "a:_tag",
]
INVALID = {
    "Ubuntu": "lowercase",
    "ubuntu:22.04 ": "spaces",
    "python 3": "spaces",
    "ubuntu:": "malformed tag",
    "ubuntu:-x": "malformed tag",
    "ubuntu:" + "x" * 129: "malformed tag",
    "team//train": "malformed repository part",
    "team/train-": "malformed repository part",
    "/train": "malformed repository part",
    "registry.example.com:99999/x": "port 99999",
    "reg_istry.com/x": "malformed registry",
    "x@sha256:abc": "malformed digest",
    "x@sha256:" + "a" * 40: "64 hex digits",
    "x@" + "a" * 64: "malformed digest",
    ":latest": "names no repository",
}


@pytest.mark.parametrize("reference", VALID)
def test_valid_references_pass(reference: str) -> None:
    assert image_reference_problem(reference) is None


@pytest.mark.parametrize(("reference", "why"), INVALID.items())
def test_invalid_references_say_what_is_wrong(reference: str, why: str) -> None:
    problem = image_reference_problem(reference)
    assert problem is not None and why in problem, problem


def test_the_operators_registry_goes_in_front_of_a_name_that_names_none() -> None:
    assert qualified("team/train:v2", "registry.example.com:5000") == "registry.example.com:5000/team/train:v2"
    assert qualified("quay.io/team/train:v2", "registry.example.com") == "quay.io/team/train:v2"
    assert qualified("localhost/tidepool-pod:1", "registry.example.com") == "localhost/tidepool-pod:1"
    assert qualified("train", "") == "train"


def submission(**overrides):
    body = {"name": "resnet", "workspace": "vision", "quota": "team-vision", "command": "python train.py",
            "roles": [{"name": "worker", "pod_count": 1, "gpus": 1}]}
    body.update(overrides)
    return body


@pytest.mark.django_db
def test_a_malformed_image_is_refused_at_submission_naming_the_field(world: World, alice_client: Client) -> None:
    response = alice_client.post("/api/v1/jobs/", submission(image="PyTorch/PyTorch:latest"),
                                 content_type="application/json")
    assert response.status_code == 400, response.content
    assert "lowercase" in str(response.json()["image"])
    assert Job.objects.count() == 0
    accepted = alice_client.post("/api/v1/jobs/", submission(image="pytorch/pytorch:2.3.1"),
                                 content_type="application/json")
    assert accepted.status_code == 201, accepted.content
    assert Job.objects.get().image == "pytorch/pytorch:2.3.1"
