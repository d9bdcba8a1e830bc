"""Pages: login required, workspace isolation, staff-only management, filters, the Plotly asset."""

from __future__ import annotations

import gzip

import pytest
from django.test import Client
from django.urls import reverse

from console.assets import plotly_version
from scheduler.models import IdleMode
from scheduler.states import JobStatus
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db

PAGES = ["console:dashboard", "console:jobs", "console:job_new", "console:quotas", "console:nodes"]


@pytest.mark.parametrize("name", PAGES)
def test_pages_need_login(client: Client, name: str) -> None:
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", PAGES)
def test_pages_render_for_a_member(alice_client: Client, name: str) -> None:
    response = alice_client.get(reverse(name))
    assert response.status_code == 200
    assert b'class="topbar"' in response.content


def test_no_page_loads_anything_from_another_host(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, name="visible")
    for name in PAGES:
        html = alice_client.get(reverse(name)).content.decode()
        for marker in ('src="http', "src='http", 'href="http', "href='http", "//cdn"):
            assert marker not in html, f"{name} references another host: {marker}"


def test_login_page_renders(client: Client) -> None:
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'name="username"' in response.content


def test_job_list_shows_only_the_users_workspaces(world: World, alice_client: Client, bob_client: Client) -> None:
    mine = JobFactory(workspace=world.vision, quota=world.team_vision, name="vision-job")
    theirs = JobFactory(workspace=world.language, quota=world.team_language, name="language-secret")
    alice_page = alice_client.get(reverse("console:jobs")).content.decode()
    assert f'data-job-id="{mine.pk}"' in alice_page
    assert "language-secret" not in alice_page
    bob_page = bob_client.get(reverse("console:jobs")).content.decode()
    assert f'data-job-id="{theirs.pk}"' in bob_page
    assert "vision-job" not in bob_page


def test_staff_see_every_workspace(world: World, staff_client: Client) -> None:
    a = JobFactory(workspace=world.vision, quota=world.team_vision)
    b = JobFactory(workspace=world.language, quota=world.team_language)
    page = staff_client.get(reverse("console:jobs")).content.decode()
    assert f'data-job-id="{a.pk}"' in page and f'data-job-id="{b.pk}"' in page


def test_detail_of_another_workspaces_job_is_404(world: World, alice_client: Client) -> None:
    theirs = JobFactory(workspace=world.language, quota=world.team_language)
    assert alice_client.get(reverse("console:job_detail", args=[theirs.pk])).status_code == 404
    assert alice_client.get(reverse("console:job_stop", args=[theirs.pk])).status_code == 404
    assert alice_client.post(reverse("console:job_stop", args=[theirs.pk])).status_code == 404
    assert alice_client.get(reverse("console:job_new") + f"?clone={theirs.pk}").status_code == 404
    assert alice_client.get(f"/api/v1/jobs/{theirs.pk}/logs/").status_code == 404


def test_job_row_shows_quota_badge_nodes_and_restarts(world: World, alice_client: Client) -> None:
    job = JobFactory(
        workspace=world.vision, quota=world.team_vision, idle_mode=IdleMode.ACCEPTABLE, fault_tolerance=True,
        max_restarts=5, restart_count=2, roles=[{"pod_count": 2, "gpus": 4}],
    )
    make_running(job, world.gpu1, in_quota=False)
    page = alice_client.get(reverse("console:jobs")).content.decode()
    row = page[page.index(f'data-job-id="{job.pk}"'):]
    row = row[: row.index("</tr>")]
    assert "Not in Quota" in row and 'data-in-quota="false"' in row
    assert "gpu-01" in row
    assert "8 × A100" in row
    assert "2/5" in row
    assert 'data-status="Running"' in row


def test_pending_job_shows_queue_position_and_reason(world: World, alice_client: Client) -> None:
    JobFactory(
        workspace=world.vision, quota=world.team_vision, queue_position=3,
        waiting_reason="quota team-vision is full: 8 of 8 A100 In Quota",
    )
    page = alice_client.get(reverse("console:jobs")).content.decode()
    assert "#3" in page
    assert "quota team-vision is full" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=Running", {"running"}),
        ("status=pending", {"queued", "only-idle"}),
        ("status=finished", {"done"}),
        ("idle_mode=only", {"only-idle"}),
        ("q=only", {"only-idle"}),
        ("mine=1", {"queued"}),
    ],
)
def test_job_list_filters(world: World, alice_client: Client, query: str, expected: set[str]) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, name="running", status=JobStatus.RUNNING)
    JobFactory(workspace=world.vision, quota=world.team_vision, name="queued", owner=world.alice)
    JobFactory(workspace=world.vision, quota=world.team_shared, name="only-idle", idle_mode=IdleMode.ONLY)
    JobFactory(workspace=world.vision, quota=world.team_vision, name="done", status=JobStatus.SUCCEEDED)
    JobFactory(workspace=world.language, quota=world.team_language, name="bobs", status=JobStatus.RUNNING)
    page = alice_client.get(reverse("console:jobs") + "?" + query).content.decode()
    shown = {name for name in ("running", "queued", "only-idle", "done", "bobs") if f'data-name="{name}"' in page}
    assert shown == expected


def test_quota_and_workspace_filters(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, name="a")
    JobFactory(workspace=world.vision, quota=world.team_shared, name="b")
    page = alice_client.get(reverse("console:jobs") + f"?quota={world.team_shared.pk}").content.decode()
    assert 'data-name="b"' in page and 'data-name="a"' not in page
    # Filtering on a workspace the user is not in shows nothing, never that workspace's jobs.
    JobFactory(workspace=world.language, quota=world.team_language, name="secret")
    page = alice_client.get(reverse("console:jobs") + f"?workspace={world.language.pk}").content.decode()
    assert "secret" not in page and "No job matches" in page


def test_sorting_and_pagination(world: World, alice_client: Client) -> None:
    for priority in range(1, 10):
        for i in range(7):
            JobFactory(workspace=world.vision, quota=world.team_vision, name=f"p{priority}-{i}", priority=priority)
    page1 = alice_client.get(reverse("console:jobs") + "?sort=-priority").content.decode()
    assert page1.index('data-name="p9-0"') < page1.index('data-name="p8-0"')
    assert "1–50 of 63 jobs" in page1
    assert 'rel="next"' in page1
    page2 = alice_client.get(reverse("console:jobs") + "?sort=-priority&page=2").content.decode()
    assert "51–63 of 63 jobs" in page2
    assert 'data-name="p1-6"' in page2
    # A page past the end shows the last page rather than an error.
    assert "51–63 of 63" in alice_client.get(reverse("console:jobs") + "?page=99").content.decode()


@pytest.mark.parametrize("name", ["console:quota_new", "console:workspace_new"])
def test_management_pages_are_staff_only(alice_client: Client, staff_client: Client, name: str) -> None:
    assert alice_client.get(reverse(name)).status_code == 403
    assert staff_client.get(reverse(name)).status_code == 200


def test_node_actions_are_staff_only(world: World, alice_client: Client) -> None:
    response = alice_client.post(reverse("console:node_action", args=[world.gpu1.pk, "cordon"]))
    assert response.status_code == 403
    world.gpu1.refresh_from_db()
    assert world.gpu1.schedulable


def test_nodes_page_hides_other_workspaces_job_names(world: World, alice_client: Client) -> None:
    mine = JobFactory(workspace=world.vision, quota=world.team_vision, name="vision-train",
                      roles=[{"gpus": 2}], running_on=world.gpu1)
    JobFactory(workspace=world.language, quota=world.team_language, name="language-secret",
               roles=[{"gpus": 3}], running_on=world.gpu1, running_on__in_quota=False)
    page = alice_client.get(reverse("console:nodes")).content.decode()
    assert "vision-train" in page and reverse("console:job_detail", args=[mine.pk]) in page
    assert "language-secret" not in page
    assert page.count("a job of another workspace") == 3
    assert "2 / 8 GPUs in use" not in page and "5 / 8 GPUs in use" in page


def test_lost_and_cordoned_nodes_are_marked(world: World, alice_client: Client) -> None:
    world.gpu1.lost = True
    world.gpu1.save()
    world.gpu2.schedulable = False
    world.gpu2.save()
    page = alice_client.get(reverse("console:nodes")).content.decode()
    assert 'class="node card lost"' in page and ">Lost<" in page
    assert 'class="node card cordoned"' in page and ">Cordoned<" in page


def test_live_fragments(world: World, alice_client: Client) -> None:
    for name in ("console:nodes", "console:quotas", "console:dashboard"):
        response = alice_client.get(reverse(name) + "?fragment=1")
        assert response.status_code == 200
        assert b"<html" not in response.content, f"{name} fragment is a whole page"


def test_quota_page_shows_use_lent_and_borrowed(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 8}], running_on=world.gpu1)
    JobFactory(workspace=world.language, quota=world.team_language, roles=[{"gpus": 4}],
               running_on=world.gpu2, running_on__in_quota=False)
    JobFactory(workspace=world.language, quota=world.team_language)  # pending
    page = alice_client.get(reverse("console:quotas")).content.decode()
    row = page[page.index('data-quota="team-language"'):]
    row = row[: row.index("</tr>")]
    assert '<span class="num-badge niq">4</span>' in row  # borrowed: its own Not in Quota job
    assert '<td data-label="Pending jobs" class="num">1</td>' in row
    shared = page[page.index('data-quota="team-shared"'):]
    shared = shared[: shared.index("</tr>")]
    # team-shared's 2 unused GPUs are all the pool has unused besides team-language's own:
    # unused 16 - 8 = 8 in the pool; lent = 4 × 2 / 8 = 1.
    assert '<td data-label="Lent out" class="num">1</td>' in shared


def test_plotly_is_served_from_the_package_with_caching(alice_client: Client, client: Client) -> None:
    url = reverse("console:plotly_js", kwargs={"version": plotly_version()})
    response = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"]
    body = gzip.decompress(response.content)
    assert b"plotly" in body[:2000].lower()
    plain = client.get(url)
    assert "Content-Encoding" not in plain and plain.content == body
    assert client.get(url, HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304
    assert client.get(reverse("console:plotly_js", kwargs={"version": "0.0.1"})).status_code == 404
    assert url.encode() in alice_client.get(reverse("console:dashboard")).content
