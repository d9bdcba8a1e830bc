"""The first REST API (/api/) is gone: each of its paths answers 410 naming the /api/v1/ path that
replaces it, and that path answers the console's session. The console itself calls only /api/v1/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from scheduler.models import Job
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]

# (method, old path, the v1 path it names, a phrase the detail must hold beyond the path)
OLD_PATHS = [
    ("get", "/api/", "/api/v1/docs/", ""),
    ("get", "/api/jobs/", "/api/v1/jobs/", ""),
    ("post", "/api/jobs/", "/api/v1/jobs/", ""),
    ("get", "/api/jobs/{job}/", "/api/v1/jobs/{job}/", ""),
    ("post", "/api/jobs/{job}/stop/", "/api/v1/jobs/{job}/stop/", ""),
    ("post", "/api/jobs/{job}/restart/", "/api/v1/jobs/{job}/restart/", ""),
    ("get", "/api/jobs/{job}/log/", "/api/v1/jobs/{job}/logs/", "logs/ (plural)"),
    ("get", "/api/quotas/", "/api/v1/quotas/", ""),
    ("post", "/api/quotas/", "/api/v1/quotas/", "Quotas page (/quotas/)"),
    ("get", "/api/quotas/{quota}/", "/api/v1/quotas/{quota}/", ""),
    ("patch", "/api/quotas/{quota}/", "/api/v1/quotas/{quota}/", "Quotas page (/quotas/)"),
    ("delete", "/api/quotas/{quota}/", "/api/v1/quotas/{quota}/", "Quotas page (/quotas/)"),
    ("get", "/api/nodes/", "/api/v1/nodes/", ""),
    ("post", "/api/nodes/{node}/cordon/", "/api/v1/nodes/", "Nodes page (/nodes/)"),
    ("post", "/api/nodes/{node}/uncordon/", "/api/v1/nodes/", "Nodes page (/nodes/)"),
    ("post", "/api/nodes/{node}/drain/", "/api/v1/nodes/", "Nodes page (/nodes/)"),
    ("get", "/api/workspaces/", "/api/v1/workspaces/", ""),
    ("get", "/api/workspaces", "/api/v1/workspaces/", ""),  # without the slash too
    ("get", "/api/no-such-thing/", "/api/v1/docs/", "never a path"),
]


@pytest.mark.parametrize(("method", "old", "v1", "phrase"), OLD_PATHS)
def test_every_old_path_answers_410_naming_its_v1_path(world: World, staff_client: Client, method: str, old: str,
                                                        v1: str, phrase: str) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    ids = {"job": job.pk, "quota": world.team_vision.pk, "node": world.gpu1.pk}
    for client in (staff_client, Client(enforce_csrf_checks=True)):  # logged in or not, CSRF token or not
        response = getattr(client, method)(old.format(**ids), content_type="application/json")
        assert response.status_code == 410, (old, response.status_code)
        body = response.json()
        assert body["v1"] == v1.format(**ids)
        assert body["v1"] in body["detail"] and "Bearer" in body["detail"] and phrase in body["detail"]
    # Nothing was done: the job still waits, the node is still schedulable.
    assert Job.objects.get(pk=job.pk).status == job.status
    world.gpu1.refresh_from_db()
    assert world.gpu1.schedulable


@pytest.mark.parametrize(("method", "old", "v1", "phrase"), [p for p in OLD_PATHS if p[0] == "get"])
def test_the_named_v1_path_answers_the_session(world: World, alice_client: Client, method: str, old: str, v1: str,
                                               phrase: str) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    target = alice_client.get(old.format(job=job.pk, quota=world.team_vision.pk)).json()["v1"]
    assert alice_client.get(target).status_code == 200, target


def test_v1s_unknown_paths_stay_404(world: World, alice_client: Client) -> None:
    assert alice_client.get("/api/v1/no-such-thing/").status_code == 404
    assert alice_client.get("/api/v1/jobs/abc/").status_code == 404


def _console_sources() -> list[Path]:
    folders = [ROOT / "static" / "console", ROOT / "templates", ROOT / "console"]
    return [path for folder in folders for path in folder.rglob("*")
            if path.suffix in {".js", ".html", ".py"} and path.is_file()]


def test_the_console_calls_only_v1() -> None:
    sources = _console_sources()
    assert any(path.name == "console.js" for path in sources) and any(p.name == "job_detail.html" for p in sources)
    old = re.compile(r"/api/(?!v1/)")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sources for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if old.search(line)]
    assert not found, found


def test_the_job_pages_log_url_answers_the_session(world: World, alice_client: Client) -> None:
    """The URL the job page's log card polls (console.js) is v1's, and answers the logged-in member."""
    job = JobFactory(workspace=world.vision, quota=world.team_vision, owner=world.alice)
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    (url,) = re.findall(r'data-log-url="([^"]+)"', page)
    assert url == f"/api/v1/jobs/{job.pk}/logs/"
    answer = alice_client.get(url + "?latest=1", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200 and answer.json() == {"pod": None, "text": "", "offset": 0, "reset": True}
    assert Client().get(url).status_code == 401  # not without the session
