"""Elastic jobs in the console (DESIGN §2c): the form's "instances: min … max" (refused with idle off at that
field), and the job list and page showing "3 of 2–8 pods", the resize counts and the resize history."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from scheduler.models import Job, JobResize
from tests.console.test_console_job_form import URL, form_data
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db


def test_the_form_submits_an_elastic_role(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, form_data(world, **{"roles-1-min_pod_count": "1"}))
    assert response.status_code == 302
    worker = Job.objects.get().roles.get(name="worker")
    assert (worker.pod_count, worker.min_pod_count) == (2, 1)


def test_an_elastic_role_with_idle_off_is_refused_at_its_field(world: World, alice_client: Client) -> None:
    response = alice_client.post(URL, form_data(world, idle_mode="off", **{"roles-1-min_pod_count": "1"}))
    html = response.content.decode()
    assert response.status_code == 400 and "needs Idle Resources acceptable or only" in html
    form = response.context["formset"].forms[1]
    assert "min_pod_count" in form.errors


def test_the_list_and_the_page_show_the_size_and_the_resizes(world: World, alice_client: Client) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, idle_mode="acceptable",
                     roles=[{"pod_count": 8, "min_pod_count": 2, "gpus": 1}])
    pods = make_running(job, world.gpu1, in_quota=False)
    for pod in pods[3:]:
        pod.delete()  # runs 3 of its 8 pods
    job.shrink_count = 1
    job.save()
    JobResize.objects.create(job=job, attempt=job.attempt, kind=JobResize.Kind.SHRINK, time=timezone.now(),
                             from_pods=4, to_pods=3, indexes=[3], gpus=4, lost_gpu_seconds=120,
                             reason="shrunk from 4 to 3 pods: reclaimed for a queued job of quota team-language")
    listing = alice_client.get("/jobs/").content.decode()
    assert 'data-elastic-pods="3 of 2–8 pods"' in listing
    page = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "3 of 2–8 pods" in page and "1 shrunk · 0 grown" in page
    assert 'id="resizes"' in page and "shrunk from 4 to 3 pods: reclaimed for a queued job of quota team-language" in page
    assert "120 GPU-s" in page
