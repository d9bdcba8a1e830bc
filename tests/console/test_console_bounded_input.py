"""The console's forms refuse issue 10's bad inputs at their field, with the rules of
scheduler/validation.py (the API's side: tests/api/test_bounded_input.py), and save nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from scheduler import validation as v
from scheduler.models import Job, ResourceQuota, Workspace
from tests.console.test_console_job_form import URL, counts, form_data
from tests.console.test_console_management import quota_data
from tests.factories import World

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "fzq-😀"}, "name"),
        ({"name": "n" * 101}, "name"),
        ({"name": "job\x00"}, "name"),
        ({"command": "python\x00"}, "command"),
        ({"command": "x" * (v.MAX_COMMAND_CHARS + 1)}, "command"),
        ({"environment": "FO\x00O=1"}, "environment"),
        ({"environment": "ÄRGER=1"}, "environment"),
        ({"environment": "\n".join(f"K{i}=1" for i in range(v.MAX_ENV_VARS + 1))}, "environment"),
        ({"environment": "FOO=" + "x" * (v.MAX_ENV_VALUE_CHARS + 1)}, "environment"),
        ({"priority": "١"}, "priority"),
        ({"priority": "²"}, "priority"),
        ({"max_restarts": "١"}, "max_restarts"),
        ({"max_restarts": str(2**31)}, "max_restarts"),
        ({"max_running_minutes": str(2**63)}, "max_running_minutes"),
        ({"max_running_minutes": "²"}, "max_running_minutes"),
        ({"checkpoint_dir": "/ckpt\x00"}, "checkpoint_dir"),
        ({"quota": "²"}, "quota"),
        ({"quota": str(2**70)}, "quota"),
    ],
)
def test_job_form_refuses_at_the_field(world: World, alice_client: Client, overrides: dict[str, str],
                                       field: str) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, **overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors, errors
    assert counts() == before


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"roles-0-pod_count": str(2**31)}, "pod_count"),
        ({"roles-0-pod_count": str(2**63)}, "pod_count"),
        ({"roles-0-pod_count": "١"}, "pod_count"),
        ({"roles-0-gpus": str(2**31)}, "gpus"),
        ({"roles-0-gpus": "²"}, "gpus"),
        ({"roles-0-cpu": "1e12"}, "cpu"),
        ({"roles-0-cpu": "١"}, "cpu"),
        ({"roles-0-memory_gib": str(10**15)}, "memory_gib"),
        ({"roles-0-name": "wörker"}, "name"),
        ({"roles-0-name": "Master"}, "name"),
    ],
)
def test_role_forms_refuse_at_the_field(world: World, alice_client: Client, overrides: dict[str, str],
                                        field: str) -> None:
    before = counts()
    started = time.monotonic()
    response = alice_client.post(URL, form_data(world, **overrides))
    assert time.monotonic() - started < 5
    assert response.status_code == 400
    errors = response.context["formset"].forms[0].errors
    assert field in errors, errors
    assert counts() == before


def test_pods_of_all_roles_together_are_bounded(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, form_data(world, **{
        "roles-0-pod_count": "300", "roles-0-gpus": "0", "roles-0-gpu_type": "", "roles-0-cpu_only": "on",
        "roles-1-pod_count": "300", "roles-1-gpus": "0", "roles-1-cpu_only": "on"}))
    assert response.status_code == 400
    assert "pod_count" in response.context["formset"].forms[1].errors
    assert Job.objects.count() == 0


def roles_data(world: World, count: int) -> dict[str, Any]:
    data = form_data(world, **{"roles-TOTAL_FORMS": str(count)})
    for i in range(2, count):
        data.update({f"roles-{i}-name": f"r{i}", f"roles-{i}-pod_count": "1", f"roles-{i}-gpus": "0",
                     f"roles-{i}-cpu": "0", f"roles-{i}-memory_gib": "0", f"roles-{i}-shared_memory_gib": "0"})
    return data


def test_more_roles_than_allowed_are_refused(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, roles_data(world, v.MAX_ROLES + 1))
    assert response.status_code == 400
    assert response.context["formset"].non_form_errors()
    assert Job.objects.count() == 0


def test_a_thousand_zero_resource_roles_are_refused(world: World, alice_client: Client) -> None:
    # 6,000 fields: past DATA_UPLOAD_MAX_NUMBER_FIELDS, Django refuses the body before the form reads it.
    response = alice_client.post(URL, roles_data(world, 1000))
    assert response.status_code == 400
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "fzq-😀"}, "name"),
        ({"name": "Team_A"}, "name"),
        ({"name": "q" * 65}, "name"),
        ({"min_gpus_0": str(2**63)}, "min_gpus"),
        ({"min_gpus_0": "١"}, "min_gpus"),
        ({"min_cpu": "1e20"}, "min_cpu"),
        ({"max_memory_gib": "²"}, "max_memory_gib"),
        ({"description": "d\x00"}, "description"),
    ],
)
def test_quota_form_refuses_at_the_field(world: World, staff_client: Client, overrides: dict[str, Any],
                                         field: str) -> None:
    before = ResourceQuota.objects.count()
    response = staff_client.post(reverse("console:quota_new"), quota_data(world, **overrides))
    assert response.status_code == 400
    assert field in response.context["form"].errors, response.context["form"].errors
    assert ResourceQuota.objects.count() == before


@pytest.mark.parametrize("name", ["fzq-😀", "Research", "re_search"])
def test_workspace_names_follow_the_same_rule(world: World, staff_client: Client, name: str) -> None:
    response = staff_client.post(reverse("console:workspace_new"), {"name": name, "description": ""})
    assert response.status_code in (200, 400)
    assert "name" in response.context["form"].errors
    assert not Workspace.objects.filter(name=name).exists()


@pytest.mark.parametrize("query", ["quota=²", "quota=١", f"workspace={2**70}", "page=²", f"page={10**30}",
                                   "q=%00", "status=%00"])
def test_job_list_ignores_malformed_filters(world: World, alice_client: Client, query: str) -> None:
    assert alice_client.get(f"/jobs/?{query}").status_code == 200


@pytest.mark.parametrize("clone", ["²", "١", str(2**70)])
def test_clone_of_a_malformed_id_is_404(world: World, alice_client: Client, clone: str) -> None:
    assert alice_client.get(f"{URL}?clone={clone}").status_code == 404
