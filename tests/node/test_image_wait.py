"""A pod whose image cannot be had stays Pending with the reason and is tried again with a backoff;
it is not a job failure (DESIGN §3). The node agent with a stand-in for its image puller."""

from __future__ import annotations

import pytest

from scheduler.models import Job, JobEvent, Pod
from scheduler.node import agent as agent_module
from scheduler.node.agent import PodAgent
from scheduler.node.image_waits import image_retry_delay
from scheduler.node.runtime.pulls import ImageUnavailable
from scheduler.states import EventKind, JobStatus, PodStatus
from tests.factories import JobFactory, NodeFactory, make_running
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class Puller:
    """Refuses the image until `available`; counts the tries."""

    def __init__(self) -> None:
        self.available = False
        self.tries = 0

    def prepare(self, spec):
        self.tries += 1
        if not self.available:
            raise ImageUnavailable("image team/train:v2 could not be pulled: Error: manifest unknown")
        return spec


@pytest.fixture
def clock(monkeypatch):
    class Clock:  # the agent's clock only: the supervisor's timers keep the real one
        now = 1000.0

        @staticmethod
        def monotonic() -> float:
            return Clock.now

    monkeypatch.setattr(agent_module, "time", Clock)
    return Clock


@pytest.fixture
def waiting_pod(settings, tmp_path):
    settings.TIDEPOOL_DATA_DIR = tmp_path
    job = JobFactory(image="team/train:v2", command="sleep 30")
    (pod,) = make_running(job, NodeFactory(address="10.0.0.1"))
    Pod.objects.filter(pk=pod.pk).update(status=PodStatus.PENDING, started_at=None)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.ENV_PREPARING)
    return Job.objects.get(pk=job.pk), Pod.objects.get(pk=pod.pk)


def test_the_pod_waits_pending_with_the_reason_and_retries_with_backoff(waiting_pod, clock) -> None:
    job, pod = waiting_pod
    agent = PodAgent()
    agent.images = puller = Puller()
    try:
        agent.start(job, pod, world_size=1, master_addr="10.0.0.1")
        pod.refresh_from_db()
        assert pod.status == PodStatus.PENDING
        assert pod.reason == ("waiting for its image: image team/train:v2 could not be pulled: Error: manifest "
                              "unknown; next try in 5 s")
        agent.start(job, pod, world_size=1, master_addr="10.0.0.1")  # the reconcile, 1 s later: not due
        assert puller.tries == 1
        clock.now += 5
        agent.start(job, pod, world_size=1, master_addr="10.0.0.1")
        assert puller.tries == 2
        assert Pod.objects.get(pk=pod.pk).reason.endswith("next try in 10 s")  # doubled
        # One event for the cause, not one per try; no restart used, the job is not failed.
        events = list(JobEvent.objects.filter(job=job, kind=EventKind.IMAGE_WAIT).values_list("reason", flat=True))
        assert len(events) == 1 and "not a failure" in events[0]
        job.refresh_from_db()
        assert (job.status, job.restart_count, job.start_failures) == (JobStatus.ENV_PREPARING, 0, 0)

        puller.available = True  # pushed meanwhile
        clock.now += 10
        agent.start(job, pod, world_size=1, master_addr="10.0.0.1")
        wait_for(lambda: Pod.objects.get(pk=pod.pk).status == PodStatus.RUNNING, timeout=20, what="the pod running")
        assert Pod.objects.get(pk=pod.pk).reason == ""
        assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    finally:
        agent.shutdown(grace_s=0)


def test_the_backoff_doubles_up_to_five_minutes() -> None:
    assert [image_retry_delay(n) for n in (1, 2, 3, 4, 7, 20)] == [5, 10, 20, 40, 300, 300]
