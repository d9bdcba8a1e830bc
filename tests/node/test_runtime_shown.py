"""The console says how each node runs its pods (podman, host in cgroups, host) and which image each
pod ran: reported by the node's worker at registration, and by its agent when a pod starts."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.models import Job, Node
from scheduler.node.runtime.host_cgroups import CgroupSupervisor
from scheduler.node.runtime.process import PodSupervisor
from scheduler.node.runtimes import runtime_label
from scheduler.services.nodes import node_register
from tests.factories import JobFactory, World, make_running

pytestmark = pytest.mark.django_db


def test_the_label_names_the_runtime() -> None:
    assert runtime_label(PodSupervisor()) == "host"
    assert runtime_label(CgroupSupervisor({}, pids_max=1, default_memory_gib=1)) == "host (cgroups)"


def test_registration_records_the_runtime_and_a_plain_re_registration_keeps_it() -> None:
    node_register(name="gpu-09", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64, pod_runtime="podman",
                  pod_image="localhost/tidepool-pod:abc")
    node_register(name="gpu-09", gpu_type="A100", gpu_count=8, cpu=32, memory_gib=64)  # e.g. the admin's
    node = Node.objects.get(name="gpu-09")
    assert (node.pod_runtime, node.pod_image) == ("podman", "localhost/tidepool-pod:abc")


def test_the_nodes_page_and_the_job_page_show_runtime_and_image(world: World, staff_client: Client) -> None:
    Node.objects.filter(pk=world.gpu1.pk).update(pod_runtime="podman", pod_image="localhost/tidepool-pod:abc")
    nodes_page = staff_client.get("/nodes/").content.decode()
    assert "pods: podman" in nodes_page and "localhost/tidepool-pod:abc" in nodes_page

    job = JobFactory(workspace=world.vision, quota=world.team_vision, image="team/train:v2")
    (pod,) = make_running(job, Node.objects.get(pk=world.gpu1.pk))
    type(pod).objects.filter(pk=pod.pk).update(image="registry.example.com/team/train:v2")
    job_page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "registry.example.com/team/train:v2" in job_page and "podman" in job_page
    assert Job.objects.get(pk=job.pk).image == "team/train:v2"
