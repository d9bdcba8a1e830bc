"""Draining a node is an explicit action for staff: POST /api/v1/nodes/<name>/drain/ and `tidepool drain`
(a node worker that stops never drains its node: tests/node/test_adoption.py)."""

from __future__ import annotations

import pytest

from scheduler.models import Job, Node
from scheduler.states import JobStatus
from tests.api.v1_helpers import bearer
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db


def test_staff_drain_a_node_its_jobs_are_preempted_with_their_grace(world: World) -> None:
    job = JobFactory(workspace=world.vision, quota=world.team_vision, name="on-gpu-01", owner=world.alice,
                     fault_tolerance=True)
    pods = make_running(job, world.gpu1)
    answer = bearer(world.admin).post("/api/v1/nodes/gpu-01/drain/")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["name"], body["schedulable"], body["draining"]) == ("gpu-01", False, True)
    node = Node.objects.get(name="gpu-01")
    assert not node.schedulable and node.draining
    job.refresh_from_db()
    assert job.status == JobStatus.PREEMPTED
    assert {pod.terminate_requested for pod in job.pods.filter(pk__in=[p.pk for p in pods])} == {"preempted"}
    assert Node.objects.get(name="gpu-02").schedulable  # only the node asked for


def test_a_drain_is_refused_to_non_staff_and_an_unknown_node_is_a_404(world: World) -> None:
    refused = bearer(world.alice).post("/api/v1/nodes/gpu-01/drain/")
    assert refused.status_code == 403 and "staff" in refused.json()["detail"]
    assert Node.objects.get(name="gpu-01").schedulable
    assert bearer(world.admin).post("/api/v1/nodes/gpu-99/drain/").status_code == 404
    assert not Job.objects.exists()
