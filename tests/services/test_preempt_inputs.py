"""Issue 11's inputs: each bad one is refused with its field named and nothing created — through the
service, the API and the form — and the good ones are kept and shown.

- GPUs ≥ 1 per role unless the role is explicitly CPU-only;
- the grace period is 0–3600 s (empty: the cluster default);
- a job is in its quota's pool: stating another is an error;
- with idle resources off, a job larger than its quota's guarantee can never run: refused;
- a child quota is in its parent's pool; `min` CPU and memory default to the GPUs' share.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from scheduler.models import Job, JobEvent, JobRole, ResourceQuota
from scheduler.services.jobs import job_submit
from scheduler.services.quotas import quota_create
from tests.console.test_console_job_form import form_data
from tests.factories import World

pytestmark = pytest.mark.django_db

WORKER = {"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 1, "cpu": 4, "memory_gib": 16}

# (what changes in the submission, the field named in the refusal, a fragment of the message)
BAD_JOBS: list[tuple[dict[str, Any], str, str]] = [
    ({"roles": [{**WORKER, "gpus": 0}]}, "roles[0].gpus", "CPU-only"),
    ({"roles": [{**WORKER, "gpu_type": "", "gpus": 2, "cpu_only": True}]}, "roles[0].gpus", "CPU-only"),
    ({"roles": [{**WORKER, "gpus": 0, "cpu_only": True}]}, "roles[0].gpu_type", "names no GPU model"),
    ({"grace_seconds": -1}, "grace_seconds", "0–3,600"),
    ({"grace_seconds": 3601}, "grace_seconds", "0–3,600"),
    ({"resource_type": "lingjun"}, "resource_type", "general pool"),
    ({"roles": [{**WORKER, "pod_count": 2, "gpus": 8}]}, "quota", "quota team-vision guarantees 8"),
    ({"roles": [{**WORKER, "pod_count": 2, "cpu": 60}]}, "quota", "needs 120 CPU cores in all"),
]


def counts() -> tuple[int, int, int]:
    return Job.objects.count(), JobRole.objects.count(), JobEvent.objects.count()


def submit(world: World, **changes: Any) -> Job:
    fields = {"user": world.alice, "workspace": world.vision, "quota": world.team_vision, "name": "job",
              "command": "train", "roles": [WORKER], **changes}
    return job_submit(**fields)


@pytest.mark.parametrize(("changes", "field", "fragment"), BAD_JOBS)
def test_service_refuses_with_the_field_named(world: World, changes, field, fragment) -> None:
    before = counts()
    with pytest.raises(ValidationError) as caught:
        submit(world, **changes)
    assert field in caught.value.message_dict, caught.value.message_dict
    assert fragment in " ".join(caught.value.message_dict[field])
    assert counts() == before


@pytest.mark.parametrize(("changes", "field", "fragment"), BAD_JOBS)
def test_api_refuses_with_the_field_named(world: World, alice_client: Client, changes, field, fragment) -> None:
    before = counts()
    body = {"name": "job", "workspace": "vision", "quota": "team-vision", "command": "train", "roles": [WORKER],
            **changes}
    response = alice_client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert fragment in " ".join(response.json()[field])
    assert counts() == before


@pytest.mark.parametrize(
    ("overrides", "where", "fragment"),
    [
        ({"roles-0-gpus": "0", "roles-1-gpus": "1"}, "field-roles-0-gpus", "CPU-only"),
        ({"roles-0-cpu_only": "on"}, "field-roles-0-gpus", "CPU-only"),
        ({"grace_seconds": "5000"}, "field-grace_seconds", "3600"),
        ({"idle_mode": "off", "roles-1-pod_count": "2"}, "field-quota", "can never run"),
    ],
)
def test_form_shows_the_refusal_at_its_field(world: World, alice_client: Client, overrides, where, fragment) -> None:
    before = counts()
    response = alice_client.post("/jobs/new/", form_data(world, **overrides))
    assert response.status_code == 400
    html = response.content.decode()
    start = html.index(f'id="{where}"')
    block = html[start: html.find('id="field-', start + 10)]  # the field, up to the next one
    assert 'class="error"' in block and fragment in block, block
    assert counts() == before


def test_good_inputs_are_kept_and_shown(world: World, alice_client: Client, settings) -> None:
    settings.TIDEPOOL_GRACE_SECONDS = 30
    cpu = submit(world, name="cpu-prep", roles=[{"name": "prep", "cpu_only": True, "cpu": 2, "memory_gib": 4}],
                 resource_type="general", grace_seconds=45)
    role = cpu.roles.get()
    assert (role.cpu_only, role.gpus, cpu.grace_seconds) == (True, 0, 45)
    implied = submit(world, name="implied", roles=[{"name": "worker", "cpu": 1, "memory_gib": 1}])
    assert implied.roles.get().gpus == 1  # GPUs left out: 1
    big = submit(world, name="big-idle", idle_mode="acceptable", roles=[{**WORKER, "pod_count": 2, "gpus": 8}])
    assert big.pk  # larger than the quota, but idle resources may run it
    page = alice_client.get(f"/jobs/{cpu.pk}/").content.decode()
    assert 'id="grace-period">45 s' in page and "CPU only" in page
    assert '30 s <span class="sub">(cluster default)' in alice_client.get(f"/jobs/{implied.pk}/").content.decode()
    api = alice_client.get(f"/api/v1/jobs/{cpu.pk}/").json()
    assert api["grace_seconds"] == 45 and api["roles"][0]["cpu_only"] is True
    assert alice_client.get(f"/api/v1/jobs/{implied.pk}/").json()["grace_seconds"] == 30
    response = alice_client.post("/api/v1/jobs/", {"name": "via-api", "workspace": "vision", "quota": "team-vision",
                                                "command": "x", "grace_seconds": 0, "roles": [WORKER]},
                                 content_type="application/json")
    assert response.status_code == 201 and response.json()["grace_seconds"] == 0


def test_quota_pool_and_min_shares(world: World, staff_client: Client) -> None:
    before = ResourceQuota.objects.count()
    with pytest.raises(ValidationError) as caught:
        quota_create(name="lj-child", parent=world.general, resource_type="lingjun")
    assert "resource_type" in caught.value.message_dict
    assert ResourceQuota.objects.count() == before

    # Left out: the parent's pool, and CPU and memory in proportion to the GPUs (2 nodes: 12 cores
    # and 96 GiB per GPU).
    assert quota_create(name="shares", parent=world.general, min_gpus={}).resource_type == "general"
    ResourceQuota.objects.filter(name="shares").delete()
    world.team_shared.delete()
    quota_create(name="shares", parent=world.general, min_gpus={"A100": 2})
    made = ResourceQuota.objects.get(name="shares")
    assert (made.resource_type, made.min_cpu, made.min_memory_gib) == ("general", Decimal(24), Decimal(192))
    form = staff_client.get("/quotas/new/").content.decode()
    assert "Empty: in proportion to its min GPUs (General: 12 cores per GPU)" in form
    response = staff_client.post("/quotas/new/", {"name": "formed", "parent": world.general.pk, "resource_type": "",
                                                  "min_gpus_0": "", "min_cpu": "", "min_memory_gib": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ResourceQuota.objects.get(name="formed").resource_type == "general"


def test_admin_inherits_the_pool_and_shares_too(world: World, staff_client: Client) -> None:
    world.team_shared.delete()
    assert staff_client.get("/admin/scheduler/resourcequota/add/").status_code == 200
    response = staff_client.post("/admin/scheduler/resourcequota/add/", {
        "name": "admin-child", "description": "", "parent": world.general.pk, "resource_type": "",
        "min_gpus": '{"A100": 2}', "min_cpu": "", "min_memory_gib": "", "max_gpus": "", "max_cpu": "",
        "max_memory_gib": ""})
    assert response.status_code == 302, response.content.decode()[:3000]
    made = ResourceQuota.objects.get(name="admin-child")
    assert (made.resource_type, made.min_cpu, made.min_memory_gib) == ("general", Decimal(24), Decimal(192))
    response = staff_client.post("/admin/scheduler/resourcequota/add/", {
        "name": "admin-lj", "description": "", "parent": world.general.pk, "resource_type": "lingjun",
        "min_gpus": "{}", "min_cpu": "", "min_memory_gib": "", "max_gpus": "", "max_cpu": "", "max_memory_gib": ""})
    assert response.status_code == 200 and "parent&#x27;s pool" in response.content.decode()
    assert not ResourceQuota.objects.filter(name="admin-lj").exists()
