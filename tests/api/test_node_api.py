"""The node API with a node's key (DESIGN §6): exactly what a node may do, and every refusal.

Holding node gpu-01's key one can register gpu-01 and heartbeat, read gpu-01's pods and report on
them; nothing else. Refused: the console's other API (jobs, quotas, nodes, users, keys), another
node's pods, reports on another node's pod (a stolen key: nothing changes), a report for another
attempt; and the key never names another node, whatever the request says.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduler.models import InstanceLease, Job, Node, Pod
from scheduler.services.node_keys import node_key_create, node_key_revoke, node_key_rotate
from scheduler.states import JobStatus, PodStatus
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db

INVENTORY = {"agent": "host-a:100:1", "gpu_type": "A100", "gpu_count": 8, "cpu": 96, "memory_gib": 768,
             "address": "10.0.0.1"}


def node_client(node_name: str) -> Client:
    return keyed(node_key_create(node_name=node_name).secret)


def keyed(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, body, content_type="application/json")


def running_job(world: World, node: Node, name: str) -> tuple[Job, list[Pod]]:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name=name, owner=world.alice)
    return job, make_running(job, node)


def test_register_heartbeat_and_release_act_on_the_keys_node_only(world: World) -> None:
    gpu1 = node_client("gpu-01")
    answer = post(gpu1, "/api/node/v1/register/", {**INVENTORY, "name": "gpu-02"})  # a name in the body: ignored
    assert answer.status_code == 200, answer.content
    assert answer.json()["node"] == "gpu-01"
    node = Node.objects.get(name="gpu-01")
    assert (node.address, node.last_heartbeat is not None) == ("10.0.0.1", True)
    assert Node.objects.get(name="gpu-02").address == ""  # untouched
    assert InstanceLease.objects.get(role="node:gpu-01").owner == "host-a:100:1"
    assert post(gpu1, "/api/node/v1/heartbeat/", {"agent": "host-a:100:1"}).status_code == 200
    # A second agent with the same key while the first one holds the lease: refused, told why.
    other = post(gpu1, "/api/node/v1/register/", {**INVENTORY, "agent": "host-b:7:1"})
    assert other.status_code == 409 and "another live agent" in other.json()["detail"]
    assert post(gpu1, "/api/node/v1/release/", {"agent": "host-a:100:1"}).status_code == 200
    assert post(gpu1, "/api/node/v1/register/", {**INVENTORY, "agent": "host-b:7:1"}).status_code == 200


def test_bad_registrations_are_refused_by_field(world: World) -> None:
    gpu1 = node_client("gpu-01")
    answer = post(gpu1, "/api/node/v1/register/", {**INVENTORY, "gpu_count": -1, "inventory_source": "demo"})
    assert answer.status_code == 400
    assert set(answer.json()) == {"gpu_count", "inventory_source"}
    answer = post(gpu1, "/api/node/v1/register/", {**INVENTORY, "gpu_type": ""})
    assert answer.status_code == 400 and "no GPU model" in answer.json()["gpu_type"][0]


def test_the_node_reads_its_own_pods_with_their_specs_and_no_other(world: World) -> None:
    mine, my_pods = running_job(world, world.gpu1, "on-gpu-01")
    theirs, _ = running_job(world, world.gpu2, "on-gpu-02")
    answer = node_client("gpu-01").get("/api/node/v1/pods/")
    assert answer.status_code == 200, answer.content
    pods = answer.json()["pods"]
    assert [p["pod_id"] for p in pods] == [p.pk for p in my_pods]
    row = pods[0]
    assert row["wanted"] and row["live"] and row["attempt"] == mine.attempt
    assert row["spec"]["command"] == mine.command and row["spec"]["job_uid"] == str(mine.uid)
    assert str(theirs.uid) not in answer.content.decode()


def test_a_stolen_key_for_node_a_cannot_report_on_node_bs_pod(world: World) -> None:
    _job, their_pods = running_job(world, world.gpu2, "on-gpu-02")
    pod = their_pods[0]
    stolen = node_client("gpu-01")
    for report in ({"event": "exited", "exit_code": 1, "outcome": "failed", "reason": "forged"},
                   {"event": "running", "pid": 4242},
                   {"event": "never_started", "reason": "forged"},
                   {"event": "progress", "progress": {"step": 10**9}},
                   {"event": "image_wait", "cause": "forged", "retry_in_s": 5},
                   {"event": "image_here", "image": "evil"}):
        answer = post(stolen, f"/api/node/v1/pods/{pod.pk}/report/", {"attempt": pod.attempt, **report})
        assert answer.status_code == 403, (report, answer.content)
        assert answer.json()["detail"] == f"pod {pod.pk} attempt {pod.attempt} is not placed on node gpu-01"
    pod.refresh_from_db()
    assert (pod.status, pod.exit_code, pod.reason, pod.image) == (PodStatus.RUNNING, None, "", "")
    assert Job.objects.get(pk=pod.job_id).status == JobStatus.RUNNING
    assert Job.objects.get(pk=pod.job_id).progress in ({}, None)


def test_an_unknown_pod_and_another_attempt_get_the_same_refusal(world: World) -> None:
    _job, pods = running_job(world, world.gpu1, "on-gpu-01")
    gpu1 = node_client("gpu-01")
    body = {"event": "exited", "exit_code": 0, "outcome": "succeeded"}
    wrong_attempt = post(gpu1, f"/api/node/v1/pods/{pods[0].pk}/report/", {**body, "attempt": pods[0].attempt + 1})
    unknown = post(gpu1, "/api/node/v1/pods/999999/report/", {**body, "attempt": 1})
    assert (wrong_attempt.status_code, unknown.status_code) == (403, 403)
    assert "is not placed on node gpu-01" in unknown.json()["detail"]
    assert Pod.objects.get(pk=pods[0].pk).status == PodStatus.RUNNING


def test_reports_on_its_own_pod_are_applied_through_the_services(world: World) -> None:
    job, pods = running_job(world, world.gpu1, "on-gpu-01")
    gpu1 = node_client("gpu-01")
    progress = post(gpu1, f"/api/node/v1/pods/{pods[0].pk}/report/",
                    {"attempt": job.attempt, "event": "progress", "progress": {"step": 120, "last_checkpoint_step": 100}})
    assert progress.status_code == 200 and progress.json() == {"applied": True}
    assert Job.objects.get(pk=job.pk).progress["step"] == 120
    exited = post(gpu1, f"/api/node/v1/pods/{pods[0].pk}/report/",
                  {"attempt": job.attempt, "event": "exited", "exit_code": 0, "outcome": "succeeded"})
    assert exited.json() == {"applied": True}
    assert Pod.objects.get(pk=pods[0].pk).status == PodStatus.SUCCEEDED
    again = post(gpu1, f"/api/node/v1/pods/{pods[0].pk}/report/",
                 {"attempt": job.attempt, "event": "exited", "exit_code": 1, "outcome": "failed"})
    assert again.json() == {"applied": False}  # fenced: it already ended
    assert Pod.objects.get(pk=pods[0].pk).status == PodStatus.SUCCEEDED


def test_a_malformed_report_is_refused_by_field(world: World) -> None:
    job, pods = running_job(world, world.gpu1, "on-gpu-01")
    gpu1 = node_client("gpu-01")
    path = f"/api/node/v1/pods/{pods[0].pk}/report/"
    assert set(post(gpu1, path, {"attempt": job.attempt, "event": "exited"}).json()) == {"outcome"}
    assert set(post(gpu1, path, {"attempt": job.attempt, "event": "eat"}).json()) == {"event"}
    bad_progress = post(gpu1, path, {"attempt": job.attempt, "event": "progress", "progress": {"step": "x"}})
    assert bad_progress.status_code == 400 and set(bad_progress.json()) == {"progress"}
    assert Pod.objects.get(pk=pods[0].pk).status == PodStatus.RUNNING


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/quotas/", "/api/v1/nodes/", "/api/v1/me/",
                                  "/api/v1/workspaces/", "/api/v1/pools/", "/api/v1/node-keys/"])
def test_the_node_key_opens_none_of_the_consoles_api(world: World, path: str) -> None:
    answer = node_client("gpu-01").get(path)
    assert answer.status_code == 401, (path, answer.content)


def test_the_node_key_cannot_drain_add_nodes_or_submit(world: World) -> None:
    gpu1 = node_client("gpu-01")
    assert post(gpu1, "/api/v1/nodes/gpu-02/drain/", {}).status_code == 401
    assert post(gpu1, "/api/v1/node-keys/", {"node": "gpu-09"}).status_code == 401
    assert post(gpu1, "/api/v1/node-keys/gpu-01/rotate/", {}).status_code == 401
    assert post(gpu1, "/api/v1/jobs/", {"name": "x"}).status_code == 401
    assert Node.objects.get(name="gpu-02").schedulable and not Job.objects.exists()


def test_the_console_pages_and_admin_do_not_take_a_node_key(world: World) -> None:
    gpu1 = node_client("gpu-01")
    for path in ("/", "/jobs/", "/nodes/", "/admin/"):
        answer = gpu1.get(path)
        assert answer.status_code == 302 and "login" in answer["Location"], path


def test_personal_tokens_sessions_revoked_and_rotated_keys_are_refused_by_the_node_api(world: World) -> None:
    from tests.api.v1_helpers import bearer

    assert bearer(world.admin).get("/api/node/v1/pods/").status_code == 401  # staff's own token: not a node key
    session = Client()
    session.force_login(world.admin)
    assert session.get("/api/node/v1/pods/").status_code == 401
    assert Client().get("/api/node/v1/pods/").status_code == 401
    old = node_key_create(node_name="gpu-01").secret
    new = node_key_rotate(node_name="gpu-01").secret
    assert keyed(old).get("/api/node/v1/pods/").status_code == 401
    assert keyed(new).get("/api/node/v1/pods/").status_code == 200
    node_key_revoke(node_name="gpu-01")
    answer = keyed(new).get("/api/node/v1/pods/")
    assert answer.status_code == 401 and "revoked" in answer.json()["detail"]


def test_registration_records_the_log_port_and_gives_the_ticket_key_to_this_node_only(world: World) -> None:
    from scheduler.services.node_keys import node_log_ticket_key

    created = node_key_create(node_name="gpu-01")
    answer = post(keyed(created.secret), "/api/node/v1/register/", {**INVENTORY, "log_port": 7611})
    assert answer.status_code == 200
    created.key.refresh_from_db()
    assert created.key.log_port == 7611
    assert bytes.fromhex(answer.json()["log_ticket_key"]) == node_log_ticket_key(created.key)
    other = node_key_create(node_name="gpu-02")
    assert node_log_ticket_key(other.key) != node_log_ticket_key(created.key)
    bad = post(keyed(created.secret), "/api/node/v1/register/", {**INVENTORY, "agent": "host-a:100:1", "log_port": 0})
    assert bad.status_code == 400 and set(bad.json()) == {"log_port"}


def test_gpu_readings_in_a_heartbeat_go_to_the_nodes_own_pods_only(world: World) -> None:
    from scheduler.models import GpuSample

    mine, my_pods = running_job(world, world.gpu1, "on-gpu-01")
    _theirs, their_pods = running_job(world, world.gpu2, "on-gpu-02")  # the same GPU indices, another node
    gpu1 = node_client("gpu-01")
    assert post(gpu1, "/api/node/v1/register/", INVENTORY).status_code == 200
    readings = [{"index": i, "utilization_percent": 50.0 + i, "memory_used_mib": 1000, "memory_total_mib": 80000}
                for i in range(8)]
    answer = post(gpu1, "/api/node/v1/heartbeat/", {"agent": INVENTORY["agent"], "gpus": readings})
    assert answer.status_code == 200, answer.content
    assert set(GpuSample.objects.values_list("pod_id", flat=True)) == {p.pk for p in my_pods}
    assert not GpuSample.objects.filter(pod__in=their_pods).exists()
    bad = post(gpu1, "/api/node/v1/heartbeat/", {"agent": INVENTORY["agent"],
                                                "gpus": [{"index": 0, "utilization_percent": 250}]})
    assert bad.status_code == 400 and "gpus" in bad.json()


def test_a_pending_pods_image_wait_start_and_never_started_reports_are_applied(world: World) -> None:
    job, pods = running_job(world, world.gpu1, "pending-on-gpu-01")
    job.status = JobStatus.ENV_PREPARING
    job.save()
    Pod.objects.filter(pk__in=[p.pk for p in pods]).update(status=PodStatus.PENDING, started_at=None)
    gpu1 = node_client("gpu-01")
    path = f"/api/node/v1/pods/{pods[0].pk}/report/"
    waited = post(gpu1, path, {"attempt": job.attempt, "event": "image_wait", "cause": "manifest unknown",
                               "retry_in_s": 5})
    assert waited.json() == {"applied": True}
    assert Pod.objects.get(pk=pods[0].pk).reason == "waiting for its image: manifest unknown; next try in 5 s"
    post(gpu1, path, {"attempt": job.attempt, "event": "image_here", "image": "localhost/tidepool-pod:x"})
    pod = Pod.objects.get(pk=pods[0].pk)
    assert (pod.reason, pod.image) == ("", "localhost/tidepool-pod:x")
    assert post(gpu1, path, {"attempt": job.attempt, "event": "running", "pid": 4242}).json() == {"applied": True}
    assert Pod.objects.get(pk=pods[0].pk).status == PodStatus.RUNNING
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING

    other, other_pods = running_job(world, world.gpu1, "never-on-gpu-01")
    other.status = JobStatus.ENV_PREPARING
    other.save()
    Pod.objects.filter(pk__in=[p.pk for p in other_pods]).update(status=PodStatus.PENDING, started_at=None)
    never = post(gpu1, f"/api/node/v1/pods/{other_pods[0].pk}/report/",
                 {"attempt": other.attempt, "event": "never_started", "reason": "could not start: no such dir"})
    assert never.json() == {"applied": True}
    assert Pod.objects.get(pk=other_pods[0].pk).status == PodStatus.STOPPED
    assert Job.objects.get(pk=other.pk).status == JobStatus.QUEUING


def test_a_nodes_pods_are_read_in_the_same_few_queries_however_many_it_runs(world: World) -> None:
    """Every agent reads its pods every poll: the answer's queries must not grow with the pods."""
    client = node_client("gpu-01")
    running_job(world, world.gpu1, "first")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            answer = client.get("/api/node/v1/pods/")
        assert answer.status_code == 200, answer.content
        return len(captured.captured_queries)

    queries()  # the first read gives the pod its MASTER_PORT (written once, ports.py)
    one = queries()
    for n in range(5):
        running_job(world, world.gpu1, f"more-{n}")
    # (This read gives the new pods their MASTER_PORT, as the first one did.)
    assert len(client.get("/api/node/v1/pods/").json()["pods"]) == 6
    assert queries() == one
