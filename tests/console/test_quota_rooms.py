"""The quota cards and the submit form say what one job can get In Quota in each quota (DESIGN §2):
the least room of the quota and its parents, a parent counting only what it keeps beside its child
quotas' guarantees (`ownmin`), and "on idle resources only" where a quota keeps nothing.

The test world's root `general` (16 A100) gives all of it to team-vision (8), team-language (6)
and team-shared (2).
"""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.services.quotas import quota_create
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db


def quota_row(html: str, name: str) -> str:
    start = html.index(f'<tr data-quota="{name}">')
    return html[start: html.index("</tr>", start)]


def room_cell(html: str, name: str) -> str:
    row = quota_row(html, name)
    start = row.index("data-room>")
    return row[start: row.index("</td>", start)]


def test_a_root_that_gave_its_min_to_its_children_runs_jobs_on_idle_resources_only(
    world: World, alice_client: Client
) -> None:
    html = alice_client.get("/quotas/").content.decode()
    cell = room_cell(html, "general")
    assert "runs on idle resources only" in cell
    assert "keeps no GPUs for its own jobs: its whole min is its child quotas' guarantee" in cell


def test_a_leaf_shows_its_room_now_and_at_most(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 3}], running_on=world.gpu1)
    cell = room_cell(alice_client.get("/quotas/").content.decode(), "team-vision")
    assert "5 × A100 now" in cell and "at most 8 × A100" in cell
    assert "idle resources only" not in cell


def test_a_parent_with_a_remainder_counts_only_what_it_keeps_and_its_own_jobs(
    world: World, alice_client: Client
) -> None:
    # team-shared (2 A100) gives 1 to a child: it keeps 1 for its own jobs.
    sub = quota_create(name="shared-sub", parent=world.team_shared, min_gpus={"A100": 1}, min_cpu=4,
                       min_memory_gib=32, workspaces=[world.vision])
    cell = room_cell(alice_client.get("/quotas/").content.decode(), "team-shared")
    assert "1 × A100 now" in cell and "at most 1 × A100, what it keeps beside its child quotas' guarantees" in cell
    # The child's In Quota job uses the child's guarantee, not what the parent keeps.
    JobFactory(workspace=world.vision, quota=sub, roles=[{"gpus": 1}], running_on=world.gpu1)
    assert "1 × A100 now" in room_cell(alice_client.get("/quotas/").content.decode(), "team-shared")
    # The parent's own In Quota job does use it.
    JobFactory(workspace=world.vision, quota=world.team_shared, roles=[{"gpus": 1}], running_on=world.gpu1)
    html = alice_client.get("/quotas/").content.decode()
    assert "0 × A100 now" in room_cell(html, "team-shared")
    assert "0 × A100 now" in room_cell(html, "shared-sub")  # its 1 is in use by its own job


def test_the_form_says_which_quotas_run_on_idle_resources_only(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 3}], running_on=world.gpu1)
    html = alice_client.get("/jobs/new/").content.decode()

    def option(name: str) -> str:
        start = html.index(f'<span class="q-name">{name}</span>')
        return html[start: html.index("</label>", start)]

    assert "Runs on idle resources only" in option("general")
    assert "<strong>5</strong> free / 8 GPUs" in option("team-vision")
    assert "<strong>2</strong> free / 2 GPUs" in option("team-shared")
