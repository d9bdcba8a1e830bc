"""A job submitted to `general` cannot keep bob's team from its guarantee (DESIGN §2: a guarantee
given to a child is the child's), live in the browser against the demo cluster.

The demo's root `general` gives all of its 32 A100 to the team quotas. So the form says a job there
runs on idle resources only and refuses one with idle resources off; one with idle resources
acceptable takes the whole pool Not in Quota, and is reclaimed the moment bob asks for 8 of
team-language's 12 GPUs — alice's list shows it turn Preempted without a reload.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.e2e.test_e2e_console import _csrf, count_jobs, fill_job_form, job_id_of, row

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_a_job_of_general_is_reclaimed_for_bob_s_team(
    live_server_process: object, open_page: Callable, screenshots: Callable, request: pytest.FixtureRequest
) -> None:
    alice = open_page("alice")
    watcher = open_page("alice")
    bob = open_page("bob")

    # The form says what general keeps for its own jobs, and refuses a job that could never run.
    fill_job_form(alice, name="e2e-general-off", quota="general", pods=1, gpus=1, command="sleep 1",
                  fault_tolerance=False)
    hint = alice.inner_text('.quota-option:has(.q-name:text-is("general")) .q-free')
    assert hint == "Runs on idle resources only"
    alice.click("#submit-job")
    alice.wait_for_selector("#field-quota .error")
    error = alice.inner_text("#field-quota .error")
    assert "quota general keeps no A100 for its own jobs" in error and "submit it to a child quota" in error
    assert count_jobs(alice, "e2e-general-off") == 0

    # With idle resources acceptable it is accepted and borrows the whole pool.
    watcher.goto("/jobs/")
    watcher.evaluate("window.__notReloaded = true")
    watcher.wait_for_selector('#live-indicator[data-state="live"]')
    fill_job_form(alice, name="e2e-general-big", quota="general", idle="acceptable", pods=4, gpus=8,
                  command="sleep 600", fault_tolerance=False)
    alice.click("#submit-job")
    alice.wait_for_url(re.compile(r"/jobs/\d+/$"))
    big = job_id_of(alice)
    request.addfinalizer(lambda: alice.request.post(f"/api/v1/jobs/{big}/stop/", headers=_csrf(alice)))
    watcher.wait_for_selector(row(watcher, big, status="Running") + ' [data-in-quota="false"]', timeout=60_000)

    # Bob claims 8 of team-language's guarantee: general's job is reclaimed for him, live.
    fill_job_form(bob, name="e2e-language-own", quota="team-language", pods=1, gpus=8, command="sleep 20",
                  fault_tolerance=False)
    bob.click("#submit-job")
    bob.wait_for_url(re.compile(r"/jobs/\d+/$"))
    own = job_id_of(bob)
    request.addfinalizer(lambda: bob.request.post(f"/api/v1/jobs/{own}/stop/", headers=_csrf(bob)))
    watcher.wait_for_selector(row(watcher, big, status="Preempted"), timeout=60_000)
    reason = watcher.locator(row(watcher, big) + " .reason").inner_text()
    assert reason == "reclaimed for a queued job of quota team-language"
    assert watcher.evaluate("window.__notReloaded") is True
    bob.wait_for_selector('#job-badges [data-status="Running"]', timeout=60_000)
    bob.wait_for_selector('#job-badges [data-in-quota="true"]')

    # The quota cards say the same as the form.
    bob.goto("/quotas/")
    assert "runs on idle resources only" in bob.inner_text('tr[data-quota="general"] [data-room]')
    assert "at most 12 × A100" in bob.inner_text('tr[data-quota="team-language"] [data-room]')
    screenshots(bob, "quotas-own-guarantee")
