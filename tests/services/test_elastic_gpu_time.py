"""An elastic job's GPU time counts the GPUs it held, resize by resize (DESIGN §2c), not its maximum.

The story of test_elastic_live, 1000 s in the past so that the attempt ends now: the job runs its base
(1 pod × 2 GPUs) for 300 s, grows to 4 pods (8 GPUs) for 100 s, is shrunk to 2 pods (4 GPUs) and keeps
those until it ends about 600 s later: 2×300 + 8×100 + 4×600 = 3,800 GPU-seconds, where counting the
attempt at its maximum made it 8×1000 = 8,000.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from scheduler.loop.cycle import schedule_once
from scheduler.models import JobPreemption, Pod
from scheduler.services.lifecycle import job_preempt, pod_exited
from scheduler.states import JobStatus, PodOutcome
from tests.services import test_elastic_live as story
from tests.services.test_elastic_live import ELASTIC, live, start, submit

cluster = story.cluster  # test_elastic_live's cluster fixture, by its name

pytestmark = pytest.mark.django_db(transaction=True)

HELD = 2 * 300 + 8 * 100  # GPU-seconds before the shrink
SLACK = 4 * 5.0  # the 4 GPUs held after it, for the seconds the test itself takes


def _shrunk_elastic_job(cluster, past):
    elastic = submit(cluster, "ben", "elastic", ELASTIC, idle_mode="only")
    schedule_once(past)
    start(elastic)
    schedule_once(past + timedelta(seconds=300))  # grows to 4 pods
    start(elastic)
    submit(cluster, "ana", "owner", [{"name": "worker", "pod_count": 1, "gpu_type": "A100", "gpus": 4, "cpu": 2,
                                     "memory_gib": 16}])
    schedule_once(past + timedelta(seconds=400))  # shrinks to 2 for the owner
    for pod in Pod.objects.filter(job=elastic, terminate_requested=PodOutcome.SHRUNK):
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=143, outcome=PodOutcome.FAILED)
    elastic.refresh_from_db()
    assert (elastic.grow_count, elastic.shrink_count, len(live(elastic))) == (1, 1, 2)
    return elastic


def test_a_running_elastic_job_counts_the_gpus_it_holds(cluster, recording_executor):
    past = timezone.now() - timedelta(seconds=1000)
    elastic = _shrunk_elastic_job(cluster, past)
    assert elastic.total_gpus == 8 and elastic.held_gpus() == 4
    assert elastic.total_gpu_seconds(past + timedelta(seconds=200)) == pytest.approx(2 * 200)  # its base only
    assert elastic.total_gpu_seconds(past + timedelta(seconds=500)) == pytest.approx(HELD + 4 * 100)

    for pod in live(elastic):  # it ends well on its 2 pods: the attempt joins the job's totals
        pod_exited(pod_id=pod.pk, attempt=pod.attempt, exit_code=0, outcome=PodOutcome.SUCCEEDED)
    elastic.refresh_from_db()
    assert elastic.status == JobStatus.SUCCEEDED
    assert HELD + 4 * 600 <= elastic.gpu_seconds <= HELD + 4 * 600 + SLACK
    assert elastic.total_gpu_seconds() == elastic.gpu_seconds  # nothing open any more


def test_a_preempted_elastic_job_records_the_gpus_it_held(cluster, recording_executor):
    past = timezone.now() - timedelta(seconds=1000)
    elastic = _shrunk_elastic_job(cluster, past)
    with transaction.atomic():  # as its callers hold it (select_for_update needs one on PostgreSQL)
        job_preempt(job=elastic, reason="node gpu-1 drained", kind=JobPreemption.Kind.DRAIN)
    record = JobPreemption.objects.get(job=elastic)
    assert record.gpus == 4  # what the shrink left it, not its 8 at the maximum
    assert HELD + 4 * 600 <= record.ran_gpu_seconds <= HELD + 4 * 600 + SLACK


def test_a_plain_job_counts_all_its_gpus(cluster, recording_executor):
    past = timezone.now() - timedelta(seconds=1000)
    plain = submit(cluster, "ana", "plain", [{"name": "worker", "pod_count": 2, "gpu_type": "A100", "gpus": 2,
                                             "cpu": 2, "memory_gib": 16}])
    schedule_once(past)
    start(plain)
    plain.refresh_from_db()
    assert plain.held_gpus() == 4
    assert plain.total_gpu_seconds(past + timedelta(seconds=250)) == pytest.approx(4 * 250)
