"""The submission form: every field reaches the service, errors land at their field, nothing is
saved on error, a replayed POST creates one job, and Clone fills the form."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from console.models import SubmissionToken
from scheduler.models import Job, JobEvent, JobRole
from scheduler.paths import workspace_data_root
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db

URL = "/jobs/new/"


def form_data(world: World, **overrides: Any) -> dict[str, Any]:
    data = {
        "token": str(uuid.uuid4()),
        "name": "bert-large",
        "workspace": world.vision.pk,
        "job_type": "pytorch",
        "image": "pytorch/pytorch:2.4.0",
        "command": "python train.py --epochs 3",
        "environment": "NCCL_DEBUG=INFO\n# a comment\nLR = 0.1\n",
        "data_mount": "data/imagenet",  # relative: inside the workspace's data root
        "code_mount": "code",
        "quota": world.team_vision.pk,
        "priority": "5",
        "idle_mode": "acceptable",
        "max_running_minutes": "90",
        "fault_tolerance": "on",
        "max_restarts": "4",
        "checkpoint_dir": "ckpt/bert",
        "roles-TOTAL_FORMS": "2",
        "roles-INITIAL_FORMS": "0",
        "roles-MIN_NUM_FORMS": "1",
        "roles-MAX_NUM_FORMS": "8",
        "roles-0-name": "master",
        "roles-0-pod_count": "1",
        "roles-0-gpu_type": "A100",
        "roles-0-gpus": "2",
        "roles-0-cpu": "8",
        "roles-0-memory_gib": "64",
        "roles-0-shared_memory_gib": "16",
        "roles-1-name": "worker",
        "roles-1-pod_count": "2",
        "roles-1-gpu_type": "",
        "roles-1-gpus": "4",
        "roles-1-cpu": "16",
        "roles-1-memory_gib": "128",
        "roles-1-shared_memory_gib": "32",
    }
    data.update({key: value for key, value in overrides.items()})
    return data


def counts() -> tuple[int, int, int, int]:
    return Job.objects.count(), JobRole.objects.count(), JobEvent.objects.count(), SubmissionToken.objects.count()


def test_form_offers_the_workspaces_quotas_with_free_and_total(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 3}], running_on=world.gpu1)
    html = alice_client.get(URL).content.decode()
    assert "team-vision" in html and "team-shared" in html
    assert "team-language" not in html
    assert "<strong>5</strong> free / 8 GPUs" in html  # team-vision: 3 of 8 used In Quota
    assert 'name="token"' in html
    for label in ("PyTorch", "TensorFlow", "MPI", "XGBoost", "Ray", "Custom"):
        assert label in html
    assert "Idle Resources Only" in html and "enable checkpointing" in html


def test_submit_creates_the_job_with_every_field(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, form_data(world))
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("console:job_detail", args=[job.pk])
    assert (job.name, job.workspace, job.quota, job.owner) == ("bert-large", world.vision, world.team_vision,
                                                               world.alice)
    assert (job.job_type, job.image, job.command) == ("pytorch", "pytorch/pytorch:2.4.0", "python train.py --epochs 3")
    assert job.environment == {"NCCL_DEBUG": "INFO", "LR": "0.1"}
    root = workspace_data_root("vision")
    assert (job.data_mount, job.code_mount, job.checkpoint_dir) == (
        str(root / "data/imagenet"), str(root / "code"), str(root / "ckpt/bert"))
    assert (job.priority, job.idle_mode, job.max_running_minutes) == (5, "acceptable", 90)
    assert (job.fault_tolerance, job.max_restarts) == (True, 4)
    roles = [(r.name, r.pod_count, r.gpu_type, r.gpus, float(r.cpu), float(r.memory_gib), float(r.shared_memory_gib))
             for r in job.roles.all()]
    assert roles == [("master", 1, "A100", 2, 8.0, 64.0, 16.0), ("worker", 2, "", 4, 16.0, 128.0, 32.0)]
    assert job.status == "Queuing"


def test_replayed_post_creates_one_job(world: World, alice_client: Client) -> None:
    data = form_data(world)
    first = alice_client.post(URL, data)
    second = alice_client.post(URL, data)
    assert Job.objects.count() == 1
    assert first["Location"] == second["Location"]


def test_token_of_another_user_is_not_reused(world: World, alice_client: Client, staff_client: Client) -> None:
    data = form_data(world)
    alice_client.post(URL, data)
    response = staff_client.post(URL, data)
    assert response.status_code == 409
    assert "already submitted" in response.content.decode()
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": "Bert Large!"}, "name", "lowercase letters"),
        ({"name": ""}, "name", "required"),
        ({"command": "  "}, "command", "required"),
        ({"priority": "12"}, "priority", "Select a valid choice"),
        ({"environment": "NOT A PAIR"}, "environment", "is not KEY=value"),
        ({"environment": "1BAD=x"}, "environment", "not a valid environment variable name"),
        ({"max_running_minutes": "0"}, "max_running_minutes", "greater than or equal to 1"),
        ({"max_restarts": "-1"}, "max_restarts", "greater than or equal to 0"),
        ({"idle_mode": "sometimes"}, "idle_mode", "Select a valid choice"),
        ({"job_type": "caffe"}, "job_type", "Select a valid choice"),
    ],
)
def test_bad_input_shows_the_error_at_the_field_and_saves_nothing(
    world: World, alice_client: Client, overrides: dict[str, str], field: str, message: str
) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, **overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert message in response.content.decode().replace("&#x27;", "'")
    assert 'class="field has-error' in response.content.decode()
    assert counts() == before


def test_quota_of_another_workspace_is_refused_at_the_quota(world: World, alice_client: Client) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, quota=world.team_language.pk))
    assert response.status_code == 400
    assert "quota" in response.context["form"].errors
    assert counts() == before


def test_service_refusal_lands_at_the_quota_field(world: World, staff_client: Client) -> None:
    # Staff may use every workspace and quota, so only the service knows team-vision is not language's.
    before = counts()
    response = staff_client.post(URL, form_data(world, workspace=world.language.pk))
    assert response.status_code == 400
    assert "not associated with workspace language" in " ".join(response.context["form"].errors["quota"])
    assert counts() == before


def test_role_errors_land_at_the_role_field(world: World, alice_client: Client) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, **{"roles-1-pod_count": "0", "roles-0-cpu": "lots"}))
    assert response.status_code == 400
    formset = response.context["formset"]
    assert "pod_count" in formset.forms[1].errors
    assert "cpu" in formset.forms[0].errors
    assert counts() == before


def test_pod_larger_than_any_node_is_refused_at_its_roles_gpus(world: World, alice_client: Client) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, **{"roles-1-gpus": "16"}))
    assert response.status_code == 400
    formset = response.context["formset"]
    assert formset.forms[1].errors["gpus"] == ["no general node has 16 GPUs; the largest has 8"]
    assert not formset.forms[0].errors and not response.context["role_errors"]
    html = response.content.decode()
    field = html[html.index('<div class="field has-error" id="field-roles-1-gpus"'):]
    assert "no general node has 16 GPUs; the largest has 8" in field[: field.index("</div>\n</div>")]
    assert counts() == before


def test_node_size_error_shows_at_its_field_together_with_another_fields_error(
    world: World, alice_client: Client
) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, name="Bert Large!", **{"roles-0-cpu": "500"}))
    assert response.status_code == 400
    assert "lowercase letters" in " ".join(response.context["form"].errors["name"])
    cpu = response.context["formset"].forms[0].errors["cpu"]
    assert cpu == ["no general node with 2 A100 has 500 CPU cores; the largest has 96"], cpu
    html = response.content.decode()
    assert 'class="field has-error" id="field-name"' in html
    assert 'class="field has-error" id="field-roles-0-cpu"' in html
    assert counts() == before


def test_node_size_error_of_a_role_beside_another_roles_bad_field(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, form_data(world, **{"roles-0-cpu": "lots", "roles-1-memory_gib": "4000"}))
    assert response.status_code == 400
    formset = response.context["formset"]
    assert "cpu" in formset.forms[0].errors
    assert formset.forms[1].errors["memory_gib"] == [
        "no general node with 4 GPUs has 4000 GiB memory; the largest has 768"
    ], formset.forms[1].errors
    assert Job.objects.count() == 0


def test_duplicate_role_names_are_refused(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, form_data(world, **{"roles-1-name": "master"}))
    assert response.status_code == 400
    assert "appears twice" in " ".join(response.context["role_errors"])
    assert Job.objects.count() == 0


def test_a_corrected_form_submits_once_with_the_same_token(world: World, alice_client: Client) -> None:
    data = form_data(world, name="Bad!")
    response = alice_client.post(URL, data)
    assert response.status_code == 400
    assert data["token"] in response.content.decode()  # the token survives the error
    data["name"] = "good-name"
    assert alice_client.post(URL, data).status_code == 302
    assert alice_client.post(URL, data).status_code == 302
    assert list(Job.objects.values_list("name", flat=True)) == ["good-name"]


def test_clone_fills_the_form_from_a_job(world: World, alice_client: Client) -> None:
    alice_client.post(URL, form_data(world))
    job = Job.objects.get()
    response = alice_client.get(f"{URL}?clone={job.pk}")
    form = response.context["form"]
    assert form.initial["name"] == "bert-large-clone"
    assert form.initial["command"] == job.command
    assert form.initial["quota"] == world.team_vision.pk
    assert form.initial["idle_mode"] == "acceptable"
    assert form.initial["environment"] == "LR=0.1\nNCCL_DEBUG=INFO"
    roles = [f.initial for f in response.context["formset"].forms]
    assert [(r["name"], r["pod_count"], r["gpus"]) for r in roles] == [("master", 1, 2), ("worker", 2, 4)]
    html = response.content.decode()
    assert 'value="bert-large-clone"' in html and "Clone bert-large" in html
