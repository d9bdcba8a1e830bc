"""DESIGN: "No accepted job is ever lost: not by a crash, a restart".

`manage.py serve` (embedded scheduler + local executor in-process) runs on this test's database,
seeded with the demo cluster. Jobs are submitted through the services from the test process:
two fault-tolerant training jobs and one without fault tolerance run as real processes, two
more wait in the queue (their quotas are full, idle resources off). Then the server crashes:
SIGKILL to it and, as a machine crash would, to its pods' process groups (found in /proc by a
marker their environment gets through TIDEPOOL_POD_ENV_ALLOW). A second server starts on the same database. Every job
is still there with its queue time; the pods that died are recorded as failed because "the
console process restarted"; the job without fault tolerance ends Failed saying so; the
fault-tolerant jobs restart, resume from their checkpoints and end Succeeded with exactly the
result of an uninterrupted run; the queued jobs run and succeed. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from scheduler.demo import seed_demo
from scheduler.models import Job, Pod, ResourceQuota, Workspace
from scheduler.paths import pod_log_path
from scheduler.services.jobs import job_submit
from scheduler.states import FINAL_JOB_STATUSES, JobStatus, PodStatus
from tests.smoke.processes import (
    MARKER_VARIABLE,
    ROOT,
    answers,
    free_port,
    kill_groups,
    marked_processes,
    new_marker,
    process_group,
    stop_servers,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

EXAMPLE = ROOT / "examples" / "train_linear.py"
STEPS = 300
TRAIN_ARGS = f"--steps {STEPS} --checkpoint-every 25 --seed 3"
RESTARTED = "the console process restarted"


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"  # the test database file (an absolute path)
    assert connection.vendor == "postgresql", connection.vendor
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def server_env(settings, marker: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TIDEPOOL_")}
    env.pop("REDIS_URL", None)
    env.update(
        DATABASE_URL=database_url(),
        TIDEPOOL_DATA_DIR=str(settings.TIDEPOOL_DATA_DIR),
        TIDEPOOL_SCHEDULER_INTERVAL="0.3",
        TIDEPOOL_RESTART_BACKOFF_BASE="0.5",
        TIDEPOOL_GRACE_SECONDS="5",
        PYTHONUNBUFFERED="1",
        # Pods get nothing of the server's environment but what this list names: the marker too.
        TIDEPOOL_POD_ENV_ALLOW=f"PATH,LANG,LC_*,{MARKER_VARIABLE}",
        **{MARKER_VARIABLE: marker},
    )
    return env


def start_server(env: dict[str, str], log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def up() -> bool:
        assert server.poll() is None, f"serve exited with {server.returncode}:\n{log.read_text()}"
        return answers(f"http://127.0.0.1:{port}/accounts/login/")

    wait_for(up, 120, "the server to answer", step=0.3, on_timeout=log.read_text)
    return server, log


def training_command(name: str, tmp_path) -> str:
    # Field 5 of /proc/$$/stat: the pod's process group (led by the pod's outer shell).
    return (f"cut -d' ' -f5 /proc/$$/stat > {tmp_path}/{name}-$TIDEPOOL_ATTEMPT.pgid; "
            f"{sys.executable} {EXAMPLE} {TRAIN_ARGS} --step-sleep 0.03 --output {tmp_path}/{name}.json")


def test_crash_and_restart_loses_no_job(settings, tmp_path):
    reference = tmp_path / "reference.json"
    uninterrupted = [sys.executable, str(EXAMPLE), *TRAIN_ARGS.split(),
                     "--checkpoint-dir", str(tmp_path / "ref"), "--output", str(reference)]
    subprocess.run(uninterrupted, check=True, capture_output=True, timeout=120)
    seed_demo()
    admin = get_user_model().objects.get(username="admin")
    vision, language, research = (Workspace.objects.get(name=n) for n in ("vision", "language", "research"))
    quota = {q.name: q for q in ResourceQuota.objects.all()}

    def submit(name, space, quota_name, command, pods=1, gpus=8, **extra) -> Job:
        return job_submit(user=admin, workspace=space, quota=quota[quota_name], name=name, command=command,
                          roles=[{"name": "worker", "pod_count": pods, "gpus": gpus, "gpu_type": "A100"}],
                          **extra)

    marker = new_marker()
    env = server_env(settings, marker)
    first, second = None, None
    try:
        first, _ = start_server(env, tmp_path / "serve-1.log")
        # Running: two fault-tolerant trainings and one plain job (20 of the pool's 32 A100).
        ft_vision = submit("ft-vision", vision, "team-vision", training_command("ft-vision", tmp_path),
                           fault_tolerance=True, max_restarts=3)
        ft_language = submit("ft-language", language, "team-language",
                             training_command("ft-language", tmp_path), fault_tolerance=True, max_restarts=3)
        plain = submit("plain", research, "team-research", "sleep 300", gpus=4)
        running = [ft_vision, ft_language, plain]

        def all_running() -> bool:
            return Job.objects.filter(pk__in=[j.pk for j in running], status=JobStatus.RUNNING).count() == 3

        wait_for(all_running, 60, "three jobs to run", on_timeout=(tmp_path / "serve-1.log").read_text)
        # Queued: their quotas are full and they never borrow (12 A100 are free).
        q_vision = submit("q-vision", vision, "team-vision", "sleep 0.5", pods=2)
        q_language = submit("q-language", language, "team-language", "sleep 0.5")
        queued = [q_vision, q_language]

        def waiting() -> bool:
            jobs = Job.objects.filter(pk__in=[q.pk for q in queued])
            return all(j.queue_position and j.waiting_reason for j in jobs)

        wait_for(waiting, 30, "the scheduler to give the queued jobs a position and a reason")

        def checkpointed() -> dict[int, int] | None:
            steps = {j.pk: (j.progress or {}).get("last_checkpoint_step") or 0
                     for j in Job.objects.filter(pk__in=[ft_vision.pk, ft_language.pk])}
            return steps if min(steps.values()) >= 50 else None

        saved_before = wait_for(checkpointed, 60, "both trainings to save a checkpoint at step 50 or later")
        before = {j.pk: j for j in Job.objects.all()}
        assert {before[q.pk].status for q in queued} == {JobStatus.QUEUING}
        assert len(before) == 5
        live_before = {p.pk: p for p in Pod.objects.filter(status__in=[PodStatus.PENDING, PodStatus.RUNNING])}
        assert {p.job_id for p in live_before.values()} == {j.pk for j in running}

        # The crash: the console process and, with it, every pod it ran.
        pod_groups = {int((tmp_path / f"{name}-1.pgid").read_text()) for name in ("ft-vision", "ft-language")}
        assert pod_groups <= {process_group(pid) for pid in marked_processes(marker)}
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        pods = marked_processes(marker)
        assert pods, "the pods should outlive the killed server until the 'machine' takes them down"
        kill_groups(pods)
        wait_for(lambda: not marked_processes(marker), 15, "the crashed server's pods to die")

        # Down: nothing changed in the database.
        down = {j.pk: j for j in Job.objects.all()}
        assert down.keys() == before.keys()
        assert {pk: j.status for pk, j in down.items()} == {pk: j.status for pk, j in before.items()}
        assert set(Pod.objects.filter(status__in=[PodStatus.PENDING, PodStatus.RUNNING]).values_list(
            "pk", flat=True)) == set(live_before)

        second, log = start_server(env, tmp_path / "serve-2.log")

        # The dead pods are recorded, with the reason a person can act on.
        def recorded() -> bool:
            return Pod.objects.filter(pk__in=live_before, status=PodStatus.FAILED,
                                      reason__contains=RESTARTED).count() == len(live_before)

        wait_for(recorded, 30, "the dead pods to be failed", on_timeout=log.read_text)
        for job in running:
            assert job.events.filter(kind="pod-failed", reason__contains=RESTARTED).exists(), job.name

        def finished() -> bool:
            return all(j.status in FINAL_JOB_STATUSES for j in Job.objects.all())

        wait_for(finished, 150, "every job to finish", step=0.5,
                 on_timeout=lambda: "\n".join(f"{j.name}: {j.status} {j.waiting_reason}"
                                              for j in Job.objects.all()) + "\n" + log.read_text()[-4000:])
        after = {j.pk: j for j in Job.objects.all()}
        assert after.keys() == before.keys(), "a job disappeared"
        for pk, job in after.items():
            assert job.queue_time == before[pk].queue_time, f"{job.name} lost its queue time"

        plain_after = after[plain.pk]
        assert plain_after.status == JobStatus.FAILED and plain_after.restart_count == 0
        failed_event = plain_after.events.get(kind="failed")
        assert RESTARTED in failed_event.reason and "fault tolerance is off" in failed_event.reason

        for job in (ft_vision, ft_language):
            job = after[job.pk]
            assert job.status == JobStatus.SUCCEEDED, (job.name, job.status, job.waiting_reason)
            assert job.restart_count == 1 and job.attempt == 2
            resumed = job.events.get(kind="resumed").reason
            step = int(resumed.removeprefix("resumed from step ").replace(",", ""))
            assert saved_before[job.pk] <= step < STEPS, resumed
            log_file = pod_log_path(Pod.objects.get(job=job, attempt=2))
            assert f"resumed from step {step}" in log_file.read_text()
            result = json.loads((tmp_path / f"{job.name}.json").read_text())
            assert result == json.loads(reference.read_text()), f"{job.name} did not resume exactly"

        for job in queued:
            assert after[job.pk].status == JobStatus.SUCCEEDED, after[job.pk].status
            assert after[job.pk].restart_count == 0
    finally:
        stop_servers([first, second], marker)
    assert marked_processes(marker) == []


def test_pods_of_a_killed_console_do_not_outlive_its_restart(settings, tmp_path):
    seed_demo()
    admin = get_user_model().objects.get(username="admin")
    vision = Workspace.objects.get(name="vision")
    marker = new_marker()
    env = server_env(settings, marker)
    first, second, pgid = None, None, None
    try:
        first, _ = start_server(env, tmp_path / "serve-1.log")
        job = job_submit(user=admin, workspace=vision, quota=ResourceQuota.objects.get(name="team-vision"),
                         name="orphan", command=f"cut -d' ' -f5 /proc/$$/stat > {tmp_path}/orphan.pgid; sleep 300",
                         roles=[{"name": "worker", "pod_count": 1, "gpus": 8}])
        wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING, 60, "the job to run")
        pid_file = tmp_path / "orphan.pgid"
        pgid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 10, "the pod's pid file"))
        os.killpg(first.pid, signal.SIGKILL)  # the console process alone dies
        first.wait(10)

        second, log = start_server(env, tmp_path / "serve-2.log")
        failed = Pod.objects.filter(job=job, status=PodStatus.FAILED, reason__contains=RESTARTED)
        wait_for(failed.exists, 30, "the pod to be recorded failed", on_timeout=log.read_text)

        def group_gone() -> bool:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for(group_gone, 5, "the dead console's pod to be gone, not running on unsupervised")
    finally:
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)  # the orphan, if it is still there
        stop_servers([first, second], marker)
