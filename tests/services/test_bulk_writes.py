"""The bulk writes the scheduling service uses: rows written in a few statements read back exactly
as the ORM would have written them (run on SQLite, and on PostgreSQL where the array path is used)."""

from __future__ import annotations

import pytest
from django.utils import timezone
from factories import JobFactory, NodeFactory

from scheduler.models import Job, JobEvent, Pod
from scheduler.services.bulk import in_ids, insert_rows, insert_values
from scheduler.states import EventKind, PodStatus

pytestmark = pytest.mark.django_db


def test_insert_rows_sets_keys_and_writes_every_field():
    node = NodeFactory(name="n1")
    jobs = [JobFactory(name=f"j{i}") for i in range(3)]
    pods = [Pod(job=job, role="worker", index=i, rank=i, attempt=2, node=node, gpu_indices=[i, i + 4])
            for job in jobs for i in range(2)]
    insert_rows(Pod, pods, returning=True)
    assert all(pod.pk for pod in pods) and len({pod.pk for pod in pods}) == 6
    for pod in pods:
        row = Pod.objects.get(pk=pod.pk)
        assert (row.job_id, row.role, row.index, row.rank, row.attempt, row.node_id, row.gpu_indices) == (
            pod.job_id, "worker", pod.index, pod.rank, 2, node.pk, pod.gpu_indices)
        assert row.status == PodStatus.PENDING and row.reason == "" and row.exit_code is None
        assert row.created_at is not None


def test_insert_values_and_in_ids():
    jobs = [JobFactory(name=f"e{i}") for i in range(4)]
    stamp = timezone.now()
    insert_values(JobEvent, ("job_id", "time", "kind", "reason"),
                  [(job.pk, stamp, EventKind.ADMITTED, f"admitted {job.name}") for job in jobs])
    written = timezone.now()
    events = {e.job_id: e for e in JobEvent.objects.filter(kind=EventKind.ADMITTED)}
    assert {pk: e.reason for pk, e in events.items()} == {job.pk: f"admitted {job.name}" for job in jobs}
    # the stamp given (PostgreSQL), or the write's own time where bulk_create applies auto_now_add
    assert all(stamp <= e.time <= written for e in events.values())
    chosen = [jobs[0].pk, jobs[2].pk]
    assert sorted(Job.objects.filter(pk__in=in_ids(chosen)).values_list("pk", flat=True)) == sorted(chosen)
    assert Job.objects.filter(pk__in=in_ids(chosen)).update(waiting_reason="x") == 2


@pytest.mark.django_db(transaction=True)
def test_a_cycle_reports_its_time_by_phase():
    """The phases cover the whole cycle, in order, and a real commit is measured (transaction=True)."""
    from factories import build_world

    from scheduler.executors import set_executor
    from scheduler.loop.cycle import PHASES, schedule_once

    class Counting:
        def __init__(self):
            self.pods = 0

        def launch(self, launches):
            self.pods += sum(len(pods) for _job, pods in launches)

        def terminate(self, refs, *, grace_s, outcome):
            pass

    world = build_world()
    JobFactory(name="one", quota=world.team_vision, workspace=world.vision)
    executor = Counting()
    previous = set_executor(executor)
    try:
        result = schedule_once()
    finally:
        set_executor(previous)
    assert result.admitted == 1 and executor.pods == 1  # launched after the commit, inside "broadcasts"
    assert list(result.phases) == list(PHASES)
    assert all(seconds >= 0 for seconds in result.phases.values())
    # the phases cover the cycle (all but recording them for /metrics)
    assert sum(result.phases.values()) <= result.seconds
    assert sum(result.phases.values()) == pytest.approx(result.seconds, abs=0.05)
