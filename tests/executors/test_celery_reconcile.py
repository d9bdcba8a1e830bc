"""Real Redis, PostgreSQL and Celery node workers: level-triggered pods and restarts.

- a start message that is never sent: the worker's periodic reconcile starts the pod anyway;
- the worker is SIGKILLed while its pod runs; the pod exits 0 while no worker is there; the next
  worker reads the pod's exit file and the job ends Succeeded (not Failed, not restarted);
- a warm restart (SIGTERM drains, then a new worker) leaves the node schedulable again;
- the worker's own environment (SECRET_KEY, DATABASE_URL, REDIS_URL) never reaches a pod;
- a second worker started for a node whose worker is alive waits for the node's lease and touches
  none of its pods.
"""

from __future__ import annotations

import sys

import pytest

from scheduler.executors import set_executor
from scheduler.executors.celery import CeleryExecutor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Node, Pod
from scheduler.paths import pod_log_path
from scheduler.services.jobs import job_submit
from scheduler.states import FINAL_JOB_STATUSES, JobStatus, PodStatus
from tests.executors.node_workers import kill_group, node_worker_env, start_worker, stop_workers
from tests.executors.test_celery_node_workers import group_alive, team_a
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres,
              pytest.mark.timeout(240)]


class DroppingExecutor(CeleryExecutor):
    """Sends no start task (a scheduler killed between commit and send); terminations still go."""

    def launch(self, launches) -> None:
        pass


@pytest.fixture
def cluster(postgres_db, redis_url, settings, tmp_path):
    from config.celery import app

    app.conf.broker_url = redis_url
    settings.REDIS_URL = redis_url
    settings.TIDEPOOL_NODE_TIMEOUT = 60
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 0.5
    env = node_worker_env(postgres_db, redis_url, tmp_path / "var")
    env.update(TIDEPOOL_RECONCILE_SECONDS="1", TIDEPOOL_LEASE_SECONDS="6", SECRET_KEY="sk-worker-secret-4242")
    workers: dict = {}
    yield env, workers, tmp_path
    stop_workers(workers)


def finished(job: Job):
    def check() -> str | None:
        schedule_once()
        status = Job.objects.get(pk=job.pk).status
        return status if status in FINAL_JOB_STATUSES else None
    return check


def test_a_start_never_sent_is_started_by_the_workers_reconcile(cluster):
    env, workers, tmp_path = cluster
    user, space = team_a(gpus=2)
    previous = set_executor(DroppingExecutor())
    try:
        workers["node-a"] = start_worker("node-a", env, tmp_path)
        wait_for(lambda: Node.objects.filter(name="node-a", last_heartbeat__isnull=False).exists(), 60,
                 "the worker to register its node")
        job = job_submit(user=user, workspace=space, quota=space.quotas.get(), name="dropped", command="env | sort",
                         roles=[{"name": "worker", "pod_count": 1, "gpus": 2}])
        assert wait_for(finished(job), 60, "the reconcile to run the pod", step=0.5) == JobStatus.SUCCEEDED
        log = pod_log_path(Pod.objects.get(job=job)).read_text()
        assert "TIDEPOOL_POD_ID=" in log
        for secret in ("SECRET_KEY=", "DATABASE_URL=", "REDIS_URL=", "sk-worker-secret-4242", env["DATABASE_URL"],
                       env["REDIS_URL"]):
            assert secret not in log, secret
    finally:
        set_executor(previous)


def test_a_pod_that_exits_0_while_its_worker_is_dead_ends_succeeded(cluster):
    env, workers, tmp_path = cluster
    user, space = team_a(gpus=2)
    previous = set_executor(CeleryExecutor())
    marker = tmp_path / "pod-started"
    command = f"cut -d' ' -f5 /proc/$$/stat > {marker}; {sys.executable} -c 'import time; time.sleep(4)'; exit 0"
    pgid = None
    try:
        workers["node-a"] = start_worker("node-a", env, tmp_path)
        wait_for(lambda: Node.objects.filter(name="node-a", last_heartbeat__isnull=False).exists(), 60,
                 "the worker to register its node")
        job = job_submit(user=user, workspace=space, quota=space.quotas.get(), name="survivor", command=command,
                         roles=[{"name": "worker", "pod_count": 1, "gpus": 2}], fault_tolerance=True)

        def running() -> bool:
            schedule_once()
            return Pod.objects.filter(job=job, status=PodStatus.RUNNING).exists()

        wait_for(running, 30, "the pod to run")
        pgid = int(wait_for(lambda: marker.exists() and marker.read_text().strip(), 10, "the pod's group"))
        workers["node-a"].kill()  # SIGKILL: no drain, no report
        workers["node-a"].wait(10)
        wait_for(lambda: not group_alive(pgid), 20, "the pod to exit 0 on its own, unsupervised")
        assert Pod.objects.get(job=job).status == PodStatus.RUNNING  # nobody could tell the database

        workers["node-a"] = start_worker("node-a", env, tmp_path)
        assert wait_for(finished(job), 60, "the new worker to read the exit back", step=0.5) == JobStatus.SUCCEEDED
        job.refresh_from_db()
        pod = Pod.objects.get(job=job)
        assert (pod.status, pod.exit_code, job.restart_count) == (PodStatus.SUCCEEDED, 0, 0)
        assert "exit file" in pod.reason
        assert Pod.objects.filter(job=job).count() == 1  # it never ran twice
    finally:
        set_executor(previous)
        if pgid is not None:
            kill_group(pgid)


def test_a_warm_worker_restart_leaves_the_node_schedulable(cluster):
    env, workers, tmp_path = cluster
    workers["node-a"] = start_worker("node-a", env, tmp_path)
    registered = Node.objects.filter(name="node-a", last_heartbeat__isnull=False, schedulable=True)
    wait_for(registered.exists, 60, "the worker to register its node")
    stop_workers(workers)  # SIGTERM: the worker stops; it does not drain its node
    node = Node.objects.get(name="node-a")
    assert (node.schedulable, node.draining, node.worker_drained) == (True, False, False)
    before = node.last_heartbeat
    workers["node-a"] = start_worker("node-a", env, tmp_path)
    wait_for(lambda: Node.objects.get(name="node-a").last_heartbeat != before, 60, "the worker to register again")
    node = Node.objects.get(name="node-a")
    assert (node.schedulable, node.worker_drained, node.draining) == (True, False, False)


def test_a_second_worker_for_a_running_node_waits_and_kills_nothing(cluster):
    env, workers, tmp_path = cluster
    user, space = team_a(gpus=2)
    previous = set_executor(CeleryExecutor())
    try:
        workers["node-a"] = start_worker("node-a", env, tmp_path)
        wait_for(lambda: Node.objects.filter(name="node-a", last_heartbeat__isnull=False).exists(), 60,
                 "the worker to register its node")
        job = job_submit(user=user, workspace=space, quota=space.quotas.get(), name="undisturbed",
                         command="sleep 300", roles=[{"name": "worker", "pod_count": 1, "gpus": 2}])

        def running() -> bool:
            schedule_once()
            return Pod.objects.filter(job=job, status=PodStatus.RUNNING).exists()

        wait_for(running, 30, "the pod to run")
        pod = Pod.objects.get(job=job)
        second_logs = tmp_path / "second"
        second_logs.mkdir()
        workers["node-a-again"] = start_worker("node-a", env, second_logs)  # the same node, a second time
        log = second_logs / "worker-node-a.log"
        wait_for(lambda: "is run by another live worker" in log.read_text(errors="replace"), 60,
                 "the second worker to say it waits")
        pod.refresh_from_db()
        assert pod.status == PodStatus.RUNNING and group_alive(pod.pid)
        assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
        assert not Node.objects.get(name="node-a").lost
    finally:
        set_executor(previous)
