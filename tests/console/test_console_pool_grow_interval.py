"""DESIGN §2c's pool setting: staff set how often a pool's elastic jobs may grow on the pool policies
page; the change is recorded, the loop's next snapshot gives it to the engine, the admin and the API list
it, an empty field is the default (300 s, not 0), and a bad value answers at its field, saving nothing."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from scheduler.admin import PoolPolicyAdmin
from scheduler.loop.snapshot import build_snapshot
from scheduler.models import PoolPolicy
from scheduler.services.pool_policies import pool_policy_set
from tests.console.test_console_pools import URL, policy_data
from tests.factories import NodeFactory, UserFactory, World


def _api_pool(client: Client, pool: str) -> dict:
    pools = client.get("/api/v1/pools/").json()
    rows = pools["results"] if isinstance(pools, dict) else pools
    return next(p for p in rows if p["resource_type"] == pool)


def test_staff_set_the_grow_interval_and_the_engine_gets_it(world: World, staff_client: Client) -> None:
    NodeFactory()
    assert build_snapshot([], timezone.now())[0].policy_of("general").grow_interval_s == 300.0  # no row: §2c's default
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="grow_interval_s">elastic jobs grow at most every 5m (300 s)</dd>' in html
    assert _api_pool(staff_client, "general")["grow_interval_s"] == 300

    response = staff_client.post(URL, policy_data(grow_interval_s="15"))
    assert response.status_code == 302
    assert PoolPolicy.objects.get(resource_type="general").grow_interval_s == 15
    assert "Grow interval: 300 s → 15 s" in LogEntry.objects.get().get_change_message()
    assert build_snapshot([], timezone.now())[0].policy_of("general").grow_interval_s == 15.0
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="grow_interval_s">elastic jobs grow at most every 15s (15 s)</dd>' in html
    assert 'name="grow_interval_s" value="15"' in html  # the form shows the saved value
    assert _api_pool(staff_client, "general")["grow_interval_s"] == 15
    assert "grow_interval_s" in PoolPolicyAdmin.list_display and "grow_interval_s" in PoolPolicyAdmin.fields

    staff_client.post(URL, policy_data(grow_interval_s="0"))
    assert build_snapshot([], timezone.now())[0].policy_of("general").grow_interval_s == 0.0
    assert "elastic jobs grow every cycle" in staff_client.get(URL).content.decode()


def test_an_empty_grow_interval_is_the_default_not_zero(world: World, staff_client: Client) -> None:
    staff_client.post(URL, policy_data(grow_interval_s="60"))
    response = staff_client.post(URL, policy_data(grow_interval_s=""))
    assert response.status_code == 302
    assert PoolPolicy.objects.get(resource_type="general").grow_interval_s == 300


def test_a_grow_interval_over_a_day_is_refused_at_its_field(world: World, staff_client: Client) -> None:
    response = staff_client.post(URL, policy_data(grow_interval_s="86401"))
    assert response.status_code == 400 and not PoolPolicy.objects.exists()  # the form again, nothing saved
    html = response.content.decode()
    assert 'id="field-general-grow_interval_s"' in html
    assert "Grow interval is a whole number of seconds from 0 (every cycle) to 86,400 (1 day), got 86401." in html


@pytest.mark.parametrize("bad", [-1, 86401, "soon", 2.5, True])
def test_the_service_refuses_a_bad_grow_interval_and_writes_nothing(world: World, bad: object) -> None:
    staff = UserFactory(username="root-admin", is_staff=True)
    with pytest.raises(ValidationError) as refused:
        pool_policy_set(user=staff, resource_type="general", idle_share="fifo", min_runtime_s=0, starvation_s=0,
                        grow_interval_s=bad)
    assert refused.value.message_dict.keys() == {"grow_interval_s"}
    assert not PoolPolicy.objects.exists() and not LogEntry.objects.exists()


def test_the_service_takes_a_day(world: World) -> None:
    staff = UserFactory(username="root-admin", is_staff=True)
    saved = pool_policy_set(user=staff, resource_type="general", idle_share="fifo", min_runtime_s=0,
                            starvation_s=0, grow_interval_s=86400)
    assert saved.changes == ("Grow interval: 300 s → 86400 s",)


def test_the_admin_refuses_a_grow_interval_over_a_day(world: World) -> None:
    with pytest.raises(ValidationError) as refused:
        PoolPolicy(resource_type="general", grow_interval_s=86401).full_clean()
    assert refused.value.message_dict == {"grow_interval_s": ["At most 86,400 s (1 day)."]}
