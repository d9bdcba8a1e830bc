"""The demo cluster, the admin's quota tree, and production settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from scheduler.models import Node, ResourceQuota, Workspace

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_seed_demo_is_idempotent():
    call_command("seed_demo", stdout=open(os.devnull, "w"))
    first = (Node.objects.count(), ResourceQuota.objects.count(), Workspace.objects.count())
    call_command("seed_demo", stdout=open(os.devnull, "w"))
    assert (Node.objects.count(), ResourceQuota.objects.count(), Workspace.objects.count()) == first == (6, 8, 3)
    general = Node.objects.filter(resource_type="general")
    assert general.count() == 4 and {n.gpu_type for n in general} == {"A100"}
    assert sum(n.gpu_count for n in Node.objects.filter(resource_type="lingjun")) == 16
    research = ResourceQuota.objects.get(name="team-research")
    assert research.min_gpus == {"A100": 4}  # deliberately small: its jobs borrow


@pytest.mark.django_db
def test_staff_sees_the_quota_tree_in_admin(client):
    call_command("seed_demo", stdout=open(os.devnull, "w"))
    assert client.login(username="admin", password="tidepool-admin")
    page = client.get("/admin/scheduler/resourcequota/").content.decode()
    # Roots first, each followed by its children.
    assert page.index(">general<") < page.index("team-language") < page.index(">lingjun<") < page.index("lj-language")
    assert "16 A100" in page


@pytest.mark.django_db
def test_admin_quota_form_shows_invariant_at_field(client):
    call_command("seed_demo", stdout=open(os.devnull, "w"))
    client.login(username="admin", password="tidepool-admin")
    general = ResourceQuota.objects.get(name="general")
    before = ResourceQuota.objects.count()
    response = client.post(
        "/admin/scheduler/resourcequota/add/",
        {"name": "team-huge", "parent": general.pk, "resource_type": "general", "min_gpus": '{"A100": 8}',
         "min_cpu": "0", "min_memory_gib": "0", "max_gpus": "null"},
    )
    assert response.status_code == 200
    assert "above general&#x27;s min of 32" in response.content.decode()
    assert ResourceQuota.objects.count() == before


def test_check_deploy_has_no_warnings_with_production_settings():
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL"}}
    env.update(DEBUG="0", SECRET_KEY="x7!Qp2-production-like-secret-" + "k" * 40, ALLOWED_HOSTS="tidepool.example.com")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_refuses_development_secret_with_debug_off():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env["DEBUG"] = "0"
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0
    assert "SECRET_KEY is the development default but DEBUG is off" in result.stderr


@pytest.mark.django_db
def test_sample_jobs_are_submitted_once_and_use_the_example():
    from scheduler.models import Job

    call_command("seed_demo", "--sample-jobs", stdout=open(os.devnull, "w"))
    call_command("seed_demo", "--sample-jobs", stdout=open(os.devnull, "w"))
    jobs = Job.objects.order_by("name")
    assert [j.name for j in jobs] == ["language-bert", "research-sweep", "vision-resnet"]
    assert all("examples/train_linear.py" in j.command and j.fault_tolerance for j in jobs)
    assert Job.objects.get(name="research-sweep").idle_mode == "only"
