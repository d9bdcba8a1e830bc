"""The console's API pages: personal tokens (created, listed by prefix, revoked; stored hashed), and
a job page's "Copy as CLI / YAML" and GPU chart."""

from __future__ import annotations

import hashlib
import re
import shlex

import pytest
import yaml
from django.test import Client

from scheduler.models import ApiToken, Job
from scheduler.services.gpu_samples import gpu_samples_record
from scheduler.services.tokens import token_create
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db


def test_create_list_revoke_a_token(world: World, alice_client: Client) -> None:
    page = alice_client.post("/tokens/", {"name": "laptop", "expires_days": "30"})
    assert page.status_code == 200
    secret = re.search(r'id="new-token-secret">([^<]+)<', page.content.decode()).group(1)
    token = ApiToken.objects.get()
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest() and secret not in str(token.__dict__)
    assert token.expires_at is not None and token.user == world.alice
    listed = alice_client.get("/tokens/").content.decode()
    assert token.prefix in listed and secret not in listed  # the secret is shown once only
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/me/").json()["username"] == "alice"

    bob = Client()
    bob.force_login(world.bob)
    bob.post(f"/tokens/{token.pk}/revoke/")
    assert ApiToken.objects.get().revoked_at is None  # not bob's to revoke
    alice_client.post(f"/tokens/{token.pk}/revoke/")
    assert ApiToken.objects.get().revoked_at is not None
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/me/").status_code == 401
    assert "revoked" in alice_client.get("/tokens/").content.decode()


def test_token_form_names_the_field(world: World, alice_client: Client) -> None:
    page = alice_client.post("/tokens/", {"name": "  "})
    assert page.status_code == 400 and 'data-field="name"' in page.content.decode()
    assert not ApiToken.objects.exists()
    assert Client().get("/tokens/").status_code == 302  # login first


def test_tokens_page_lists_only_ones_own(world: World, alice_client: Client) -> None:
    token_create(user=world.bob, name="bobs-token")
    assert "bobs-token" not in alice_client.get("/tokens/").content.decode()


def test_job_page_copies_as_cli_and_yaml(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="copy-me", command="python train.py --lr 3e-4",
                     environment={"SEED": "7"}, roles=[{"pod_count": 2, "gpus": 4}], priority=4)
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    text = re.search(r'id="copy-yaml">([^<]+)<', page, re.S).group(1).replace("&#x27;", "'").replace("&quot;", '"')
    body = yaml.safe_load(text)
    assert body["roles"][0]["pod_count"] == 2 and body["environment"] == {"SEED": "7"} and body["priority"] == 4
    cli = re.search(r'id="copy-cli">([^<]+)<', page).group(1).replace("&#x27;", "'")
    words = shlex.split(cli)
    assert words[:2] == ["tidepool", "submit"] and words[-1] == "python train.py --lr 3e-4"
    assert words[words.index("--pods") + 1] == "2" and words[words.index("--gpus") + 1] == "4"
    from tidepool_cli.main import submission as cli_submission
    from tidepool_cli.parser import build_parser

    from_cli = cli_submission(build_parser().parse_args(words[1:]))  # the line, as `tidepool` would send it
    for key in ("name", "workspace", "quota", "command", "priority", "idle_mode", "environment"):
        assert from_cli[key] == body[key], key
    assert {k: from_cli["roles"][0][k] for k in ("pod_count", "gpus", "gpu_type", "cpu", "memory_gib")} == {
        k: body["roles"][0][k] for k in ("pod_count", "gpus", "gpu_type", "cpu", "memory_gib")}
    # The YAML is a valid submission: posting it makes a job with the same settings.
    from tests.api.v1_helpers import bearer

    created = bearer(world.alice).post("/api/v1/jobs/", body, content_type="application/json")
    assert created.status_code == 201 and Job.objects.count() == 2


def test_gpu_chart_only_with_nvml_samples(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    make_running(job, world.gpu1)
    assert 'id="gpu-figure"' not in alice_client.get(f"/jobs/{job.pk}/").content.decode()
    gpu_samples_record(node_name="gpu-01", readings=[{"index": 0, "utilization_percent": 55, "memory_used_mib": 1024,
                                                      "memory_total_mib": 81920}])
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="gpu-figure"' in page and "util %" in page


@pytest.mark.parametrize("days", ["²", "١", "x"])
def test_an_expiry_that_is_no_ascii_number_is_refused_not_a_500(alice_client, days) -> None:
    page = alice_client.post("/tokens/", {"name": "laptop", "expires_days": days})
    assert page.status_code == 400 and b"Pick an expiry from the list." in page.content
