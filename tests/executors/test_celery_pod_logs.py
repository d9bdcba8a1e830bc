"""Pod logs live on the node: read through the node worker's control command, not the local disk.

The integration test runs real Redis and two real Celery node workers on PostgreSQL; the test
process (the console) has a TIDEPOOL_DATA_DIR of its own, so it can read a log only by asking.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from scheduler.executors import set_executor
from scheduler.executors.celery import CeleryExecutor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Node, Pod, Workspace
from scheduler.node import logs as pod_logs
from scheduler.node.logs import LogUnavailable, ask_node, read_pod_log, serve_pod_log
from scheduler.node.runtime.logs import NODE_MAX_BYTES
from scheduler.node.specs import pod_log_path
from scheduler.services.jobs import job_submit
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus
from tests.executors.node_workers import node_worker_env, start_worker, stop_workers
from tests.factories import JobFactory, NodeFactory, make_running
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]

LINES = 1500  # ~100 KiB: more than one control-channel answer (NODE_MAX_BYTES)
# Prints the known lines, waits for the test to have read them, then says its last words.
POD_COMMAND = (
    f"{sys.executable} -c 'for i in range({LINES}): print(f\"known line {{i:04d}} \" + \"x\" * 50)'; "
    "while [ ! -e $TIDEPOOL_GO_FILE ]; do sleep 0.1; done; echo 'last words: é'"
)


@pytest.mark.django_db
def test_node_serves_only_logs_of_its_own_pods(settings):
    """The node side alone (no broker): bounded reads, only pods the database places on this node."""
    NodeFactory(name="gpu-08")
    node = NodeFactory(name="gpu-07")
    (pod,) = make_running(JobFactory(), node)
    path = pod_log_path(pod)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"a" * (3 * NODE_MAX_BYTES))
    reply = serve_pod_log("gpu-07", pod.pk, pod.attempt, 10, 10**9)
    assert reply["node"] == "gpu-07" and len(reply["text"]) == NODE_MAX_BYTES
    assert (reply["start"], reply["offset"], reply["size"]) == (10, 10 + NODE_MAX_BYTES, 3 * NODE_MAX_BYTES)
    tail = serve_pod_log("gpu-07", pod.pk, pod.attempt, -100, 1000)
    assert (tail["start"], tail["offset"], len(tail["text"])) == (3 * NODE_MAX_BYTES - 100, 3 * NODE_MAX_BYTES, 100)
    assert "does not run on node gpu-08" in serve_pod_log("gpu-08", pod.pk, pod.attempt, 0, 100)["refused"]
    assert "is attempt 1, not 2" in serve_pod_log("gpu-07", pod.pk, 2, 0, 100)["refused"]
    assert "refused" in serve_pod_log("gpu-07", 10**6, 1, 0, 100)


@pytest.mark.django_db(transaction=True)
@pytest.mark.redis
@pytest.mark.postgres
def test_console_reads_and_follows_a_log_on_the_node(postgres_db, redis_url, settings, tmp_path, monkeypatch):
    from config.celery import app

    app.conf.broker_url = redis_url
    settings.REDIS_URL = redis_url
    settings.TIDEPOOL_EXECUTOR = "celery"
    node_data = tmp_path / "node-var"  # the nodes' disk; the console's is settings.TIDEPOOL_DATA_DIR
    go_file = tmp_path / "go"
    env = node_worker_env(postgres_db, redis_url, node_data)
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team-a")
    space.members.add(user)
    quota_create(name="team-a", min_gpus={"A100": 4}, min_cpu=8, min_memory_gib=16, workspaces=[space])
    client = Client()
    client.force_login(user)

    previous = set_executor(CeleryExecutor())
    workers = {name: start_worker(name, env, tmp_path) for name in ("node-a", "node-b")}
    try:
        wait_for(lambda: Node.objects.filter(name__in=workers, last_heartbeat__isnull=False).count() == 2,
                 60, "both workers to register their nodes")
        job = job_submit(user=user, workspace=space, quota=space.quotas.get(), name="chatty",
                         command=POD_COMMAND, roles=[{"name": "worker", "pod_count": 1, "gpus": 1}],
                         environment={"TIDEPOOL_GO_FILE": str(go_file)})

        def running_pod() -> Pod | None:
            schedule_once()
            return Pod.objects.filter(job=job, status=PodStatus.RUNNING).select_related("node").first()

        pod = wait_for(running_pod, 30, "the job to run")
        node, other = pod.node.name, ({"node-a", "node-b"} - {pod.node.name}).pop()
        remote_path = node_data / pod_log_path(pod).relative_to(settings.TIDEPOOL_DATA_DIR)
        assert not pod_log_path(pod).exists()  # not readable here: only the node has it

        def printed_all() -> pod_logs.LogChunk | None:
            chunk = read_pod_log(pod, 0, 1024 * 1024)
            return chunk if f"known line {LINES - 1:04d}" in chunk.text else None

        # The whole log, over several answers of at most 64 KiB, equals the node's file.
        first = wait_for(printed_all, 15, "the pod's lines to reach the log")
        assert first.start == 0 and first.offset > NODE_MAX_BYTES
        assert first.text == remote_path.read_bytes()[: first.offset].decode()
        assert "last words" not in first.text

        # The API (the console's log card polls it): a tail, then follow by offset.
        began = time.monotonic()
        tail = client.get(f"/api/v1/jobs/{job.pk}/logs/?lines=2").json()
        # Two answers, each taken as soon as the node replies (not after the 2 s wait for stragglers).
        assert time.monotonic() - began < pod_logs.NODE_ANSWER_TIMEOUT_S
        assert tail["pod"]["node"] == node and tail["reset"] is True
        assert tail["text"] == "".join(f"known line {i:04d} {'x' * 50}\n" for i in (LINES - 2, LINES - 1))
        assert tail["offset"] == first.offset
        nothing_new = client.get(f"/api/v1/jobs/{job.pk}/logs/?shown={pod.pk}&offset={tail['offset']}").json()
        assert (nothing_new["text"], nothing_new["offset"], nothing_new["reset"]) == ("", tail["offset"], False)

        go_file.touch()

        def finished() -> str | None:
            schedule_once()
            job.refresh_from_db()
            return job.status if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None

        assert wait_for(finished, 20, "the job to finish") == JobStatus.SUCCEEDED
        follow = client.get(f"/api/v1/jobs/{job.pk}/logs/?shown={pod.pk}&offset={tail['offset']}").json()
        assert follow["reset"] is False and follow["text"].startswith("last words: é\n")
        assert "known line" not in follow["text"]
        assert follow["offset"] == remote_path.stat().st_size
        after = read_pod_log(pod, first.offset, 1024)
        assert after.text == follow["text"][:len(after.text)] and after.start == first.offset

        # Only the pod's node serves it: the other node refuses, although the file is on its disk here.
        with pytest.raises(LogUnavailable, match=f"node {other} refused: pod {pod.pk} does not run on node {other}"):
            ask_node(other, pod.pk, pod.attempt, 0, 100)
        with pytest.raises(LogUnavailable, match="is attempt 1, not 2"):
            ask_node(node, pod.pk, 2, 0, 100)

        # A node whose worker does not answer: a clear message, and a 503 from the API.
        monkeypatch.setattr(pod_logs, "NODE_ANSWER_TIMEOUT_S", 0.5)
        silent = Node.objects.create(name="gpu-07", gpu_type="A100", gpu_count=1, cpu=1, memory_gib=1,
                                     schedulable=False)
        orphan = Pod.objects.create(job=job, role="worker", index=0, attempt=9, node=silent,
                                    status=PodStatus.FAILED)
        with pytest.raises(LogUnavailable) as refused:
            read_pod_log(orphan, 0, 100)
        assert str(refused.value) == "node gpu-07 did not answer: the log is on the node; is its worker running?"
        unavailable = client.get(f"/api/v1/jobs/{job.pk}/logs/?pod={orphan.pk}")
        assert unavailable.status_code == 503
        assert unavailable.json()["detail"] == str(refused.value) and unavailable.json()["pod"]["node"] == "gpu-07"
    finally:
        set_executor(previous)
        go_file.touch()
        stop_workers(workers)
