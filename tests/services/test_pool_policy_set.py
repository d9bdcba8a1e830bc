"""`pool_policy_set` (DESIGN §2b pool policies): checked input, a row only when something changes, the
change recorded with its author, the scheduler woken after commit, and the loop's snapshot reading it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.exceptions import ValidationError
from django.utils import timezone

from scheduler import publish
from scheduler.engine.types import IDLE_SHARE_FAIR, IDLE_SHARE_FIFO
from scheduler.loop.snapshot import build_snapshot
from scheduler.models import PoolPolicy
from scheduler.selectors.pools import pool_policy_rows
from scheduler.services.pool_policies import pool_policy_set
from scheduler.validation import MAX_POLICY_SECONDS, STARVATION_HOLD_NEEDS_GUARD, STARVED_RUNTIME_NEEDS_GUARD
from tests.factories import NodeFactory, UserFactory

pytestmark = pytest.mark.django_db

DAYS_30 = 30 * 24 * 3600
RULE = "is a whole number of seconds from 0 (off) to 2,592,000 (30 days)"
HOLD_NEEDS_GUARD = "The starvation hold extends the starvation guard: set a starvation time above 0 first"


@pytest.fixture
def admin():
    return UserFactory(username="root-admin", is_staff=True)


@pytest.fixture
def wakes(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(publish, "wake_scheduler", lambda: calls.append(1))
    return calls


def _set(admin: Any, **overrides: Any):
    values = {"resource_type": "general", "idle_share": "fifo", "min_runtime_s": 0, "starvation_s": 0, **overrides}
    return pool_policy_set(user=admin, **values)


def test_a_change_is_saved_recorded_and_wakes_the_scheduler(admin, wakes, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        saved = _set(admin, idle_share="fair", min_runtime_s=600)
    policy = PoolPolicy.objects.get(resource_type="general")
    assert (policy.idle_share, policy.min_runtime_s, policy.starvation_s) == ("fair", 600, 0)
    assert saved.policy == policy
    assert saved.changes == ("Idle share: fifo → fair", "Minimum runtime: 0 s → 600 s")
    entry = LogEntry.objects.get()
    assert (entry.user, entry.object_id, entry.action_flag) == (admin, str(policy.pk), ADDITION)
    assert "Idle share: fifo → fair" in entry.get_change_message()
    assert wakes == [1]
    # The loop's next snapshot carries it.
    snapshot = build_snapshot([], timezone.now())[0]
    engine_policy = snapshot.policy_of("general")
    assert (engine_policy.idle_share, engine_policy.min_runtime_s, engine_policy.starvation_s) == (
        IDLE_SHARE_FAIR, 600.0, 0.0)


def test_an_existing_row_is_changed_and_the_change_logged(admin, wakes, django_capture_on_commit_callbacks):
    PoolPolicy.objects.create(resource_type="general", idle_share="fair", min_runtime_s=600)
    with django_capture_on_commit_callbacks(execute=True):
        saved = _set(admin, idle_share="fair", min_runtime_s=600, starvation_s=DAYS_30)
    assert saved.changes == (f"Starvation guard: 0 s → {DAYS_30} s",)
    assert PoolPolicy.objects.get().starvation_s == DAYS_30
    assert LogEntry.objects.get().action_flag == CHANGE
    assert wakes == [1]
    assert build_snapshot([], timezone.now())[0].policy_of("general").starvation_s == float(DAYS_30)


def test_the_defaults_on_a_pool_without_a_row_write_nothing(admin, wakes, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        saved = _set(admin)
    assert saved.changes == () and saved.policy.pk is None
    assert not PoolPolicy.objects.exists() and not LogEntry.objects.exists()
    assert wakes == []
    assert build_snapshot([], timezone.now())[0].policy_of("general").idle_share == IDLE_SHARE_FIFO


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ({"resource_type": "quantum"}, "resource_type", "There is no pool 'quantum'"),
        ({"resource_type": None}, "resource_type", "There is no pool"),
        ({"resource_type": "x" * 5000}, "resource_type", "There is no pool 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...: use"),
        ({"idle_share": "random"}, "idle_share", "Idle share 'random' is unknown"),
        ({"idle_share": ""}, "idle_share", "is unknown"),
        ({"min_runtime_s": -1}, "min_runtime_s", f"Minimum runtime {RULE}, got -1."),
        ({"min_runtime_s": MAX_POLICY_SECONDS + 1}, "min_runtime_s", f"{RULE}, got 2592001."),
        ({"min_runtime_s": "10 min"}, "min_runtime_s", f"{RULE}, got '10 min'."),
        ({"min_runtime_s": True}, "min_runtime_s", RULE),
        ({"min_runtime_s": 1.5}, "min_runtime_s", RULE),
        ({"starvation_s": -60}, "starvation_s", f"Starvation guard {RULE}, got -60."),
        ({"starvation_s": 10**12}, "starvation_s", RULE),
        ({"starvation_s": None}, "starvation_s", f"{RULE}, got None."),
        ({"starvation_hold": "maybe"}, "starvation_hold", "Starvation hold is on or off (true or false), got 'maybe'."),
        ({"starvation_hold": 2}, "starvation_hold", "Starvation hold is on or off"),
        ({"starvation_hold": [True]}, "starvation_hold", "Starvation hold is on or off"),
        ({"starvation_s": 0, "starvation_hold": True}, "starvation_hold", HOLD_NEEDS_GUARD),
        ({"starvation_s": "0", "starvation_hold": "on"}, "starvation_hold", HOLD_NEEDS_GUARD),
        ({"starved_min_runtime_s": -1}, "starved_min_runtime_s", f"Minimum runtime after starving {RULE}, got -1."),
        ({"starved_min_runtime_s": "2d"}, "starved_min_runtime_s", f"{RULE}, got '2d'."),
        ({"starvation_s": 0, "starved_min_runtime_s": 3600}, "starved_min_runtime_s", STARVED_RUNTIME_NEEDS_GUARD),
    ],
)
def test_bad_input_names_the_field_and_changes_nothing(admin, wakes, django_capture_on_commit_callbacks,
                                                        override, field, words):
    PoolPolicy.objects.create(resource_type="general", idle_share="fair", min_runtime_s=60, starvation_s=120)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ValidationError) as refused:
        _set(admin, **{"idle_share": "fifo", "min_runtime_s": 5, "starvation_s": 5, **override})
    assert list(refused.value.message_dict) == [field]
    assert words in refused.value.message_dict[field][0]
    assert list(PoolPolicy.objects.values_list("resource_type", "idle_share", "min_runtime_s", "starvation_s",
                                               "starvation_hold")) == [("general", "fair", 60, 120, False)]
    assert not LogEntry.objects.exists() and wakes == []


def test_the_starvation_hold_is_saved_and_reaches_the_engine(admin, wakes, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        saved = _set(admin, starvation_s=3600, starvation_hold=True)
    assert saved.changes == ("Starvation guard: 0 s → 3600 s", "Starvation hold: off → on")
    assert PoolPolicy.objects.get().starvation_hold is True
    assert wakes == [1]
    assert "Starvation hold: off → on" in LogEntry.objects.get().get_change_message()
    assert build_snapshot([], timezone.now())[0].policy_of("general").starvation_hold is True
    assert [row.starvation_hold for row in pool_policy_rows()] == [True]
    # Off again: the guard alone stays.
    assert _set(admin, starvation_s=3600, starvation_hold=False).changes == ("Starvation hold: on → off",)
    policy = build_snapshot([], timezone.now())[0].policy_of("general")
    assert (policy.starvation_s, policy.starvation_hold) == (3600.0, False)


@pytest.mark.parametrize(
    ("sent", "kept"),
    [(True, True), ("on", True), ("true", True), ("1", True), (1, True),
     (False, False), ("", False), ("0", False), ("false", False), (None, False), (0, False)],
)
def test_the_hold_takes_what_a_form_sends(admin, sent, kept):
    _set(admin, starvation_s=60, starvation_hold=sent)
    assert PoolPolicy.objects.get().starvation_hold is kept


def test_the_hold_without_a_starvation_time_is_refused_on_a_new_pool_too(admin, wakes,
                                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ValidationError) as refused:
        _set(admin, idle_share="fair", starvation_hold=True)
    assert refused.value.message_dict == {"starvation_hold": [STARVATION_HOLD_NEEDS_GUARD]}
    assert not PoolPolicy.objects.exists() and not LogEntry.objects.exists() and wakes == []


def test_the_admin_refuses_the_hold_without_a_starvation_time():
    with pytest.raises(ValidationError) as refused:
        PoolPolicy(resource_type="general", starvation_s=0, starvation_hold=True).full_clean()
    assert refused.value.message_dict == {"starvation_hold": [STARVATION_HOLD_NEEDS_GUARD]}
    PoolPolicy(resource_type="general", starvation_s=60, starvation_hold=True).full_clean()


def test_the_minimum_runtime_after_starving_is_saved_and_reaches_the_engine(admin, wakes,
                                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        saved = _set(admin, starvation_s=86400, starved_min_runtime_s=129600)
    assert saved.changes == ("Starvation guard: 0 s → 86400 s", "Minimum runtime after starving: 0 s → 129600 s")
    assert wakes == [1]
    assert "Minimum runtime after starving: 0 s → 129600 s" in LogEntry.objects.get().get_change_message()
    policy = build_snapshot([], timezone.now())[0].policy_of("general")
    assert (policy.starvation_s, policy.starved_min_runtime_s) == (86400.0, 129600.0)
    assert [row.starved_min_runtime_s for row in pool_policy_rows()] == [129600]
    # The guard cannot be switched off under it: refused, nothing changes.
    with pytest.raises(ValidationError) as refused:
        _set(admin, starvation_s=0, starved_min_runtime_s=129600)
    assert refused.value.message_dict == {"starved_min_runtime_s": [STARVED_RUNTIME_NEEDS_GUARD]}
    assert PoolPolicy.objects.values_list("starvation_s", "starved_min_runtime_s").get() == (86400, 129600)


def test_the_admin_refuses_a_minimum_runtime_after_starving_without_a_guard():
    with pytest.raises(ValidationError) as refused:
        PoolPolicy(resource_type="general", starvation_s=0, starved_min_runtime_s=60).full_clean()
    assert refused.value.message_dict == {"starved_min_runtime_s": [STARVED_RUNTIME_NEEDS_GUARD]}
    with pytest.raises(ValidationError) as both:
        PoolPolicy(resource_type="general", starvation_hold=True, starved_min_runtime_s=60).full_clean()
    assert both.value.message_dict == {"starvation_hold": [STARVATION_HOLD_NEEDS_GUARD],
                                       "starved_min_runtime_s": [STARVED_RUNTIME_NEEDS_GUARD]}
    PoolPolicy(resource_type="general", starvation_s=60, starved_min_runtime_s=60).full_clean()


def test_exactly_30_days_is_accepted(admin):
    _set(admin, min_runtime_s=MAX_POLICY_SECONDS, starvation_s=str(MAX_POLICY_SECONDS))
    assert PoolPolicy.objects.get().min_runtime_s == MAX_POLICY_SECONDS == DAYS_30


def test_rows_list_pools_with_nodes_or_a_policy(admin):
    NodeFactory(name="g1", resource_type="general", gpu_count=8)
    NodeFactory(name="g2", resource_type="general", gpu_count=4)
    assert [(r.pool, r.nodes, r.gpus, r.has_row, r.idle_share_text) for r in pool_policy_rows()] == [
        ("general", 2, 12, False, "in pending order")]
    _set(admin, resource_type="lingjun", idle_share="fair", starvation_s=3600)
    rows = {row.pool: row for row in pool_policy_rows()}
    assert list(rows) == ["general", "lingjun"]
    lingjun = rows["lingjun"]
    assert (lingjun.nodes, lingjun.gpus, lingjun.has_row, lingjun.idle_share_text, lingjun.starvation_s) == (
        0, 0, True, "fair share", 3600)
    assert lingjun.last_change is not None and lingjun.last_change.username == "root-admin"
    assert "Starvation guard: 0 s → 3600 s" in lingjun.last_change.text
