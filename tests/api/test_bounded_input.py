"""Every bad input of issue 10 answers 400 with the field named, never 500 nor a hang, and creates nothing.

The rules live in scheduler/validation.py; the API's serializers, the services and the console's
forms all use them (the console's side: tests/console/test_console_bounded_input.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from scheduler import validation as v
from scheduler.models import Job, JobRole, ResourceQuota
from tests.api.v1_helpers import submission
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db

BIG = [2**31, 2**63, 10**30]


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, body if isinstance(body, str | bytes) else json.dumps(body),
                       content_type="application/json")


def refused(response: Any, field: str) -> dict[str, Any]:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    body = response.json()
    assert field in body, body
    return body


def role(**fields: Any) -> dict[str, Any]:
    return {"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 1, "memory_gib": 1, **fields}


BAD_SUBMISSIONS = [
    # integers past the model, the column or the cluster
    *[({"roles": [role(pod_count=n)]}, "roles[0].pod_count") for n in BIG],
    *[({"roles": [role(gpus=n)]}, "roles[0].gpus") for n in BIG],
    ({"roles": [role(cpu=10**12)]}, "roles[0].cpu"),
    ({"roles": [role(memory_gib=10**15)]}, "roles[0].memory_gib"),
    ({"roles": [role(shared_memory_gib="1e400")]}, "roles[0].shared_memory_gib"),
    ({"roles": [role(pod_count=-1)]}, "roles[0].pod_count"),
    ({"roles": [role(pod_count=True)]}, "roles[0].pod_count"),
    ({"roles": [role(gpus=9)]}, "roles[0].gpus"),  # more than the largest node (8 A100)
    ({"roles": [role(cpu=1000)]}, "roles[0].cpu"),
    ({"roles": [role(name="a", pod_count=300), role(name="b", pod_count=300)]}, "roles[1].pod_count"),
    ({"roles": [role(name=f"r{i}", gpus=0, cpu=0, memory_gib=0) for i in range(1000)]}, "roles"),
    ({"roles": [role(name=f"r{i}") for i in range(v.MAX_ROLES + 1)]}, "roles"),
    *[({"priority": n}, "priority") for n in [*BIG, 0, 10, "²", "١", "1\x00"]],
    *[({"max_restarts": n}, "max_restarts") for n in [*BIG, -1, "١"]],
    *[({"max_running_minutes": n}, "max_running_minutes") for n in [*BIG, 0, "²"]],
    # names: one rule (lowercase ASCII letters, digits, dashes)
    ({"name": "fzq-😀"}, "name"),
    ({"name": "a" * 101}, "name"),
    ({"name": "jo\nb"}, "name"),
    ({"name": "job\x00"}, "name"),
    ({"roles": [role(name="wörker")]}, "roles[0].name"),
    ({"roles": [role(name="Worker")]}, "roles[0].name"),
    ({"roles": [role(name="w" * 33)]}, "roles[0].name"),
    ({"roles": [role(gpu_type="A100\x00")]}, "roles[0].gpu_type"),
    # text: NUL bytes and lengths
    ({"command": "python\x00 train.py"}, "command"),
    ({"command": "x" * (v.MAX_COMMAND_CHARS + 1)}, "command"),
    ({"checkpoint_dir": "/ckpt\x00"}, "checkpoint_dir"),
    ({"image": "i" * 256}, "image"),
    ({"workspace": "vision\x00"}, "workspace"),
    ({"quota": "²"}, "quota"),
    ({"quota": str(2**70)}, "quota"),
    # environment
    ({"environment": {"FOO\n": "x"}}, "environment"),
    ({"environment": {"FO\x00O": "x"}}, "environment"),
    ({"environment": {"FOO": "x\x00"}}, "environment.FOO"),
    ({"environment": {"FOO": "x" * (v.MAX_ENV_VALUE_CHARS + 1)}}, "environment.FOO"),
    ({"environment": {f"K{i}": "x" for i in range(v.MAX_ENV_VARS + 1)}}, "environment"),
    ({"environment": {f"K{i}": "x" * 4000 for i in range(20)}}, "environment"),
    ({"environment": {"ÄRGER": "x"}}, "environment"),
    ({"environment": ["FOO=1"]}, "environment"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_SUBMISSIONS)
def test_bad_submission_is_400_at_the_field_and_creates_nothing(
    world: World, alice_client: Client, overrides: dict[str, Any], field: str
) -> None:
    started = time.monotonic()
    refused(post(alice_client, "/api/v1/jobs/", submission(**overrides)), field)
    assert time.monotonic() - started < 5  # never a hang (2³¹ pods used to be built one by one)
    assert Job.objects.count() == 0 and JobRole.objects.count() == 0


def test_pod_count_two_to_the_31_answers_at_once(world: World, alice_client: Client) -> None:
    started = time.monotonic()
    body = refused(post(alice_client, "/api/v1/jobs/", submission(roles=[role(pod_count=2**31)])), "roles[0].pod_count")
    assert time.monotonic() - started < 1.0
    assert str(v.MAX_PODS_PER_JOB) in body["roles[0].pod_count"][0]


def test_the_bounds_themselves_are_accepted(world: World, alice_client: Client) -> None:
    """The largest values the rules allow still submit: the bounds refuse only what is past them."""
    body = submission(
        name="n" * 100, priority=9, max_restarts=v.MAX_RESTARTS, max_running_minutes=v.MAX_RUNNING_MINUTES,
        command="x" * v.MAX_COMMAND_CHARS, environment={f"K{i}": "v" * 100 for i in range(v.MAX_ENV_VARS)},
        roles=[role(name="w" * 32, pod_count=2, gpus=8, cpu=96, memory_gib=768)],
    )
    response = post(alice_client, "/api/v1/jobs/", body)
    assert response.status_code == 201, response.json()


def test_json_nested_5000_deep_is_400(world: World, alice_client: Client) -> None:
    deep = "[" * 5000 + "]" * 5000
    response = post(alice_client, "/api/v1/jobs/", '{"name": "deep", "roles": ' + deep + "}")
    assert response.status_code == 400 and "nested" in response.json()["detail"]
    nested: Any = 1
    for _ in range(v.MAX_JSON_DEPTH + 1):
        nested = [nested]
    shallow_but_over = json.dumps(submission(extra=nested))
    response = post(alice_client, "/api/v1/jobs/", shallow_but_over)
    assert response.status_code == 400 and "nested" in response.json()["detail"]
    assert Job.objects.count() == 0


def test_body_past_the_cap_is_refused(world: World, alice_client: Client, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = post(alice_client, "/api/v1/jobs/", submission(command="x" * 5000))
    assert response.status_code == 413 and "larger than 4096 bytes" in response.json()["detail"]
    assert Job.objects.count() == 0


@pytest.mark.parametrize("value", ["%00", "abc%00", "x" * 200])
@pytest.mark.parametrize("param", ["q", "quota", "workspace", "status", "sort", "idle_mode"])
def test_list_filters_refuse_nul_and_absurd_lengths(world: World, alice_client: Client, param: str,
                                                     value: str) -> None:
    refused(alice_client.get(f"/api/v1/jobs/?{param}={value}"), param)


@pytest.mark.parametrize("value", ["²", "١", "%C2%B2", str(2**63), str(10**30)])
def test_non_ascii_or_huge_ids_in_filters_match_nothing(world: World, alice_client: Client, value: str) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision)
    for param in ("quota", "workspace"):
        response = alice_client.get(f"/api/v1/jobs/?{param}={value}")
        assert response.status_code == 200 and response.json()["count"] == 0


@pytest.mark.parametrize("param", ["pod", "shown", "offset", "lines"])
@pytest.mark.parametrize("value", ["²", "١", str(10**30), "-1", "%00"])
def test_log_parameters_refuse_what_is_no_id(world: World, alice_client: Client, param: str, value: str) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    refused(alice_client.get(f"/api/v1/jobs/{job.pk}/logs/?{param}={value}"), param)


@pytest.mark.parametrize("url", ["/api/v1/jobs/{}/", "/api/v1/jobs/{}/logs/", "/api/v1/quotas/{}/", "/jobs/{}/"])
def test_ids_past_64_bits_are_404(world: World, alice_client: Client, url: str) -> None:
    for value in (str(2**63), "9" * 30):
        assert alice_client.get(url.format(value)).status_code == 404
    assert alice_client.post("/api/v1/jobs/{}/stop/".format("9" * 30)).status_code == 404


def test_quota_service_refuses_what_the_api_would(world: World) -> None:
    """The services keep the rules for every caller (the console's forms, seed scripts)."""
    from django.core.exceptions import ValidationError

    from scheduler.services.quotas import quota_create

    for fields, field in [({"name": "fzq-😀"}, "name"), ({"min_gpus": {"\x00": 1}}, "min_gpus"),
                          ({"min_gpus": {"A100": 2**63}}, "min_gpus"), ({"min_cpu": "1e30"}, "min_cpu")]:
        with pytest.raises(ValidationError) as refused_error:
            quota_create(**{"name": "svc", **fields})
        assert field in refused_error.value.message_dict
    assert not ResourceQuota.objects.filter(name="svc").exists()


async def test_the_server_refuses_a_declared_oversized_body_before_reading_it(settings) -> None:
    """config/asgi.py: a Content-Length past the cap gets 413 and the app never runs nor reads."""
    from config.asgi import BodySizeLimit

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    called, sent = [], []

    async def app(scope, receive, send):
        called.append(await receive())

    async def receive():
        raise AssertionError("the body must not be read")

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/jobs/", "headers": [(b"content-length", b"4294967296")]}
    await BodySizeLimit(app)(scope, receive, send)
    assert sent[0]["status"] == 413 and not called

    chunks = [{"type": "http.request", "body": b"x" * 800, "more_body": True}] * 3

    async def chunked():
        return chunks.pop()

    await BodySizeLimit(app)({"type": "http", "headers": []}, chunked, send)
    assert called == [{"type": "http.request", "body": b"x" * 800, "more_body": True}]
    called.clear()

    async def greedy(scope, receive, send):
        called.extend([await receive(), await receive()])

    chunks[:] = [{"type": "http.request", "body": b"x" * 800, "more_body": True}] * 3
    await BodySizeLimit(greedy)({"type": "http", "headers": []}, chunked, send)
    assert called[-1] == {"type": "http.disconnect"}  # past 1024 bytes: cut off
