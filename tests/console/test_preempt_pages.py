"""What the job list, the job page and the dashboard show of preemptions (issue 11)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from scheduler.models import JobPreemption
from scheduler.states import JobStatus, PodOutcome, PodStatus
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db


def row_of(html: str, job_id: int) -> str:
    match = re.search(rf'<tr data-job-id="{job_id}".*?</tr>', html, re.S)
    assert match, f"no row for job {job_id}"
    return match.group(0)


def test_a_requeued_preempted_job_shows_preempted_its_place_and_no_old_nodes(world: World, alice_client: Client):
    job = JobFactory(workspace=world.vision, quota=world.team_vision, fault_tolerance=True, running_on=world.gpu1)
    job.status, job.stop_outcome, job.in_quota = JobStatus.PREEMPTED, "", None
    job.queue_position, job.preemption_count = 3, 2
    job.waiting_reason = "no free unreserved capacity for 1 A100"
    job.save()
    row = row_of(alice_client.get("/jobs/").content.decode(), job.pk)
    assert 'data-status="Preempted"' in row and "resumes automatically" in row and "#3" in row
    assert "gpu-01" not in row  # the previous attempt's node
    assert "data-in-quota" not in row
    assert "2 preempted" in row
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "resumes automatically from its last checkpoint, #3 in the queue" in page
    assert 'id="stop-job"' in page and 'id="restart-job"' not in page  # it is queued: it can be stopped
    api = alice_client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert (api["status"], api["resumes_automatically"], api["nodes"], api["preemption_count"]) == (
        "Preempted", True, [], 2)
    # It waits: the "pending" filter and the quota's pending count include it.
    assert [j["id"] for j in alice_client.get("/api/v1/jobs/?status=pending").json()["results"]] == [job.pk]
    usage = next(q for q in alice_client.get("/api/v1/quotas/").json() if q["name"] == "team-vision")["usage"]
    assert (usage["pending_jobs"], usage["running_jobs"]) == (1, 0)


def test_a_job_that_stays_preempted_offers_restart_not_stop(world: World, alice_client: Client):
    job = JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu1)
    job.pods.update(status=PodStatus.PREEMPTED)
    job.status, job.finished_at, job.stop_outcome = JobStatus.PREEMPTED, timezone.now(), ""
    job.save()
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="restart-job"' in page and 'id="stop-job"' not in page
    assert "fault tolerance is off: restart it" in page
    assert alice_client.post(f"/api/v1/jobs/{job.pk}/stop/").status_code == 400


def test_finished_jobs_keep_no_admission_badge_and_run_time_adds_up(world: World, alice_client: Client):
    done = JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu1)
    done.pods.update(status=PodStatus.SUCCEEDED)
    done.status, done.finished_at = JobStatus.SUCCEEDED, timezone.now()
    done.run_seconds, done.gpu_seconds = 7200.0, 7200.0
    done.save()
    running = JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu2,
                         roles=[{"gpus": 4}])
    running.run_seconds, running.gpu_seconds = 3600.0, 4 * 3600.0
    running.started_at = timezone.now() - timedelta(minutes=30)
    running.save()
    html = alice_client.get("/jobs/").content.decode()
    done_row, running_row = row_of(html, done.pk), row_of(html, running.pk)
    assert "data-in-quota" not in done_row and "gpu-01" in done_row
    assert 'data-in-quota="true"' in running_row
    assert "2h 0m" in done_row and "2.0 GPU-h" in done_row
    assert "1h 30m" in running_row and "6.0 GPU-h" in running_row  # 1 h before, 30 min now, × 4 GPUs
    page = alice_client.get(f"/jobs/{done.pk}/").content.decode()
    assert 'id="last-admission">In Quota' in page and 'id="job-badges"><span class="badge status' in page
    assert "data-in-quota" not in page.split('id="job-badges"')[1].split("</div>")[0]
    api = alice_client.get(f"/api/v1/jobs/{running.pk}/").json()
    assert 5390 <= api["run_seconds"] <= 5410 and api["gpu_hours"] == pytest.approx(6.0, abs=0.01)
    assert alice_client.get(f"/api/v1/jobs/{done.pk}/").json()["in_quota"] is None


def test_preemptions_and_work_lost_on_the_job_page_and_the_dashboard(world: World, alice_client: Client):
    job = JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu1,
                     progress={"step": 1346, "last_checkpoint_step": 1300, "attempt": 1})
    job.preemption_count = 1
    job.save()
    now = timezone.now()
    JobPreemption.objects.create(job=job, attempt=1, time=now, reason="reclaimed for a queued job of quota team-x",
                                 staff_reason="reclaimed by quota team-x for job secret-x", gpus=8,
                                 ran_gpu_seconds=8 * 3600, lost_gpu_seconds=8 * 450, lost_steps=1046,
                                 step=1346, checkpoint_step=300, settled_at=now)
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    section = page.split('id="preemptions"')[1].split("</section>")[0]
    assert "reclaimed for a queued job of quota team-x" in section and "secret-x" not in page
    assert "1,046" in section and "1.0 GPU-h" in section
    assert 'id="progress-step">1,346' in page and "step 1,300" in page
    dashboard = alice_client.get("/").content.decode()
    card = dashboard.split('id="preemption-costs"')[1].split("</div>")[0]
    assert "8.0 / 1.0" in card and "1 preemption;" in card
    api = alice_client.get(f"/api/v1/jobs/{job.pk}/").json()["preemptions"][0]
    assert (api["lost_steps"], api["lost_gpu_seconds"], api["settled"]) == (1046, 3600.0, True)
    assert api["reason"] == "reclaimed for a queued job of quota team-x"


def test_a_preempted_row_drops_its_badge_and_nodes_while_its_pods_exit(world: World, alice_client: Client):
    # Issue 25: from the moment it is Preempted the row shows neither Not in Quota nor the nodes its
    # pods are leaving (it showed both until they had exited); its page still lists those pods.
    job = JobFactory(workspace=world.vision, quota=world.team_vision, running_on=world.gpu1, idle_mode="only")
    job.status, job.stop_outcome, job.in_quota = JobStatus.PREEMPTED, PodOutcome.PREEMPTED, False
    job.save()
    row = row_of(alice_client.get("/jobs/").content.decode(), job.pk)
    assert 'data-status="Preempted"' in row
    assert "data-in-quota" not in row and "gpu-01" not in row and "resumes automatically" not in row
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    badges = page[page.index('id="job-badges"'):page.index("</div>", page.index('id="job-badges"'))]
    assert "data-in-quota" not in badges
    pods = page[page.index('id="pods"'):]
    assert "gpu-01" in pods[: pods.index("</section>")]
    assert 'id="last-admission"' in page  # how it ran is history now


def test_preempted_has_its_own_colour_never_the_red_of_failed(world: World, alice_client: Client):
    css = (Path(__file__).resolve().parents[2] / "static" / "console" / "console.css").read_text()

    def rule(selector: str) -> str:
        match = re.search(re.escape(selector) + r"\s*\{([^}]*)\}", css)
        assert match, selector
        return match.group(1)

    for selector in (".status-preempted", ".event-preempted::before", ".event-preempted .text", ".stat.pre",
                     ".callout.pre"):
        assert "danger" not in rule(selector) and "var(--pre" in rule(selector), selector
    assert "danger" in rule(".status-failed")
    page = alice_client.get("/jobs/").content.decode()
    legend = page[page.index('id="status-legend"'):]
    assert 'status-preempted' in legend and "not a failure" in legend and "status-failed" in legend
