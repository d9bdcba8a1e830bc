"""The charts' allocation samples: once a minute, and at the next cycle after the allocation changed,
so a quota's chart steps where a job started or stopped, not up to a minute later."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import AllocationSample
from scheduler.services.scheduling import allocation_record
from tests.factories import JobFactory, World

pytestmark = pytest.mark.django_db


def sample_times() -> list:
    return sorted(set(AllocationSample.objects.values_list("time", flat=True)))


def used_in_quota(quota_id: int, time) -> int:
    return AllocationSample.objects.get(quota_id=quota_id, time=time).in_quota_gpus


def test_a_change_is_sampled_at_the_next_cycle_and_nothing_else_before_the_minute(world: World) -> None:
    start = timezone.now()
    allocation_record(now=start)
    assert sample_times() == [start]
    assert used_in_quota(world.team_vision.pk, start) == 0

    allocation_record(now=start + timedelta(seconds=5))  # nothing changed: no sample
    assert sample_times() == [start]

    JobFactory(workspace=world.vision, quota=world.team_vision, roles=[{"gpus": 3}], running_on=world.gpu1)
    changed = start + timedelta(seconds=10)
    allocation_record(now=changed)  # a job started: sampled now, not at the minute
    assert sample_times() == [start, changed]
    assert used_in_quota(world.team_vision.pk, changed) == 3

    allocation_record(now=changed + timedelta(seconds=1))  # within the change spacing: not even read
    allocation_record(now=changed + timedelta(seconds=30))
    assert sample_times() == [start, changed]

    minute = changed + timedelta(seconds=60)
    allocation_record(now=minute)  # the periodic sample, unchanged figures
    assert sample_times() == [start, changed, minute]
