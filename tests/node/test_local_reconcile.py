"""Level-triggered pods on the embedded executor: the database is the truth, the node converges.

Real processes through the LocalExecutor and its reconcile loop (SQLite or PostgreSQL).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Pod, Workspace
from scheduler.node.local import LocalExecutor
from scheduler.services.jobs import job_submit
from scheduler.services.leases import EMBEDDED_CONSOLE, lease_acquire, this_owner
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import JobStatus, PodStatus
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class DroppingExecutor(LocalExecutor):
    """Loses every start message (as a scheduler killed between commit and send would)."""

    def launch(self, launches) -> None:
        self.dropped = getattr(self, "dropped", 0) + sum(len(pods) for _job, pods in launches)


@pytest.fixture
def team(db):
    node_register(name="gpu-01", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, inventory_source="demo")
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team")
    space.members.add(user)
    quota = quota_create(name="team", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64, workspaces=[space])
    return user, space, quota


def submit(team, name: str, command: str, **extra) -> Job:
    user, space, quota = team
    return job_submit(user=user, workspace=space, quota=quota, name=name, command=command,
                      roles=[{"name": "worker", "pod_count": 2, "gpus": 1}], **extra)


def test_a_dropped_start_message_still_gets_the_pods_started_by_the_reconcile(team):
    executor = DroppingExecutor(reconcile_s=0.5)
    executor.lease_owner = this_owner()  # as `manage.py serve` does, under the console's lease
    assert lease_acquire(role=EMBEDDED_CONSOLE, owner=this_owner())[0]
    previous = set_executor(executor)
    try:
        job = submit(team, "dropped", "echo rank=$RANK; exit 0")
        schedule_once()
        assert executor.dropped == 2  # nothing was sent: the pods are only rows
        assert Job.objects.get(pk=job.pk).status == JobStatus.ENV_PREPARING

        def finished() -> str | None:
            schedule_once()
            status = Job.objects.get(pk=job.pk).status
            return status if status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None

        assert wait_for(finished, 30, "the reconcile to start and finish the pods") == JobStatus.SUCCEEDED
        assert set(Pod.objects.filter(job=job).values_list("status", flat=True)) == {PodStatus.SUCCEEDED}
    finally:
        executor.shutdown(grace_s=1)
        set_executor(previous)


def test_a_pod_that_cannot_start_requeues_its_job_without_using_a_restart(team, settings):
    settings.TIDEPOOL_RESTART_BACKOFF_BASE = 60  # stays queued for the assertions
    executor = LocalExecutor(reconcile_s=0)
    previous = set_executor(executor)
    try:
        job = submit(team, "blocked", "exit 0", fault_tolerance=False, max_restarts=0)
        # Its checkpoint directory cannot be made: a file is in the way.
        blocker = Path(job.checkpoint_dir)
        blocker.parent.mkdir(parents=True, exist_ok=True)
        blocker.write_text("not a directory")
        schedule_once()
        job.refresh_from_db()
        assert job.status == JobStatus.QUEUING, (job.status, job.waiting_reason)
        assert (job.restart_count, job.start_failures, job.stop_outcome) == (0, 1, "")
        assert "never started" in job.waiting_reason or job.events.filter(reason__contains="never started").exists()
        assert job.restart_after is not None  # backoff before it is placed again
        pods = list(Pod.objects.filter(job=job))
        assert {p.status for p in pods} == {PodStatus.STOPPED}
        reasons = sorted(p.reason for p in pods)
        assert "never started: could not start" in reasons[0] and "is a symlink or not a directory" in reasons[0]
        assert reasons[1] == "stopped before it started"  # its sibling, fenced before it ran
        assert not job.events.filter(kind="failed").exists()
    finally:
        executor.shutdown(grace_s=1)
        set_executor(previous)


def test_the_reconcile_stops_a_pod_the_database_ended(team):
    executor = LocalExecutor(reconcile_s=0.5)
    executor.lease_owner = this_owner()
    assert lease_acquire(role=EMBEDDED_CONSOLE, owner=this_owner())[0]
    previous = set_executor(executor)
    try:
        job = submit(team, "ended", "sleep 60")
        schedule_once()
        wait_for(lambda: Pod.objects.filter(job=job, status=PodStatus.RUNNING).count() == 2, 20, "the pods to run")
        # The database ends one pod behind the node's back (no terminate message is sent).
        pod = Pod.objects.filter(job=job).first()
        Pod.objects.filter(pk=pod.pk).update(status=PodStatus.FAILED, reason="ended by the test")
        running = lambda: {(r.pod_id, r.attempt) for r in executor.agent.supervisor.running()}  # noqa: E731
        wait_for(lambda: (pod.pk, pod.attempt) not in running(), 20, "the reconcile to stop the pod")
    finally:
        executor.shutdown(grace_s=1)
        set_executor(previous)


def test_without_the_consoles_lease_the_local_reconcile_touches_nothing(team):
    """A second process (or any executor not holding the lease) never starts the demo nodes' pods."""
    executor = DroppingExecutor(reconcile_s=0.3)
    executor.lease_owner = this_owner()  # it believes it owns them, but another console holds the lease
    assert lease_acquire(role=EMBEDDED_CONSOLE, owner="elsewhere:1:1")[0]
    previous = set_executor(executor)
    try:
        job = submit(team, "not-mine", "exit 0")
        schedule_once()
        import time

        time.sleep(2)  # several reconcile periods
        assert set(Pod.objects.filter(job=job).values_list("status", flat=True)) == {PodStatus.PENDING}
        assert not executor.agent.supervisor.running()
    finally:
        executor.shutdown(grace_s=1)
        set_executor(previous)
