"""Paths and query parameters of /api/v1/ that are not the API's (issue 25): an unknown path is a JSON
404 (never Django's HTML page, which with DEBUG lists every URL pattern); an on/off or enum parameter
with another value is a 400 naming it and what it takes; a clone's name follows the job name rule."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from scheduler.models import Job
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db

UNKNOWN = ["/api/v1/", "/api/v1/nope/", "/api/v1/jobs/abc/", "/api/v1/jobs/1/nope/", "/api/v1/a/b/c/",
           "/api/v1/jobs/%C2%B2/", "/api/v1/quotas/1/stop/"]


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "production"])
@pytest.mark.parametrize("path", UNKNOWN)
def test_an_unknown_path_is_a_json_404(world: World, alice_client: Client, settings, path: str, debug: bool) -> None:
    settings.DEBUG = debug
    for response in (alice_client.get(path), alice_client.post(path, "{}", content_type="application/json"),
                     Client().get(path)):
        assert response.status_code == 404, (path, response.status_code)
        assert response["Content-Type"] == "application/json"
        assert "/api/v1/docs/" in response.json()["detail"]


def test_a_path_without_its_slash_still_redirects_to_it(world: World, alice_client: Client) -> None:
    response = alice_client.get("/api/v1/jobs")
    assert response.status_code == 301 and response["Location"] == "/api/v1/jobs/"
    assert alice_client.get("/api/v1/nope", follow=True).json()["detail"].startswith("/api/v1/nope/ is no path")


def test_a_missing_job_is_still_the_views_404_and_the_old_api_still_410(world: World, alice_client: Client) -> None:
    missing = alice_client.get("/api/v1/jobs/999999/")
    assert missing.status_code == 404 and "is no path" not in missing.json()["detail"]
    assert alice_client.get("/api/jobs/").status_code == 410


@pytest.mark.parametrize(("url", "param", "accepted"), [
    ("/api/v1/jobs/?mine=AAA", "mine", "1 (on) or 0 (off)"),
    ("/api/v1/jobs/?mine=2", "mine", "1 (on) or 0 (off)"),
    ("/api/v1/jobs/?mine=true", "mine", "1 (on) or 0 (off)"),
    ("/api/v1/jobs/?idle_mode=sometimes", "idle_mode", "off, acceptable, only"),
    ("/api/v1/jobs/?status=Runing", "status", "Running"),
    ("/api/v1/jobs/?sort=size", "sort", "-submitted"),
    ("/api/v1/jobs/{job}/logs/?follow=maybe", "follow", "1 (on) or 0 (off)"),
    ("/api/v1/jobs/watch/?job=%C2%B2", "job", "job id"),
    ("/api/v1/jobs/watch/?status=bogus", "status", "active"),
])
def test_a_parameter_outside_its_values_is_400_naming_it(world: World, alice_client: Client, url: str, param: str,
                                                         accepted: str) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    response = alice_client.get(url.format(job=job.pk))
    assert response.status_code == 400, (url, response.status_code)
    message = " ".join(response.json()[param])
    assert accepted in message, message


def test_flags_take_their_documented_values(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, owner=world.alice, name="mine")
    JobFactory(workspace=world.vision, quota=world.team_vision, owner=world.bob, name="theirs")
    names = {value: [j["name"] for j in alice_client.get(f"/api/v1/jobs/?mine={value}").json()["results"]]
             for value in ("1", "0", "")}
    assert names["1"] == ["mine"]
    assert sorted(names["0"]) == sorted(names[""]) == ["mine", "theirs"]
    assert alice_client.get("/api/v1/jobs/?idle_mode=off").status_code == 200


@pytest.mark.parametrize("name", ["", "   ", 5, None, "Not A Name"])
def test_a_clone_name_follows_the_job_name_rule(world: World, alice_client: Client, name) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, owner=world.alice, name="bert")
    response = alice_client.post(f"/api/v1/jobs/{job.pk}/clone/", json.dumps({"name": name}),
                                 content_type="application/json")
    assert response.status_code == 400, (name, response.status_code, response.content[:200])
    assert "name" in response.json()
    assert Job.objects.count() == 1


def test_a_clone_without_a_name_is_named_after_its_job(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, owner=world.alice, name="bert")
    response = alice_client.post(f"/api/v1/jobs/{job.pk}/clone/", "{}", content_type="application/json")
    assert response.status_code == 201 and response.json()["name"] == "bert-clone"
