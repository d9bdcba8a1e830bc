"""One embedded console per database: a second `manage.py serve` on the same database refuses to
start, says why, and kills nothing: the first console's pod keeps running, its node is not lost,
its job stays Running. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from django.contrib.auth import get_user_model

from scheduler.demo import seed_demo
from scheduler.models import Job, Node, Pod, ResourceQuota, Workspace
from scheduler.services.jobs import job_submit
from scheduler.states import JobStatus, PodStatus
from tests.smoke.processes import ROOT, free_port, marked_processes, new_marker, stop_servers, wait_for
from tests.smoke.test_restart_loses_nothing import server_env, start_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(200)]


def test_a_second_console_on_the_same_database_refuses_and_kills_nothing(settings, tmp_path):
    seed_demo()
    admin = get_user_model().objects.get(username="admin")
    marker = new_marker()
    env = server_env(settings, marker)
    first = None
    try:
        first, _ = start_server(env, tmp_path / "serve-1.log")
        job = job_submit(user=admin, workspace=Workspace.objects.get(name="vision"),
                         quota=ResourceQuota.objects.get(name="team-vision"), name="keeps-running",
                         command="sleep 300", roles=[{"name": "worker", "pod_count": 1, "gpus": 8}])
        wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING, 60, "the job to run")
        pod = Pod.objects.get(job=job)
        pods_before = set(marked_processes(marker))

        started = time.monotonic()
        second = subprocess.run([sys.executable, "manage.py", "serve", "--port", str(free_port())], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert "another Tidepool console" in second.stderr and "touched no pod" in second.stderr, second.stderr
        assert time.monotonic() - started < 60

        time.sleep(1)
        pod.refresh_from_db()
        assert pod.status == PodStatus.RUNNING and pod.exit_code is None
        assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
        assert not Node.objects.filter(lost=True).exists()
        assert pods_before <= set(marked_processes(marker)), "the second console killed something"
        assert first.poll() is None
    finally:
        stop_servers([first], marker)
