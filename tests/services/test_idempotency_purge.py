"""Idempotency keys are kept TIDEPOOL_IDEMPOTENCY_KEEP_HOURS (default 24 h), then the scheduler's
housekeeping deletes them (issue 25: they were never purged); a purged key submits anew."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from scheduler.loop.cycle import schedule_once
from scheduler.models import IdempotencyKey, Job
from scheduler.services import idempotency
from scheduler.services.idempotency import idempotency_keys_purge
from tests.api.v1_helpers import submission
from tests.factories import World

pytestmark = pytest.mark.django_db


def submit(client: Client, key: str, name: str = "resnet") -> int:
    response = client.post("/api/v1/jobs/", json.dumps(submission(name=name)), content_type="application/json",
                           HTTP_IDEMPOTENCY_KEY=key)
    return response.status_code


def age(key: str, hours: float) -> None:
    IdempotencyKey.objects.filter(key=key).update(created_at=timezone.now() - timedelta(hours=hours))


def test_the_default_keeps_keys_a_day() -> None:
    assert settings.TIDEPOOL_IDEMPOTENCY_KEEP_HOURS == 24


def test_the_scheduler_cycle_purges_keys_past_the_keep_time(world: World, alice_client: Client) -> None:
    assert submit(alice_client, "old", "old-job") == 201
    assert submit(alice_client, "new", "new-job") == 201
    age("old", 25)
    age("new", 23)
    schedule_once()
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
    assert submit(alice_client, "new", "new-job") == 201 and Job.objects.filter(name="new-job").count() == 1  # replay
    assert submit(alice_client, "old", "old-job") == 201 and Job.objects.filter(name="old-job").count() == 2  # anew


def test_the_keep_time_is_the_setting(world: World, alice_client: Client, settings) -> None:
    settings.TIDEPOOL_IDEMPOTENCY_KEEP_HOURS = 1
    assert submit(alice_client, "k") == 201
    age("k", 0.5)
    assert idempotency_keys_purge(now=timezone.now()) == 0
    assert idempotency_keys_purge(now=timezone.now() + timedelta(hours=1)) == 1
    assert not IdempotencyKey.objects.exists()


def test_a_backlog_drains_in_batches(world: World, alice_client: Client, monkeypatch) -> None:
    monkeypatch.setattr(idempotency, "PURGE_BATCH", 2)
    for index in range(5):
        assert submit(alice_client, f"k{index}", f"job-{index}") == 201
    later = timezone.now() + timedelta(hours=25)
    assert [idempotency_keys_purge(now=later) for _ in range(4)] == [2, 2, 1, 0]
