"""The REST API: the same permission rule as the pages, service refusals as 400s keyed by field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduler.models import Job, Node, ResourceQuota
from scheduler.node.specs import pod_log_path
from scheduler.states import JobStatus
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db


def submission(**overrides: Any) -> dict[str, Any]:
    body = {
        "name": "resnet",
        "workspace": "vision",
        "quota": "team-vision",
        "command": "python train.py",
        "roles": [{"name": "worker", "pod_count": 2, "gpus": 4, "cpu": 8, "memory_gib": 64}],
        "idle_mode": "acceptable",
        "priority": 3,
        "environment": {"SEED": "1"},
        "fault_tolerance": True,
    }
    body.update(overrides)
    return body


def test_anonymous_gets_nothing(world: World, client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision)
    for url in ("/api/jobs/", "/api/quotas/", "/api/nodes/", "/api/workspaces/"):
        assert client.get(url).status_code in (401, 403)


def test_job_list_is_limited_to_the_users_workspaces(world: World, alice_client: Client, staff_client: Client) -> None:
    mine = JobFactory(workspace=world.vision, quota=world.team_vision, name="mine")
    JobFactory(workspace=world.language, quota=world.team_language, name="language-secret")
    body = alice_client.get("/api/jobs/").json()
    assert body["count"] == 1 and [j["id"] for j in body["results"]] == [mine.pk]
    assert staff_client.get("/api/jobs/").json()["count"] == 2


def test_job_list_filters_by_name_and_status(world: World, alice_client: Client) -> None:
    running = JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 2}],
                         running_on=world.gpu1)
    JobFactory(workspace=world.vision, quota=world.team_shared)
    body = alice_client.get("/api/jobs/?status=Running&quota=team-vision").json()
    assert [j["id"] for j in body["results"]] == [running.pk]
    row = body["results"][0]
    assert row["in_quota"] is True and row["nodes"] == ["gpu-01"] and row["gpus"] == 2
    # A quota the user cannot use matches nothing rather than showing its jobs.
    assert alice_client.get("/api/jobs/?quota=team-language").json()["count"] == 0
    assert alice_client.get("/api/jobs/?status=Nope").status_code == 400


def test_job_list_queries_stay_constant(world: World, alice_client: Client) -> None:
    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert alice_client.get("/api/jobs/").status_code == 200
        return len(captured)

    JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu1)
    few = count()
    for _ in range(30):
        JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 1}, {"name": "ps", "gpus": 0}],
                   running_on=world.gpu2)
    assert count() == few


def test_submit_creates_a_job(world: World, alice_client: Client) -> None:
    response = alice_client.post("/api/jobs/", submission(), content_type="application/json")
    assert response.status_code == 201, response.json()
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert (job.name, job.quota, job.owner, job.priority, job.idle_mode) == (
        "resnet", world.team_vision, world.alice, 3, "acceptable")
    assert body["roles"][0]["pod_count"] == 2 and body["status"] == JobStatus.QUEUING
    assert [e["kind"] for e in body["events"]] == ["submitted", "queued"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "Not A Name"}, "name"),
        ({"priority": 0}, "priority"),
        ({"workspace": "language"}, "workspace"),
        ({"quota": "team-language"}, "quota"),
        ({"roles": [{"name": "worker", "pod_count": 1, "gpus": 16}]}, "roles"),
        ({"roles": [{"name": "worker", "pod_count": 0}]}, "roles[0].pod_count"),
        ({"environment": {"1BAD": "x"}}, "environment"),
    ],
)
def test_refused_submissions_are_400_at_the_field(
    world: World, alice_client: Client, overrides: dict[str, Any], field: str
) -> None:
    response = alice_client.post("/api/jobs/", submission(**overrides), content_type="application/json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert Job.objects.count() == 0


def test_detail_stop_and_restart(world: World, alice_client: Client, bob_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="stoppable")
    assert bob_client.get(f"/api/jobs/{job.pk}/").status_code == 404
    assert bob_client.post(f"/api/jobs/{job.pk}/stop/").status_code == 404
    stopped = alice_client.post(f"/api/jobs/{job.pk}/stop/").json()
    assert stopped["status"] == JobStatus.STOPPED
    again = alice_client.post(f"/api/jobs/{job.pk}/stop/")
    assert again.status_code == 400 and "status" in again.json()
    restarted = alice_client.post(f"/api/jobs/{job.pk}/restart/").json()
    assert restarted["status"] == JobStatus.QUEUING


def test_log_tail_then_follow(world: World, alice_client: Client, bob_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision)
    assert alice_client.get(f"/api/jobs/{job.pk}/log/").json()["pod"] is None
    (pod,) = make_running(job, world.gpu1)
    path = Path(pod_log_path(pod))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {i}\n" for i in range(500)) + "progress 10%\rprogress 90%\n")
    tail = alice_client.get(f"/api/jobs/{job.pk}/log/?lines=3").json()
    assert tail["pod"]["id"] == pod.pk and tail["reset"] is True
    assert tail["text"] == "line 498\nline 499\nprogress 90%\n"
    with path.open("a") as log:
        log.write("step 1 done\nstep 2")
    follow = alice_client.get(f"/api/jobs/{job.pk}/log/?shown={pod.pk}&offset={tail['offset']}").json()
    assert follow["text"] == "step 1 done\nstep 2" and follow["reset"] is False
    nothing_new = alice_client.get(f"/api/jobs/{job.pk}/log/?shown={pod.pk}&offset={follow['offset']}").json()
    assert nothing_new["text"] == ""
    path.write_text("new\n")  # replaced (e.g. rotated): the client is told to start over
    restarted = alice_client.get(f"/api/jobs/{job.pk}/log/?shown={pod.pk}&offset={follow['offset']}").json()
    assert restarted["reset"] is True and restarted["text"] == "new\n"
    assert bob_client.get(f"/api/jobs/{job.pk}/log/").status_code == 404
    other = JobFactory(workspace=world.vision, quota=world.team_vision)
    (foreign_pod,) = make_running(other, world.gpu2)
    assert alice_client.get(f"/api/jobs/{job.pk}/log/?pod={foreign_pod.pk}").status_code == 400


def test_quota_tree_for_everyone_writes_for_staff(world: World, alice_client: Client, staff_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 4}], running_on=world.gpu1)
    tree = {q["name"]: q for q in alice_client.get("/api/quotas/").json()}
    assert tree["team-vision"]["parent"] == "general"
    assert tree["team-vision"]["usage"]["in_quota_gpus"] == 4 and tree["general"]["usage"]["in_quota_gpus"] == 4
    body = {"name": "team-x", "parent": "general", "min_gpus": {"A100": 1}, "workspaces": ["vision"]}
    assert alice_client.post("/api/quotas/", body, content_type="application/json").status_code == 403
    refused = staff_client.post("/api/quotas/", body, content_type="application/json")
    assert refused.status_code == 400 and "above general's min of 16" in refused.json()["min_gpus"][0]
    body["min_gpus"] = {"A100": 0}
    created = staff_client.post("/api/quotas/", body, content_type="application/json")
    assert created.status_code == 201 and created.json()["workspaces"] == ["vision"]
    quota_id = created.json()["id"]
    patched = staff_client.patch(f"/api/quotas/{quota_id}/", {"name": "team-x", "max_cpu": "8"},
                                 content_type="application/json")
    assert patched.status_code == 200 and patched.json()["max_cpu"] == 8
    assert patched.json()["preempt_within"] is False
    within = staff_client.patch(f"/api/quotas/{quota_id}/", {"preempt_within": True}, content_type="application/json")
    assert within.status_code == 200 and within.json()["preempt_within"] is True
    assert ResourceQuota.objects.get(pk=quota_id).preempt_within is True
    assert staff_client.delete(f"/api/quotas/{quota_id}/").status_code == 204
    assert not ResourceQuota.objects.filter(pk=quota_id).exists()
    in_use = staff_client.delete(f"/api/quotas/{world.team_vision.pk}/")
    assert in_use.status_code == 400 and "has jobs" in str(in_use.json())


def test_nodes_hide_other_workspaces_jobs_and_actions_are_for_staff(
    world: World, alice_client: Client, staff_client: Client
) -> None:
    JobFactory(workspace=world.language, quota=world.team_language, name="language-secret",
               roles=[{"gpus": 2}], running_on=world.gpu1)
    nodes = {n["name"]: n for n in alice_client.get("/api/nodes/").json()}
    gpus = nodes["gpu-01"]["gpus"]
    assert nodes["gpu-01"]["gpus_used"] == 2
    assert gpus[0]["used"] and gpus[0]["job_id"] is None and gpus[0]["job_name"] is None
    assert "language-secret" not in str(nodes)
    assert alice_client.post(f"/api/nodes/{world.gpu2.pk}/cordon/").status_code == 403
    assert staff_client.post(f"/api/nodes/{world.gpu2.pk}/cordon/").json()["schedulable"] is False
    assert Node.objects.get(pk=world.gpu2.pk).schedulable is False
    assert staff_client.post(f"/api/nodes/{world.gpu2.pk}/uncordon/").json()["schedulable"] is True


def test_workspaces_are_the_users(world: World, alice_client: Client) -> None:
    body = alice_client.get("/api/workspaces/").json()
    assert [w["name"] for w in body] == ["vision"]
    assert sorted(body[0]["quotas"]) == ["general", "team-shared", "team-vision"]
