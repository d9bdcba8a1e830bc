"""/api/v1/: every endpoint for its owner, another workspace, anonymous, non-staff, expired and revoked
tokens, bad input (400 naming the field, nothing created) and idempotent retries."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from scheduler.models import ApiToken, GpuSample, Job
from scheduler.node.specs import pod_log_path
from scheduler.services.gpu_samples import gpu_samples_record
from scheduler.services.tokens import token_create, token_revoke
from scheduler.states import JobStatus, PodStatus
from tests.api.v1_helpers import bearer, submission
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db

JOB_GETS = ("", "events/", "pods/", "logs/", "gpu/")
JOB_POSTS = ("stop/", "restart/", "clone/")
CLUSTER_GETS = ("/api/v1/jobs/", "/api/v1/quotas/", "/api/v1/nodes/", "/api/v1/workspaces/", "/api/v1/pools/",
                "/api/v1/me/")


@pytest.fixture
def job(world: World) -> Job:
    return JobFactory(workspace=world.vision, quota=world.team_vision, name="vision-job", owner=world.alice)


@pytest.fixture
def alice(world: World) -> Client:
    return bearer(world.alice)


def every_url(job: Job, world: World) -> list[tuple[str, str]]:
    urls = [("get", url) for url in CLUSTER_GETS] + [("get", f"/api/v1/quotas/{world.general.pk}/")]
    urls += [("get", f"/api/v1/jobs/{job.pk}/{tail}") for tail in JOB_GETS]
    urls += [("post", f"/api/v1/jobs/{job.pk}/{tail}") for tail in JOB_POSTS] + [("post", "/api/v1/jobs/")]
    return urls


def test_anonymous_expired_and_revoked_tokens_get_401(world: World, job: Job) -> None:
    expired = token_create(user=world.alice, name="old", expires_at=timezone.now() + timedelta(seconds=60))
    ApiToken.objects.filter(pk=expired.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    revoked = token_create(user=world.alice, name="gone")
    token_revoke(user=world.alice, token_id=revoked.token.pk)
    clients = {
        "anonymous": Client(),
        "expired": Client(HTTP_AUTHORIZATION=f"Bearer {expired.secret}"),
        "revoked": Client(HTTP_AUTHORIZATION=f"Bearer {revoked.secret}"),
        "unknown": Client(HTTP_AUTHORIZATION="Bearer tp_nothing_here"),
    }
    for who, client in clients.items():
        for method, url in every_url(job, world):
            response = getattr(client, method)(url, {} if method == "get" else submission(),
                                               content_type="application/json")
            assert response.status_code == 401, (who, url, response.status_code)
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "expired" in clients["expired"].get("/api/v1/me/").json()["detail"]
    assert "revoked" in clients["revoked"].get("/api/v1/me/").json()["detail"]
    assert Job.objects.count() == 1 and Job.objects.get().status == JobStatus.QUEUING


def test_token_requests_use_no_session(world: World, alice: Client) -> None:
    response = alice.get("/api/v1/me/")
    assert response.json() == {"username": "alice", "is_staff": False, "workspaces": ["vision"],
                               "authenticated_by": "token"}
    assert "sessionid" not in response.cookies and not alice.cookies
    created = alice.post("/api/v1/jobs/", submission(), content_type="application/json")
    assert created.status_code == 201 and "sessionid" not in created.cookies  # no CSRF needed, none set


def test_session_keeps_csrf(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.alice)
    assert client.get("/api/v1/me/").json()["authenticated_by"] == "session"
    refused = client.post("/api/v1/jobs/", submission(), content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    assert not Job.objects.exists()


def test_session_write_with_the_csrf_token(world: World) -> None:
    from django.middleware.csrf import _get_new_csrf_string

    client = Client(enforce_csrf_checks=True)
    client.force_login(world.alice)
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    created = client.post("/api/v1/jobs/", submission(), content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert created.status_code == 201 and Job.objects.count() == 1


def test_job_endpoints_of_another_workspace_answer_404(world: World, job: Job) -> None:
    bob = bearer(world.bob)
    for tail in JOB_GETS:
        assert bob.get(f"/api/v1/jobs/{job.pk}/{tail}").status_code == 404, tail
    for tail in JOB_POSTS:
        assert bob.post(f"/api/v1/jobs/{job.pk}/{tail}", {}, content_type="application/json").status_code == 404
    assert bob.get("/api/v1/jobs/").json()["count"] == 0
    refused = bob.post("/api/v1/jobs/", submission(), content_type="application/json")
    assert refused.status_code == 400 and "workspace" in refused.json()
    assert Job.objects.count() == 1 and Job.objects.get().status == JobStatus.QUEUING


def test_non_staff_see_their_workspaces_staff_everything(world: World, job: Job, alice: Client) -> None:
    other = JobFactory(workspace=world.language, quota=world.team_language, name="secret", running_on=world.gpu2)
    assert [j["name"] for j in alice.get("/api/v1/jobs/").json()["results"]] == ["vision-job"]
    staff = bearer(world.admin)
    assert {j["name"] for j in staff.get("/api/v1/jobs/").json()["results"]} == {"vision-job", "secret"}
    alice_nodes = {n["name"]: n for n in alice.get("/api/v1/nodes/").json()}
    cell = alice_nodes["gpu-02"]["gpus"][0]
    assert cell["used"] is True and cell["job_id"] is None and cell["job_name"] is None
    staff_cell = {n["name"]: n for n in staff.get("/api/v1/nodes/").json()}["gpu-02"]["gpus"][0]
    assert staff_cell["job_id"] == other.pk
    assert alice.get("/api/v1/workspaces/").json()[0]["name"] == "vision"
    assert len(staff.get("/api/v1/workspaces/").json()) == 2
    assert staff.get("/api/v1/me/").json()["is_staff"] is True


def test_job_list_filters_like_the_console(world: World, job: Job, alice: Client) -> None:
    running = JobFactory(workspace=world.vision, quota=world.team_shared, name="runner", running_on=world.gpu1)
    body = alice.get("/api/v1/jobs/?status=Running&quota=team-shared").json()
    assert [j["id"] for j in body["results"]] == [running.pk] and body["results"][0]["nodes"] == ["gpu-01"]
    assert alice.get("/api/v1/jobs/?q=vision&mine=1").json()["count"] == 1
    assert alice.get("/api/v1/jobs/?status=pending").json()["count"] == 1
    assert alice.get("/api/v1/jobs/?quota=team-language").json()["count"] == 0
    assert "status" in alice.get("/api/v1/jobs/?status=Nope").json()
    assert "sort" in alice.get("/api/v1/jobs/?sort=bogus").json()


def test_submit_retrieve_events_pods(world: World, alice: Client) -> None:
    created = alice.post("/api/v1/jobs/", submission(), content_type="application/json")
    assert created.status_code == 201
    job_id = created.json()["id"]
    detail = alice.get(f"/api/v1/jobs/{job_id}/").json()
    assert detail["name"] == "resnet" and detail["roles"][0]["pod_count"] == 2 and detail["status"] == "Queuing"
    assert [e["kind"] for e in alice.get(f"/api/v1/jobs/{job_id}/events/").json()] == ["submitted", "queued"]
    assert alice.get(f"/api/v1/jobs/{job_id}/pods/").json() == []
    make_running(Job.objects.get(pk=job_id), world.gpu1)
    pods = alice.get(f"/api/v1/jobs/{job_id}/pods/").json()
    assert [p["node"] for p in pods] == ["gpu-01", "gpu-01"] and pods[0]["gpu_indices"] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"roles": [{"name": "worker", "pod_count": 0, "gpus": 1}]}, "roles[0].pod_count"),
        ({"priority": 12}, "priority"),
        ({"name": "Not A Name"}, "name"),
        ({"quota": "team-language"}, "quota"),
        ({"idle_mode": "sometimes"}, "idle_mode"),
        ({"roles": [{"name": "worker", "pod_count": 1, "gpus": 16}]}, "roles[0].gpus"),  # a pod over every node
        ({"command": ""}, "command"),
    ],
)
def test_bad_submissions_name_the_field_and_create_nothing(world: World, alice: Client, override, field) -> None:
    response = alice.post("/api/v1/jobs/", submission(**override), content_type="application/json",
                          HTTP_IDEMPOTENCY_KEY="k-bad")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()
    # The refusal was not stored: the same key with a corrected body submits.
    assert alice.post("/api/v1/jobs/", submission(), content_type="application/json",
                      HTTP_IDEMPOTENCY_KEY="k-bad").status_code == 201


def test_idempotent_retry_answers_the_first_response(world: World, alice: Client) -> None:
    first = alice.post("/api/v1/jobs/", submission(), content_type="application/json", HTTP_IDEMPOTENCY_KEY="abc")
    again = alice.post("/api/v1/jobs/", submission(), content_type="application/json", HTTP_IDEMPOTENCY_KEY="abc")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1
    other = alice.post("/api/v1/jobs/", submission(priority=5), content_type="application/json",
                       HTTP_IDEMPOTENCY_KEY="abc")
    assert other.status_code == 409 and "Idempotency-Key" in other.json()
    assert Job.objects.count() == 1
    # Keys are per user: the same key from another member makes its own job.
    carol = bearer(world.admin)
    assert carol.post("/api/v1/jobs/", submission(), content_type="application/json",
                      HTTP_IDEMPOTENCY_KEY="abc").status_code == 201
    assert Job.objects.count() == 2
    too_long = alice.post("/api/v1/jobs/", submission(), content_type="application/json",
                          HTTP_IDEMPOTENCY_KEY="x" * 256)
    assert too_long.status_code == 400 and "Idempotency-Key" in too_long.json()


def test_stop_restart_clone(world: World, job: Job, alice: Client) -> None:
    stopped = alice.post(f"/api/v1/jobs/{job.pk}/stop/", content_type="application/json")
    assert stopped.status_code == 200 and stopped.json()["status"] == "Stopped"
    again = alice.post(f"/api/v1/jobs/{job.pk}/stop/", content_type="application/json")
    assert again.status_code == 400 and "status" in again.json()
    restarted = alice.post(f"/api/v1/jobs/{job.pk}/restart/", content_type="application/json")
    assert restarted.status_code == 200 and restarted.json()["status"] == "Queuing"
    assert alice.post(f"/api/v1/jobs/{job.pk}/restart/").json().keys() == {"status"}
    clone = alice.post(f"/api/v1/jobs/{job.pk}/clone/", {}, content_type="application/json")
    assert clone.status_code == 201 and clone.json()["name"] == "vision-job-clone"
    assert clone.json()["roles"] == alice.get(f"/api/v1/jobs/{job.pk}/").json()["roles"]
    named = alice.post(f"/api/v1/jobs/{job.pk}/clone/", {"name": "Bad Name"}, content_type="application/json")
    assert named.status_code == 400 and "name" in named.json()
    assert Job.objects.count() == 2


def test_logs_tail_and_follow(world: World, job: Job, alice: Client) -> None:
    assert alice.get(f"/api/v1/jobs/{job.pk}/logs/").json()["pod"] is None
    (pod,) = make_running(job, world.gpu1)
    path = Path(pod_log_path(pod))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("one\ntwo\nthree\n")
    tail = alice.get(f"/api/v1/jobs/{job.pk}/logs/?lines=2").json()
    assert tail["text"] == "two\nthree\n" and tail["pod"]["id"] == pod.pk
    pod.status = PodStatus.SUCCEEDED
    pod.save()
    streamed = alice.get(f"/api/v1/jobs/{job.pk}/logs/?follow=1&offset=0")
    assert streamed.status_code == 200 and streamed["Content-Type"].startswith("text/plain")
    assert b"".join(streamed) == b"one\ntwo\nthree\n"
    assert alice.get(f"/api/v1/jobs/{job.pk}/logs/?pod=999999").json().keys() == {"pod"}
    assert alice.get(f"/api/v1/jobs/{job.pk}/logs/?pod=999999&follow=1").status_code == 400


def test_gpu_samples_absent_without_nvml_then_served(world: World, job: Job, alice: Client) -> None:
    (pod,) = make_running(job, world.gpu1)
    assert alice.get(f"/api/v1/jobs/{job.pk}/gpu/").json() == []  # no sampler ran: nothing is made up
    gpu_samples_record(node_name="gpu-01", readings=[
        {"index": 0, "utilization_percent": 87.0, "memory_used_mib": 30000, "memory_total_mib": 81920},
        {"index": 5, "utilization_percent": 3.0, "memory_used_mib": 10, "memory_total_mib": 81920},  # no pod
    ])
    (sample,) = alice.get(f"/api/v1/jobs/{job.pk}/gpu/").json()
    assert sample["pod_id"] == pod.pk and sample["gpu_index"] == 0 and sample["utilization_percent"] == 87.0
    assert GpuSample.objects.count() == 1


def test_quotas_tree_with_use(world: World, alice: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 4}], running_on=world.gpu1)
    JobFactory(workspace=world.vision, quota=world.team_vision)
    quotas = {q["name"]: q for q in alice.get("/api/v1/quotas/").json()}
    usage = quotas["team-vision"]["usage"]
    assert usage["in_quota_gpus"] == 4 and usage["pending_jobs"] == 1 and quotas["team-vision"]["parent"] == "general"
    assert set(usage) == {"min_gpus", "in_quota_gpus", "free_gpus", "lent_gpus", "borrowed_gpus", "running_jobs",
                          "pending_jobs"}
    one = alice.get(f"/api/v1/quotas/{world.team_vision.pk}/").json()
    assert one["usage"] == usage
    assert one["preempt_within"] is False  # DESIGN §2b, a quota setting; read-only in v1
    world.team_vision.preempt_within = True
    world.team_vision.save()
    assert alice.get(f"/api/v1/quotas/{world.team_vision.pk}/").json()["preempt_within"] is True
    assert alice.get("/api/v1/quotas/999999/").status_code == 404
    assert alice.post("/api/v1/quotas/", {"name": "x"}, content_type="application/json").status_code == 405


def test_gpu_samples_are_recorded_at_most_once_per_interval(world: World, job: Job, settings) -> None:
    from datetime import timedelta

    settings.TIDEPOOL_GPU_SAMPLE_SECONDS = 60
    make_running(job, world.gpu1)
    reading = [{"index": 0, "utilization_percent": 50, "memory_used_mib": 1, "memory_total_mib": 2}]
    start = timezone.now()
    assert gpu_samples_record(node_name="gpu-01", readings=reading, now=start) == 1
    assert gpu_samples_record(node_name="gpu-01", readings=reading, now=start + timedelta(seconds=30)) == 0
    assert gpu_samples_record(node_name="gpu-01", readings=reading, now=start + timedelta(seconds=61)) == 1


def test_pools_and_their_policies_read_only(world: World, alice: Client) -> None:
    from scheduler.models import PoolPolicy

    assert alice.get("/api/v1/pools/").json() == [
        {"resource_type": "general", "nodes": 2, "gpus": 16, "idle_share": "fifo", "min_runtime_s": 0,
         "starvation_s": 0, "starvation_hold": False, "starved_min_runtime_s": 0, "default_time_limit_s": 0,
         "grow_interval_s": 300}]
    PoolPolicy.objects.create(resource_type="lingjun", idle_share="fair", min_runtime_s=600, starvation_s=3600,
                              starvation_hold=True, starved_min_runtime_s=7200, default_time_limit_s=86400,
                              grow_interval_s=30)
    pools = {p["resource_type"]: p for p in alice.get("/api/v1/pools/").json()}
    assert pools["lingjun"] == {"resource_type": "lingjun", "nodes": 0, "gpus": 0, "idle_share": "fair",
                                "min_runtime_s": 600, "starvation_s": 3600, "starvation_hold": True,
                                "starved_min_runtime_s": 7200, "default_time_limit_s": 86400,
                                "grow_interval_s": 30}
    assert alice.post("/api/v1/pools/", {}, content_type="application/json").status_code == 405


# What the first API's tests checked that the tests above did not; through the console's session,
# which v1 accepts as the console's pages use it.


def test_submit_records_who_and_how(world: World, alice_client: Client) -> None:
    body = submission(environment={"SEED": "1"}, fault_tolerance=True)
    response = alice_client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 201, response.json()
    created = response.json()
    job = Job.objects.get(pk=created["id"])
    assert (job.name, job.quota, job.owner, job.priority, job.idle_mode, job.fault_tolerance, job.environment) == (
        "resnet", world.team_vision, world.alice, 3, "acceptable", True, {"SEED": "1"})
    assert created["status"] == JobStatus.QUEUING and [e["kind"] for e in created["events"]] == ["submitted", "queued"]


@pytest.mark.parametrize(("override", "field"), [({"workspace": "language"}, "workspace"),
                                                 ({"environment": {"1BAD": "x"}}, "environment"),
                                                 ({"priority": 0}, "priority")])
def test_session_submissions_refused_at_the_field(world: World, alice_client: Client, override, field) -> None:
    response = alice_client.post("/api/v1/jobs/", submission(**override), content_type="application/json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()


def test_job_list_queries_stay_constant(world: World, alice_client: Client) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert alice_client.get("/api/v1/jobs/").status_code == 200
        return len(captured)

    JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu1)
    few = count()
    for _ in range(30):
        JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 1}, {"name": "ps", "gpus": 0}],
                   running_on=world.gpu2)
    assert count() == few


def test_log_tail_follow_and_replaced_log(world: World, job: Job, alice_client: Client) -> None:
    """The console's log card: the tail as a terminal shows it, then only what was appended, then a reset."""
    (pod,) = make_running(job, world.gpu1)
    path = Path(pod_log_path(pod))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {i}\n" for i in range(500)) + "progress 10%\rprogress 90%\n")
    url = f"/api/v1/jobs/{job.pk}/logs/"
    tail = alice_client.get(f"{url}?lines=3").json()
    assert tail["pod"]["id"] == pod.pk and tail["reset"] is True
    assert tail["text"] == "line 498\nline 499\nprogress 90%\n"
    with path.open("a") as log:
        log.write("step 1 done\nstep 2")
    follow = alice_client.get(f"{url}?shown={pod.pk}&offset={tail['offset']}").json()
    assert follow["text"] == "step 1 done\nstep 2" and follow["reset"] is False
    assert alice_client.get(f"{url}?shown={pod.pk}&offset={follow['offset']}").json()["text"] == ""
    path.write_text("new\n")  # replaced (e.g. rotated): the client is told to start over
    restarted = alice_client.get(f"{url}?shown={pod.pk}&offset={follow['offset']}").json()
    assert restarted["reset"] is True and restarted["text"] == "new\n"
    other = JobFactory(workspace=world.vision, quota=world.team_vision)
    (foreign_pod,) = make_running(other, world.gpu2)
    assert alice_client.get(f"{url}?pod={foreign_pod.pk}").status_code == 400
    assert bearer(world.bob).get(url).status_code == 404


def test_quota_use_counts_up_the_tree_and_workspaces_list_their_quotas(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 4}], running_on=world.gpu1)
    tree = {q["name"]: q for q in alice_client.get("/api/v1/quotas/").json()}
    assert tree["team-vision"]["usage"]["in_quota_gpus"] == 4 and tree["general"]["usage"]["in_quota_gpus"] == 4
    (vision,) = alice_client.get("/api/v1/workspaces/").json()
    assert vision["name"] == "vision" and sorted(vision["quotas"]) == ["general", "team-shared", "team-vision"]
