"""Pods are kept apart from the control plane and from each other (real processes, LocalExecutor).

- a pod that prints its environment shows nothing of the worker's: no SECRET_KEY, DATABASE_URL,
  REDIS_URL, and a job cannot override Tidepool's own variables;
- with a pod user per workspace (TIDEPOOL_POD_USER=tpn-{workspace}; the users are created with
  useradd when the test runs as root, as CI does, else skipped), one job cannot read or write
  another job's checkpoint or log directory, which are 0700 and owned by their pod's user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import Job, Pod, Workspace
from scheduler.node.local import LocalExecutor
from scheduler.paths import pod_dir, pod_log_path
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import FINAL_JOB_STATUSES, JobStatus
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = {"SECRET_KEY": "sk-control-plane-4242", "DATABASE_URL": "postgres://admin:pw-4242@db/tidepool",
           "REDIS_URL": "redis://:pw-4242@redis:6379/0"}


@pytest.fixture
def executor():
    executor = LocalExecutor(reconcile_s=0)
    previous = set_executor(executor)
    yield executor
    executor.shutdown(grace_s=1)
    set_executor(previous)


@pytest.fixture
def open_data_dir(settings):
    """A data dir pod users can reach (pytest's own tmp tree is 0700 root)."""
    path = Path(tempfile.mkdtemp(prefix="tidepool-iso-", dir="/tmp"))
    path.chmod(0o755)
    settings.TIDEPOOL_DATA_DIR = path
    yield path
    shutil.rmtree(path, ignore_errors=True)


def workspace(name: str):
    node_register(name=f"gpu-{name}", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, inventory_source="demo")
    user = get_user_model().objects.create_user(f"user-{name}")
    space = Workspace.objects.create(name=name)
    space.members.add(user)
    quota = quota_create(name=f"q-{name}", min_gpus={"A100": 8}, min_cpu=32, min_memory_gib=64, workspaces=[space])
    return user, space, quota


def run(team, name: str, command: str, **extra) -> Job:
    user, space, quota = team
    job = job_submit(user=user, workspace=space, quota=quota, name=name, command=command,
                     roles=[{"name": "worker", "pod_count": 1, "gpus": 1}], **extra)

    def finished() -> bool:
        schedule_once()
        return Job.objects.get(pk=job.pk).status in FINAL_JOB_STATUSES

    wait_for(finished, 30, f"job {name} to finish")
    return Job.objects.get(pk=job.pk)


def test_a_pod_printing_its_environment_shows_no_control_plane_secret(executor, monkeypatch):
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    team = workspace("envtest")
    job = run(team, "printenv", "env | sort", environment={"TIDEPOOL_CHECKPOINT_DIR": "/etc", "RANK": "7",
                                                             "MY_SETTING": "mine"})
    assert job.status == JobStatus.SUCCEEDED
    log = pod_log_path(Pod.objects.get(job=job)).read_text()
    for key, value in SECRETS.items():
        assert f"{key}=" not in log and value not in log, key
    assert "MY_SETTING=mine" in log  # the job's own variables are there
    assert f"TIDEPOOL_CHECKPOINT_DIR={job.checkpoint_dir}\n" in log and "RANK=0\n" in log  # ours win


def ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd to create two pod users (CI runs as root)")
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=False, capture_output=True)
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pytest.skip(f"could not create pod user {name} on this OS")


PROBE = """
id -un
try() {{ if eval "$2" >/dev/null 2>&1; then echo "LEAKED-$1"; else echo "DENIED-$1"; fi; }}
try read-checkpoint "cat {ckpt}/ckpt-1"
try list-checkpoints "ls {ckpt}"
try write-checkpoint "echo evil > {ckpt}/evil"
try read-log "cat {log}"
try list-logs "ls {logdir}"
try write-log "echo evil >> {log}"
"""


def test_one_job_cannot_read_or_write_another_jobs_checkpoint_or_log(executor, settings, open_data_dir):
    users = {name: ensure_user(f"tpn-{name}") for name in ("a", "b")}
    settings.TIDEPOOL_POD_USER = "tpn-{workspace}"
    victim = run(workspace("a"), "victim", "id -un; echo A-SECRET; echo weights > $TIDEPOOL_CHECKPOINT_DIR/ckpt-1")
    assert victim.status == JobStatus.SUCCEEDED, victim.waiting_reason
    victim_pod = Pod.objects.get(job=victim)
    victim_log = pod_log_path(victim_pod)
    assert "tpn-a" in victim_log.read_text() and "A-SECRET" in victim_log.read_text()
    for path in (Path(victim.checkpoint_dir), pod_dir(victim, 1)):
        info = path.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (users["a"].pw_uid, 0o700), path

    probe = PROBE.format(ckpt=victim.checkpoint_dir, log=victim_log, logdir=victim_log.parent)
    attacker = run(workspace("b"), "attacker", probe)
    out = pod_log_path(Pod.objects.get(job=attacker)).read_text()
    assert "tpn-b" in out
    assert "LEAKED" not in out, out
    assert out.count("DENIED-") == 6, out
    assert not (Path(victim.checkpoint_dir) / "evil").exists()
    assert "evil" not in victim_log.read_text()
