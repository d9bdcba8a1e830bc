"""The pool policies page (/pools/, staff) and the quota form's preempt_within (DESIGN §2b): staff
edit a pool's policies in the console, the loop's next snapshot reads them, members get 403, and
every bad input answers at its field with nothing changed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from scheduler import publish
from scheduler.engine.types import IDLE_SHARE_FAIR
from scheduler.loop.snapshot import build_snapshot
from scheduler.models import PoolPolicy, ResourceQuota
from tests.console.test_console_management import quota_data
from tests.factories import NodeFactory, World

pytestmark = pytest.mark.django_db

URL = "/pools/"


def policy_data(**overrides: Any) -> dict[str, Any]:
    return {"resource_type": "general", "idle_share": "fifo", "min_runtime_s": "0", "starvation_s": "0",
            "starved_min_runtime_s": "0", **overrides}


def _rows() -> list[tuple[str, str, int, int]]:
    return list(PoolPolicy.objects.values_list("resource_type", "idle_share", "min_runtime_s", "starvation_s"))


def test_the_page_shows_each_pool_with_its_defaults(world: World, staff_client: Client) -> None:
    assert reverse("console:pools") == URL
    response = staff_client.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert [row.pool for row, _ in response.context["pools"]] == ["general"]  # lingjun has no node nor row
    assert 'id="pool-general"' in html and 'id="pool-lingjun"' not in html
    assert '<dd data-policy="idle_share">in pending order</dd>' in html
    assert '<dd data-policy="min_runtime_s">off</dd>' in html
    assert '<dd data-policy="starvation_s">off</dd>' in html
    assert '<dd data-policy="starvation_hold">off</dd>' in html
    assert 'name="min_runtime_s"' in html and 'id="id_general_min_runtime_s"' in html
    assert re.search(r'<input type="checkbox" name="starvation_hold"[^>]*id="id_general_starvation_hold">', html)
    assert "Hold the quota for starving jobs" in html


def test_staff_edit_a_pool_and_the_next_snapshot_reads_it(world: World, staff_client: Client,
                                                          django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = staff_client.post(URL, policy_data(idle_share="fair", min_runtime_s="600", starvation_s="7200"))
    assert response.status_code == 302 and response["Location"] == URL + "#pool-general"
    assert len(callbacks) == 1  # the scheduler's wake-up, after commit
    assert _rows() == [("general", "fair", 600, 7200)]
    entry = LogEntry.objects.get()
    assert entry.user == world.admin and "Minimum runtime: 0 s → 600 s" in entry.get_change_message()
    policy = build_snapshot([], timezone.now())[0].policy_of("general")
    assert (policy.idle_share, policy.min_runtime_s, policy.starvation_s) == (IDLE_SHARE_FAIR, 600.0, 7200.0)
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="idle_share">fair share</dd>' in html
    assert '<dd data-policy="min_runtime_s">10m (600 s)</dd>' in html
    assert '<dd data-policy="starvation_s">after 2h 0m (7,200 s)</dd>' in html
    assert "admin, " in html  # the last change: who and when
    assert 'value="600"' in html  # the form shows the saved values


def test_a_pool_with_a_row_but_no_nodes_is_listed(world: World, staff_client: Client) -> None:
    PoolPolicy.objects.create(resource_type="lingjun", starvation_s=60)
    NodeFactory(name="lj-01", resource_type="lingjun", gpu_type="H800")
    response = staff_client.get(URL)
    assert [row.pool for row, _ in response.context["pools"]] == ["general", "lingjun"]
    response = staff_client.post(URL, policy_data(resource_type="lingjun", starvation_s="0"))
    assert response.status_code == 302
    assert _rows() == [("lingjun", "fifo", 0, 0)]


def test_saving_the_same_values_changes_nothing(world: World, staff_client: Client) -> None:
    response = staff_client.post(URL, policy_data(), follow=True)
    assert "nothing changed" in response.content.decode()
    assert _rows() == [] and not LogEntry.objects.exists()


def test_members_get_403_and_anonymous_users_the_login_page(world: World, alice_client: Client) -> None:
    assert alice_client.get(URL).status_code == 403
    assert alice_client.post(URL, policy_data(idle_share="fair")).status_code == 403
    anonymous = Client().post(URL, policy_data(idle_share="fair"))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    assert _rows() == []
    quotas = alice_client.get(reverse("console:quotas")).content.decode()
    assert URL not in quotas  # the link is for staff


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ({"idle_share": "random"}, "idle_share", "Idle share &#x27;random&#x27; is unknown"),
        ({"min_runtime_s": "-5"}, "min_runtime_s", "Minimum runtime is a whole number of seconds from 0 (off)"),
        ({"min_runtime_s": "2592001"}, "min_runtime_s", "to 2,592,000 (30 days), got 2592001."),
        ({"min_runtime_s": "ten"}, "min_runtime_s", "Enter a whole number."),
        ({"min_runtime_s": "١٠"}, "min_runtime_s", "Enter a whole number."),
        ({"min_runtime_s": ""}, "min_runtime_s", "This field is required."),
        ({"starvation_s": "-1"}, "starvation_s", "Starvation guard is a whole number of seconds"),
        ({"starvation_s": "99999999999"}, "starvation_s", "(30 days), got 99999999999."),
        ({"starvation_hold": "on"}, "starvation_hold", "The starvation hold extends the starvation guard: set a "
                                                       "starvation time above 0 first"),
        ({"starved_min_runtime_s": "3600"}, "starved_min_runtime_s", "The starved minimum runtime protects jobs "
                                                                      "the starvation guard let start"),
        ({"starved_min_runtime_s": "1.5"}, "starved_min_runtime_s", "Enter a whole number."),
    ],
)
def test_bad_input_is_refused_at_its_field(world: World, staff_client: Client, override: dict[str, str],
                                           field: str, words: str) -> None:
    PoolPolicy.objects.create(resource_type="general", idle_share="fair", min_runtime_s=60, starvation_s=120)
    response = staff_client.post(URL, policy_data(**override))
    assert response.status_code == 400
    form = dict(response.context["pools"])  # row → form
    bound = next(f for row, f in form.items() if row.pool == "general")
    assert list(bound.errors) == [field]
    html = response.content.decode()
    assert words in html
    assert f'id="field-general-{field}"' in html and "Not saved" in html
    assert _rows() == [("general", "fair", 60, 120)] and not LogEntry.objects.exists()


def test_staff_turn_on_the_starvation_hold_and_the_engine_gets_it(world: World, staff_client: Client,
                                                                  django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = staff_client.post(URL, policy_data(starvation_s="3600", starvation_hold="on"), follow=True)
    assert response.status_code == 200 and len(callbacks) == 1
    assert "Starvation hold: off → on" in response.content.decode()  # the message after the save
    policy = PoolPolicy.objects.get()
    assert (policy.starvation_s, policy.starvation_hold) == (3600, True)
    assert "Starvation hold: off → on" in LogEntry.objects.get().get_change_message()
    engine_policy = build_snapshot([], timezone.now())[0].policy_of("general")
    assert (engine_policy.starvation_s, engine_policy.starvation_hold) == (3600.0, True)
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="starvation_hold">on: a starving job keeps the guarantee its quota frees</dd>' in html
    assert re.search(r'<input type="checkbox" name="starvation_hold"[^>]*checked', html)
    # An unticked box sends nothing: off, the guard stays.
    assert staff_client.post(URL, policy_data(starvation_s="3600")).status_code == 302
    assert PoolPolicy.objects.values_list("starvation_s", "starvation_hold").get() == (3600, False)
    assert '<dd data-policy="starvation_hold">off</dd>' in staff_client.get(URL).content.decode()


def test_the_hold_with_the_guard_turned_off_is_refused_and_nothing_changes(world: World,
                                                                           staff_client: Client) -> None:
    PoolPolicy.objects.create(resource_type="general", starvation_s=600, starvation_hold=True)
    response = staff_client.post(URL, policy_data(starvation_s="0", starvation_hold="on"))
    assert response.status_code == 400
    bound = next(f for row, f in response.context["pools"] if row.pool == "general")
    assert bound.errors == {"starvation_hold": [
        "The starvation hold extends the starvation guard: set a starvation time above 0 first (or leave the hold "
        "off)."]}
    assert 'id="field-general-starvation_hold"' in response.content.decode()
    assert PoolPolicy.objects.values_list("starvation_s", "starvation_hold").get() == (600, True)
    assert not LogEntry.objects.exists()
    # Both off at once is fine.
    assert staff_client.post(URL, policy_data(starvation_s="0")).status_code == 302
    assert PoolPolicy.objects.values_list("starvation_s", "starvation_hold").get() == (0, False)


def test_an_unknown_pool_is_refused_above_the_pools(world: World, staff_client: Client) -> None:
    response = staff_client.post(URL, policy_data(resource_type="quantum", idle_share="fair"))
    assert response.status_code == 400
    assert response.context["stray"].errors == {"resource_type": ["There is no pool 'quantum': use general or lingjun."]}
    assert "Pool: There is no pool &#x27;quantum&#x27;" in response.content.decode()
    assert _rows() == [] and not LogEntry.objects.exists()


def test_the_quota_form_sets_preempt_within(world: World, staff_client: Client, monkeypatch,
                                           django_capture_on_commit_callbacks) -> None:
    wakes: list[int] = []
    monkeypatch.setattr(publish, "wake_scheduler", lambda: wakes.append(1))
    url = reverse("console:quota_edit", args=[world.team_vision.pk])
    assert 'name="preempt_within"' in staff_client.get(url).content.decode()
    data = quota_data(world, name="team-vision", min_gpus_0="8", min_cpu="96", min_memory_gib="768",
                      preempt_within="on")
    with django_capture_on_commit_callbacks(execute=True):
        assert staff_client.post(url, data).status_code == 302
    assert wakes == [1]  # the next cycle decides with it
    world.team_vision.refresh_from_db()
    assert world.team_vision.preempt_within is True
    snapshot = build_snapshot([], timezone.now())[0]
    assert {q.name: q.preempt_within for q in snapshot.quotas}["team-vision"] is True
    assert re.search(r'<input[^>]*name="preempt_within"[^>]*checked', staff_client.get(url).content.decode())
    listing = staff_client.get(reverse("console:quotas")).content.decode()
    row = listing.split('data-quota="team-vision"')[1].split("</tr>")[0]
    assert "data-preempt-within" in row and "priority preemption" in row
    del data["preempt_within"]  # an unticked box sends nothing: off
    assert staff_client.post(url, data).status_code == 302
    world.team_vision.refresh_from_db()
    assert world.team_vision.preempt_within is False


def test_a_new_quota_is_created_with_preempt_within(world: World, staff_client: Client) -> None:
    response = staff_client.post(reverse("console:quota_new"), quota_data(world, preempt_within="on"))
    assert response.status_code == 302
    assert ResourceQuota.objects.get(name="team-new").preempt_within is True


def test_staff_find_the_page_from_quotas_and_nodes(world: World, staff_client: Client) -> None:
    assert f'href="{URL}"' in staff_client.get(reverse("console:quotas")).content.decode()
    assert f'href="{URL}"' in staff_client.get(reverse("console:nodes")).content.decode()


def test_staff_set_a_minimum_runtime_after_starving_and_the_engine_gets_it(world: World, staff_client: Client) -> None:
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="starved_min_runtime_s">off</dd>' in html
    response = staff_client.post(URL, policy_data(starvation_s="86400", starved_min_runtime_s="129600"), follow=True)
    assert response.status_code == 200
    assert "Minimum runtime after starving: 0 s → 129600 s" in response.content.decode()
    engine_policy = build_snapshot([], timezone.now())[0].policy_of("general")
    assert (engine_policy.starvation_s, engine_policy.starved_min_runtime_s) == (86400.0, 129600.0)
    html = staff_client.get(URL).content.decode()
    assert '<dd data-policy="starved_min_runtime_s">1d 12h (129,600 s)</dd>' in html
    assert re.search(r'<input type="number" name="starved_min_runtime_s" value="129600"', html)
