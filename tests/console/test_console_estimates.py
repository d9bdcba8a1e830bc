"""DESIGN §2d where the queue position is shown: the job list and the job page read a waiting job's start
estimate, or why it has none, and a running job's nearing time limit; the API gives the same."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from scheduler.states import JobStatus
from tests.factories import JobFactory, World


def test_a_waiting_job_shows_its_start_estimate_in_the_list_and_on_its_page(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, queue_position=2,
                     estimated_start_at=timezone.now() + timedelta(hours=2, minutes=10, seconds=20))
    listing = alice_client.get(reverse("console:jobs")).content.decode()
    assert "#2" in listing and "starts in about 2 h 10 min" in listing
    page = alice_client.get(reverse("console:job_detail", args=[job.pk])).content.decode()
    assert 'id="job-estimate"' in page and "starts in about 2 h 10 min" in page
    api = alice_client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert api["start_estimate"] == "starts in about 2 h 10 min" and api["estimated_start_at"] is not None


def test_an_unknown_estimate_says_why(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, queue_position=1, estimate_unknown="no_limit")
    assert "unknown: depends on jobs with no time limit" in alice_client.get(reverse("console:jobs")).content.decode()
    api = alice_client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert api["estimated_start_at"] is None and api["start_estimate"] == "unknown: depends on jobs with no time limit"


def test_no_estimate_once_the_job_left_the_queue(world: World, alice_client: Client) -> None:
    JobFactory(workspace=world.vision, quota=world.team_vision, status=JobStatus.STOPPED, queue_position=None,
               estimated_start_at=timezone.now() + timedelta(hours=1))
    assert "starts in about" not in alice_client.get(reverse("console:jobs")).content.decode()


def test_a_running_job_near_its_limit_shows_it(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, status=JobStatus.RUNNING, max_running_minutes=60,
                     started_at=timezone.now() - timedelta(minutes=56, seconds=10))
    assert "time limit in 4 min" in alice_client.get(reverse("console:jobs")).content.decode()
    page = alice_client.get(reverse("console:job_detail", args=[job.pk])).content.decode()
    assert 'id="job-time-limit"' in page and "time limit in 4 min" in page
    assert alice_client.get(f"/api/v1/jobs/{job.pk}/").json()["time_limit_note"] == "time limit in 4 min"
