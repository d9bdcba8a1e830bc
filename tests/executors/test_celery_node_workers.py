"""Real Redis and two real Celery node workers: a node dies, its job restarts on the other and finishes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.executors.celery import CeleryExecutor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Node, Pod, Workspace
from scheduler.paths import pod_log_path
from scheduler.services.jobs import job_submit
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus
from tests.executors.node_workers import kill_group, node_worker_env, start_worker, stop_workers
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres]

# Runs 4 s, records its process group so the test can play "the machine died" on node A.
POD_COMMAND = (
    f"cut -d' ' -f5 /proc/$$/stat > pgid-$TIDEPOOL_ATTEMPT; echo rank=$RANK gpus=$CUDA_VISIBLE_DEVICES; "
    f"{sys.executable} -c 'import time; time.sleep(4)'; echo done"
)


def test_lost_node_job_restarts_on_other_node(postgres_db, redis_url, settings, tmp_path):
    from config.celery import app

    app.conf.broker_url = redis_url
    settings.TIDEPOOL_NODE_TIMEOUT = 3
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 0.5
    settings.REDIS_URL = redis_url
    data_dir = tmp_path / "var"
    env = node_worker_env(postgres_db, redis_url, data_dir)
    user, space = team_a(gpus=4)

    previous = set_executor(CeleryExecutor())
    workers = {name: start_worker(name, env, tmp_path) for name in ("node-a", "node-b")}
    workdir = data_dir / "pods"
    try:
        wait_for(lambda: Node.objects.filter(name__in=workers, last_heartbeat__isnull=False).count() == 2,
                 60, "both workers to register their nodes")
        job = job_submit(user=user, workspace=space, quota=space.quotas.get(), name="resilient",
                         command=POD_COMMAND, roles=[{"name": "worker", "pod_count": 1, "gpus": 2}],
                         fault_tolerance=True, max_restarts=2)

        def running_on() -> str | None:
            schedule_once()
            pod = Pod.objects.filter(job=job, status=PodStatus.RUNNING).select_related("node").first()
            return pod.node.name if pod else None

        assert wait_for(running_on, 30, "the job to run") == "node-a"  # best fit, then name
        first = Pod.objects.get(job=job, attempt=1)
        assert first.gpu_indices == [0, 1]

        # Node A dies: its worker is killed, and so are the pods it ran (the machine is gone).
        workers["node-a"].kill()
        workers["node-a"].wait(10)
        pgid_file = wait_for(lambda: next(workdir.rglob("pgid-1"), None), 10, "the pod's pid file")
        kill_group(int(pgid_file.read_text()))

        def lost() -> bool:
            schedule_once()
            return Node.objects.get(name="node-a").lost

        wait_for(lost, 20, "node A to be marked lost", step=0.5)
        first.refresh_from_db()
        assert first.status == PodStatus.FAILED and "lost" in first.reason

        def finished() -> str | None:
            schedule_once()
            job.refresh_from_db()
            return job.status if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None

        assert wait_for(finished, 60, "the job to finish on node B", step=0.5) == JobStatus.SUCCEEDED
        second = Pod.objects.get(job=job, attempt=2)
        assert second.node.name == "node-b" and second.status == PodStatus.SUCCEEDED
        assert job.restart_count == 1
        kinds = list(job.events.values_list("kind", flat=True))
        assert "node-lost" in kinds and "restarting" in kinds and kinds[-1] == "succeeded"
        log = pod_log_path(second).read_text()
        assert "rank=0 gpus=0,1" in log and "done" in log  # CUDA_VISIBLE_DEVICES matches the record
    finally:
        set_executor(previous)
        stop_workers(workers)
        for pgid_file in workdir.rglob("pgid-*") if workdir.exists() else []:
            kill_group(int(pgid_file.read_text()))


def team_a(*, gpus: int):
    """A user in workspace team-a, whose quota guarantees `gpus` A100 (2 CPU cores, 4 GiB per GPU)."""
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team-a")
    space.members.add(user)
    quota_create(name="team-a", min_gpus={"A100": gpus}, min_cpu=2 * gpus, min_memory_gib=4 * gpus,
                 workspaces=[space])
    return user, space


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


# Records its process group, then waits for a file named "go" next to it: it outlives any worker restart.
WAITING_COMMAND = (
    "cut -d' ' -f5 /proc/$$/stat > pgid-$TIDEPOOL_ATTEMPT; echo waiting; "
    "while [ ! -f go ]; do sleep 0.1; done; echo done"
)


def test_a_restarted_worker_adopts_the_pods_its_predecessor_left(postgres_db, redis_url, settings, tmp_path):
    """The node worker is stopped (SIGTERM, an upgrade), then killed (SIGKILL); each time its pod runs
    on and the next worker of the node adopts it: the same process, the same attempt, no restart, and
    its exit is reported by the worker that runs the node then."""
    from config.celery import app

    app.conf.broker_url = redis_url
    settings.TIDEPOOL_NODE_TIMEOUT = 60  # the node is never judged lost here: this is the restart path
    settings.REDIS_URL = redis_url
    data_dir = tmp_path / "var"
    env = node_worker_env(postgres_db, redis_url, data_dir)
    user, space = team_a(gpus=2)

    previous = set_executor(CeleryExecutor())
    workers = {"node-a": start_worker("node-a", env, tmp_path)}
    workdir = data_dir / "pods"
    pgid = None
    try:
        wait_for(lambda: Node.objects.filter(name="node-a", last_heartbeat__isnull=False).exists(), 60,
                 "the worker to register its node")
        job = job_submit(user=user, workspace=space, quota=space.quotas.get(), name="survivor",
                         command=WAITING_COMMAND, roles=[{"name": "worker", "pod_count": 1, "gpus": 2}],
                         fault_tolerance=True)

        def running() -> bool:
            schedule_once()
            return Pod.objects.filter(job=job, status=PodStatus.RUNNING).exists()

        wait_for(running, 30, "the job to run")
        first = Pod.objects.get(job=job, attempt=1)
        pid_file = wait_for(lambda: next(workdir.rglob("pgid-1"), None), 10, "the pod's pid file")
        pgid = int(pid_file.read_text())
        assert pgid == first.pid  # the recorded process group is the pod's

        log_file = tmp_path / "worker-node-a.log"  # rewritten by each start of the worker
        for how in ("terminate", "kill"):  # a warm stop (an upgrade), then a worker that dies
            getattr(workers["node-a"], how)()
            workers["node-a"].wait(30)
            assert group_alive(pgid), f"the pod did not outlive its worker's {how}"
            workers["node-a"] = start_worker("node-a", env, tmp_path)
            wait_for(lambda: "'adopted': 1" in log_file.read_text(errors="replace"), 60,
                     "the new worker to adopt the pod")
            first.refresh_from_db()
            assert first.status == PodStatus.RUNNING and group_alive(pgid)
            assert Node.objects.get(name="node-a").schedulable  # stopping a worker is no drain

        (pid_file.parent / "go").touch()

        def finished() -> str | None:
            schedule_once()
            job.refresh_from_db()
            return job.status if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None

        assert wait_for(finished, 60, "the job to finish", step=0.5) == JobStatus.SUCCEEDED
        first.refresh_from_db()
        assert (first.status, first.exit_code) == (PodStatus.SUCCEEDED, 0)
        assert job.restart_count == 0 and job.attempt == 1 and not Pod.objects.filter(job=job, attempt=2).exists()
    finally:
        set_executor(previous)
        stop_workers(workers)
        if pgid is not None:
            kill_group(pgid)
