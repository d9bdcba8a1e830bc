"""Migration 0004_preempt: old CPU-only roles get the flag; old reasons that named other jobs are split
into a member text and a staff text."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0003_pod_pid")]
AFTER = [("scheduler", "0004_preempt_accounting_and_reasons")]


@pytest.fixture
def back_to_latest():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # whatever comes after 0004 (other branches)


def test_old_rows_are_brought_forward(back_to_latest) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    space = apps.get_model("scheduler", "Workspace").objects.create(name="w")
    quota = apps.get_model("scheduler", "ResourceQuota").objects.create(name="q")
    job_model = apps.get_model("scheduler", "Job")
    job = job_model.objects.create(name="old", workspace=space, quota=quota, command="x",
                                   waiting_reason="waiting for 2 job(s) to exit: a#3, b#4")
    role_model = apps.get_model("scheduler", "JobRole")
    role_model.objects.create(job=job, name="prep", pod_count=1, gpus=0)
    role_model.objects.create(job=job, name="worker", pod_count=1, gpus=2)
    event_model = apps.get_model("scheduler", "JobEvent")
    event_model.objects.create(job=job, kind="preempted", reason="reclaimed by quota team-a for job bert#9")
    event_model.objects.create(job=job, kind="queued", reason="queuing")

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    roles = dict(apps.get_model("scheduler", "JobRole").objects.values_list("name", "cpu_only"))
    assert roles == {"prep": True, "worker": False}
    job = apps.get_model("scheduler", "Job").objects.get(name="old")
    assert (job.waiting_reason, job.waiting_reason_staff) == ("waiting for 2 preempted jobs to exit",
                                                              "waiting for 2 job(s) to exit: a, b")
    events = list(apps.get_model("scheduler", "JobEvent").objects.order_by("id").values_list("reason", "staff_reason"))
    assert events == [("reclaimed for a queued job of quota team-a", "reclaimed by quota team-a for job bert"),
                      ("queuing", "")]
    assert job.preemption_count == 0 and job.run_seconds == 0
