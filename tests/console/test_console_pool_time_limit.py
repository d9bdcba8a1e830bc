"""DESIGN §2d's pool setting: staff set a pool's default time limit on the pool policies page, the change
is recorded, the loop's next snapshot reads it, the API lists it, and a bad value answers at its field."""

from __future__ import annotations

from django.contrib.admin.models import LogEntry
from django.test import Client
from django.utils import timezone

from scheduler.loop.snapshot import build_snapshot
from scheduler.models import PoolPolicy
from tests.console.test_console_pools import URL, policy_data
from tests.factories import NodeFactory, World


def test_staff_set_the_default_time_limit(world: World, staff_client: Client) -> None:
    NodeFactory()
    response = staff_client.post(URL, policy_data(default_time_limit_s="7200"))
    assert response.status_code == 302
    assert PoolPolicy.objects.get(resource_type="general").default_time_limit_s == 7200
    assert "Default time limit: 0 s → 7200 s" in LogEntry.objects.get().get_change_message()
    assert build_snapshot([], timezone.now())[0].policy_of("general").default_time_limit_s == 7200.0
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="default_time_limit_s">2h 0m (7,200 s)</dd>' in html
    pools = staff_client.get("/api/v1/pools/").json()
    rows = pools["results"] if isinstance(pools, dict) else pools
    assert next(p for p in rows if p["resource_type"] == "general")["default_time_limit_s"] == 7200


def test_a_default_time_limit_over_30_days_is_refused_at_its_field(world: World, staff_client: Client) -> None:
    response = staff_client.post(URL, policy_data(default_time_limit_s=str(31 * 86400)))
    assert response.status_code == 400 and not PoolPolicy.objects.exists()  # the form again, nothing saved
    assert "30 days" in response.content.decode()
