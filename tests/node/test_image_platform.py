"""A pod whose image is for another platform stays Pending with that reason and is retried with
backoff; it is not a job failure (DESIGN §3). The real path: job_submit → schedule_once → the local
executor's agent with TIDEPOOL_POD_RUNTIME=podman, and an image made here for another platform
(tests/pod_images.py; no registry). Without the check, Podman only warns and starts it, and the
pod fails with "exec format error". Needs root and Podman; skipped with the reason otherwise."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from scheduler.executors import set_executor
from scheduler.loop.cycle import schedule_once
from scheduler.models import JobEvent, Pod, Workspace
from scheduler.node import agent as agent_module
from scheduler.node.local import LocalExecutor
from scheduler.node.runtime.container import podman_available
from scheduler.node.runtime.pulls import node_platform
from scheduler.services.jobs import job_submit
from scheduler.services.nodes import node_register
from scheduler.services.quotas import quota_create
from scheduler.states import EventKind, JobStatus, PodStatus
from tests.pod_images import foreign_image, other_platform

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def foreign(tmp_path):
    if (missing := podman_available()) is not None:
        pytest.skip(f"needs rootful Podman: {missing}")
    with foreign_image(tmp_path) as name:
        yield name


@pytest.fixture
def container_executor(settings, monkeypatch):
    settings.TIDEPOOL_POD_RUNTIME = "podman"

    class Clock:  # the agent's clock only, so the backoff can be passed without waiting
        now = 1000.0

        @staticmethod
        def monotonic() -> float:
            return Clock.now

    monkeypatch.setattr(agent_module, "time", Clock)
    executor = LocalExecutor(reconcile_s=0)
    previous = set_executor(executor)
    yield executor, Clock
    executor.shutdown(grace_s=0)
    set_executor(previous)


@pytest.mark.parametrize("pull", ["never", "missing"])
def test_an_image_for_another_platform_keeps_the_pod_pending_with_the_reason(settings, container_executor, foreign,
                                                                             pull):
    settings.TIDEPOOL_POD_PULL = pull  # missing: pulled again first (localhost/... has no registry: refused)
    executor, clock = container_executor
    node_register(name="cpu-01", gpu_type="A100", gpu_count=1, cpu=8, memory_gib=16, address="127.0.0.1",
                  inventory_source="demo")
    user = get_user_model().objects.create_user("ana")
    space = Workspace.objects.create(name="team")
    space.members.add(user)
    quota = quota_create(name="team", min_gpus={"A100": 1}, min_cpu=8, min_memory_gib=16, workspaces=[space])
    job = job_submit(user=user, workspace=space, quota=quota, name="arm", image=foreign, command="true",
                     roles=[{"name": "worker", "pod_count": 1, "gpus": 1}])
    schedule_once()

    pod = Pod.objects.get(job=job)
    cause = f"image {foreign} is for {other_platform()}, this node is {node_platform()}"
    assert (pod.status, pod.reason) == (PodStatus.PENDING, f"waiting for its image: {cause}; next try in 5 s")
    job.refresh_from_db()
    assert (job.status, job.restart_count, job.start_failures) == (JobStatus.ENV_PREPARING, 0, 0)
    clock.now += 5  # the retry is due: tried again, still the same cause, the backoff doubles
    executor.agent.start(job, pod, world_size=1, master_addr="127.0.0.1")
    pod.refresh_from_db()
    assert (pod.status, pod.reason) == (PodStatus.PENDING, f"waiting for its image: {cause}; next try in 10 s")
    events = list(JobEvent.objects.filter(job=job, kind=EventKind.IMAGE_WAIT).values_list("reason", flat=True))
    assert len(events) == 1 and cause in events[0] and "not a failure" in events[0]
    assert not executor.agent.supervisor.running()
