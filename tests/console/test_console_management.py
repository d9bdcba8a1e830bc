"""Staff pages: quotas and workspaces with the tree's invariants at the field, cordon and drain."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from scheduler.models import Node, ResourceQuota, Workspace
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db


def quota_data(world: World, **overrides: Any) -> dict[str, Any]:
    data = {
        "name": "team-new",
        "description": "a new team",
        "resource_type": "general",
        "parent": world.general.pk,
        "min_gpus_0": "0",
        "min_cpu": "0",
        "min_memory_gib": "0",
        "max_gpus_0": "",
        "max_cpu": "",
        "max_memory_gib": "",
        "workspaces": [world.vision.pk],
    }
    data.update(overrides)
    return data


def test_staff_create_a_quota_with_its_workspaces(world: World, staff_client: Client) -> None:
    response = staff_client.post(reverse("console:quota_new"), quota_data(world, max_gpus_0="4", max_cpu="48"))
    assert response.status_code == 302
    quota = ResourceQuota.objects.get(name="team-new")
    assert quota.parent == world.general
    assert quota.min_gpus == {"A100": 0}
    assert quota.max_gpus == {"A100": 4} and quota.max_cpu == 48 and quota.max_memory_gib is None
    assert list(quota.workspaces.all()) == [world.vision]


def test_children_above_the_parent_are_refused_at_the_field(world: World, staff_client: Client) -> None:
    before = ResourceQuota.objects.count()
    # general (16) already has children with 8 + 6 + 2: one more GPU does not fit.
    response = staff_client.post(reverse("console:quota_new"), quota_data(world, min_gpus_0="1"))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "min_gpus" in errors
    assert "above general's min of 16" in " ".join(errors["min_gpus"])
    assert "above general&#x27;s min of 16" in response.content.decode()
    assert ResourceQuota.objects.count() == before


def test_max_below_min_is_refused(world: World, staff_client: Client) -> None:
    url = reverse("console:quota_edit", args=[world.team_vision.pk])
    data = quota_data(world, name="team-vision", min_gpus_0="8", min_cpu="96", min_memory_gib="768", max_cpu="10")
    response = staff_client.post(url, data)
    assert response.status_code == 400
    assert "above its max" in " ".join(response.context["form"].errors["max_cpu"])
    world.team_vision.refresh_from_db()
    assert world.team_vision.max_cpu is None


def test_edit_form_shows_the_quota(world: World, staff_client: Client) -> None:
    html = staff_client.get(reverse("console:quota_edit", args=[world.team_vision.pk])).content.decode()
    assert 'value="team-vision"' in html
    assert 'name="min_gpus_0" value="8"' in html


def test_a_quota_with_jobs_cannot_be_deleted(world: World, staff_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_shared)
    response = staff_client.post(reverse("console:quota_delete", args=[world.team_shared.pk]))
    assert response.status_code == 400
    assert "has jobs" in response.content.decode()
    assert ResourceQuota.objects.filter(pk=world.team_shared.pk).exists()


def test_an_unused_leaf_quota_is_deleted(world: World, staff_client: Client) -> None:
    response = staff_client.post(reverse("console:quota_delete", args=[world.team_shared.pk]))
    assert response.status_code == 302
    assert not ResourceQuota.objects.filter(pk=world.team_shared.pk).exists()


def test_staff_create_a_workspace_with_members_and_quotas(world: World, staff_client: Client) -> None:
    response = staff_client.post(
        reverse("console:workspace_new"),
        {"name": "research", "description": "Research", "members": [world.alice.pk, world.bob.pk],
         "quotas": [world.team_shared.pk]},
    )
    assert response.status_code == 302
    research = Workspace.objects.get(name="research")
    assert set(research.members.all()) == {world.alice, world.bob}
    assert list(research.quotas.all()) == [world.team_shared]


def test_workspace_name_must_be_unique(world: World, staff_client: Client) -> None:
    response = staff_client.post(reverse("console:workspace_new"), {"name": "vision"})
    assert response.status_code == 400
    assert "name" in response.context["form"].errors


@pytest.mark.parametrize(("action", "schedulable", "draining"),
                         [("cordon", False, False), ("drain", False, True)])
def test_cordon_and_drain(world: World, staff_client: Client, action: str, schedulable: bool,
                          draining: bool) -> None:
    assert staff_client.get(reverse("console:node_action", args=[world.gpu1.pk, action])).status_code == 200
    response = staff_client.post(reverse("console:node_action", args=[world.gpu1.pk, action]))
    assert response.status_code == 302
    node = Node.objects.get(pk=world.gpu1.pk)
    assert (node.schedulable, node.draining) == (schedulable, draining)
    staff_client.post(reverse("console:node_action", args=[world.gpu1.pk, "uncordon"]))
    node.refresh_from_db()
    assert (node.schedulable, node.draining) == (True, False)


def test_unknown_node_action_is_404(world: World, staff_client: Client) -> None:
    assert staff_client.post(reverse("console:node_action", args=[world.gpu1.pk, "reboot"])).status_code == 404
