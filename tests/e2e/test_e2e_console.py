"""The console end to end: a real server with the scheduler running, real pods, headless Chromium.

The tests run in order against one server and one demo cluster (general pool: 4 × 8 A100):
1. submit through the form, watch the job turn Running / In Quota in a second browser, stop it,
   and catch up after a dropped connection;
2. an idle job runs Not in Quota, is reclaimed, shows Preempted while it waits, and runs again from
   its checkpoint — all live, without using a restart and without learning the claimer's name;
3. bad input creates nothing; a user never sees another workspace's jobs; the staff pages.
Every page visited is saved to build/screenshots at 1280×800 and checked at 390 px wide.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

PROJECT = Path(__file__).resolve().parents[2]
TRAIN = f"{sys.executable} {PROJECT / 'examples' / 'train_linear.py'}"
# Checkpoints per pod (RANK), so the pods of one job do not write each other's files.
TRAIN_PER_RANK = "--checkpoint-dir $TIDEPOOL_CHECKPOINT_DIR/rank-$RANK"

RECORD_STATUSES = """
([id, key]) => {
  window[key] = [];
  window[key + "Leaks"] = [];
  const record = () => {
    const row = document.querySelector(`tr[data-job-id="${id}"]`);
    if (!row) return;
    const badge = row.querySelector("[data-in-quota]");
    const state = row.dataset.status + (badge ? (badge.dataset.inQuota === "true" ? "/in" : "/out") : "");
    if (window[key][window[key].length - 1] !== state) window[key].push(state);
    // A Preempted row keeps no admission badge and no node of the reclaimed attempt, not even briefly.
    if (row.dataset.status === "Preempted" && (badge || row.querySelector(".node-chip"))) {
      window[key + "Leaks"].push(row.querySelector(".cell-quota").textContent + " | " +
                                 row.querySelector(".cell-nodes").textContent);
    }
  };
  new MutationObserver(record).observe(document.getElementById("job-rows"), {childList: true, subtree: true});
  record();
}
"""


def row(page, job_id: int, **attributes: str) -> str:
    selector = f'tr[data-job-id="{job_id}"]'
    return selector + "".join(f'[data-{key.replace("_", "-")}="{value}"]' for key, value in attributes.items())


def job_id_of(page) -> int:
    match = re.search(r"/jobs/(\d+)/$", page.url)
    assert match, page.url
    return int(match.group(1))


def fill_job_form(page, *, name: str, command: str, quota: str, idle: str = "off", pods: int = 1,
                  gpus: int = 1, fault_tolerance: bool = True) -> None:
    page.goto("/jobs/new/")
    page.fill("#id_name", name)
    page.fill("#id_command", command)
    page.check(f'.quota-option:has(.q-name:text-is("{quota}")) input')
    page.check(f'input[name="idle_mode"][value="{idle}"]')
    page.fill("#id_roles-0-pod_count", str(pods))
    page.fill("#id_roles-0-gpus", str(gpus))
    page.fill("#id_roles-0-cpu", "4")
    page.fill("#id_roles-0-memory_gib", "16")
    if fault_tolerance:
        page.check("#id_fault_tolerance")


def count_jobs(page, name: str) -> int:
    response = page.request.get(f"/api/v1/jobs/?q={name}")
    assert response.ok
    return sum(1 for job in response.json()["results"] if job["name"] == name)


def test_submit_and_watch_it_run_in_a_second_browser(
    live_server_process: object, open_page: Callable, screenshots: Callable
) -> None:
    anonymous = open_page(None)
    anonymous.goto("/accounts/login/")
    screenshots(anonymous, "login")

    submitter = open_page("alice")
    watcher = open_page("alice")
    watcher.goto("/jobs/")
    watcher.evaluate("window.__notReloaded = true")
    watcher.wait_for_selector('#live-indicator[data-state="live"]')
    screenshots(watcher, "jobs-empty")

    fill_job_form(submitter, name="e2e-inquota", quota="team-vision", pods=1, gpus=8,
                  command=f"{TRAIN} --steps 100000 --checkpoint-every 20 --step-sleep 0.05")
    screenshots(submitter, "job-form")
    submitter.dblclick("#submit-job")  # a double click submits once
    submitter.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job_id = job_id_of(submitter)

    # The second browser sees the job arrive and run without reloading.
    watcher.wait_for_selector(row(watcher, job_id))
    watcher.wait_for_selector(row(watcher, job_id, status="Running") + ' [data-in-quota="true"]')
    assert watcher.evaluate("window.__notReloaded") is True
    assert count_jobs(submitter, "e2e-inquota") == 1
    screenshots(watcher, "jobs-running")

    # The detail page follows the job and its log.
    submitter.wait_for_selector('#job-badges [data-status="Running"]')
    submitter.wait_for_function("document.getElementById('log-text').textContent.includes('starting from scratch')")
    submitter.wait_for_selector("#pods td:text-is('gpu-01'), #pods td:text-is('gpu-02'), "
                                "#pods td:text-is('gpu-03'), #pods td:text-is('gpu-04')")
    screenshots(submitter, "job-detail-running")

    # The watcher loses its connection; the job is stopped meanwhile; on reconnect it catches up.
    watcher.evaluate("window.__blockSockets = true; window.tidepool.live.sockets[0].drop()")
    watcher.wait_for_selector('#live-indicator[data-state="reconnecting"]')
    submitter.click("#stop-job")
    submitter.wait_for_selector("#confirm-dialog[open]")
    screenshots(submitter, "job-stop-dialog")
    submitter.click("#confirm-ok")
    submitter.wait_for_selector('#job-badges [data-status="Stopped"]')
    assert watcher.locator(row(watcher, job_id)).get_attribute("data-status") == "Running"  # missed it
    watcher.evaluate("window.__blockSockets = false")
    watcher.wait_for_selector(row(watcher, job_id, status="Stopped"), timeout=30_000)
    assert watcher.evaluate("window.__notReloaded") is True
    screenshots(submitter, "job-detail-stopped")

    submitter.goto(f"/jobs/{job_id}/stop/")  # the confirmation page used without the dialog
    screenshots(submitter, "job-stop-confirm")


def test_idle_job_is_reclaimed_then_runs_again(
    live_server_process: object, open_page: Callable, screenshots: Callable, request: pytest.FixtureRequest
) -> None:
    """Long because it is one story told in two browsers: borrow, reclaim, wait Preempted, resume."""
    bob = open_page("bob")
    bob_watcher = open_page("bob")
    alice = open_page("alice")

    # Bob's job borrows the whole pool (4 × 8 GPUs) on idle resources.
    fill_job_form(bob, name="e2e-borrower", quota="team-language", idle="only", pods=4, gpus=8,
                  command=f"{TRAIN} --steps 100000 --checkpoint-every 5 --step-sleep 2 {TRAIN_PER_RANK}")
    bob.click("#submit-job")
    bob.wait_for_url(re.compile(r"/jobs/\d+/$"))
    borrower = job_id_of(bob)
    # Whatever happens below, the borrower must not hold the pool for the tests that follow.
    request.addfinalizer(lambda: bob.request.post(f"/api/v1/jobs/{borrower}/stop/", headers=_csrf(bob)))

    bob_watcher.goto("/jobs/")
    bob_watcher.evaluate("window.__notReloaded = true")
    bob_watcher.evaluate(RECORD_STATUSES, [borrower, "__seen"])
    bob_watcher.wait_for_selector(row(bob_watcher, borrower, status="Running") + ' [data-in-quota="false"]')
    screenshots(bob_watcher, "jobs-not-in-quota")
    alice.goto("/nodes/")
    alice.wait_for_selector(".gpu.used.niq.other")
    screenshots(alice, "nodes-borrowed")

    # Alice claims 8 GPUs of her guarantee: the borrower is reclaimed.
    fill_job_form(alice, name="e2e-claimer", quota="team-vision", pods=1, gpus=8, command="sleep 6")
    alice.click("#submit-job")
    alice.wait_for_url(re.compile(r"/jobs/\d+/$"))
    claimer = job_id_of(alice)
    # Preempted from the reclaim until it runs again (DESIGN §3): the pods save and exit, then the job
    # waits in the queue, still Preempted, "resumes automatically", with its place in the queue.
    bob_watcher.wait_for_selector(row(bob_watcher, borrower, status="Preempted"), timeout=60_000)
    reason = bob_watcher.locator(row(bob_watcher, borrower) + " .reason").inner_text()
    assert reason == "reclaimed for a queued job of quota team-vision"  # Alice's job is not named to Bob
    screenshots(bob_watcher, "jobs-preempted")
    waiting = row(bob_watcher, borrower, status="Preempted") + ' [data-resumes="true"]'
    bob_watcher.wait_for_selector(waiting, timeout=60_000)
    assert "e2e-claimer" not in bob_watcher.content()
    screenshots(bob_watcher, "jobs-preempted-waiting")
    alice.wait_for_selector('#job-badges [data-status="Running"]')
    alice.wait_for_selector('#job-badges [data-in-quota="true"]')

    # It resumes by itself once the claimer is done, showing the step this attempt resumed from.
    resumed = row(bob_watcher, borrower, status="Running") + " .resumed"
    bob_watcher.wait_for_selector(resumed, timeout=60_000)
    step = int(bob_watcher.locator(resumed).get_attribute("data-resumed-step"))
    assert bob_watcher.locator(resumed).inner_text() == f"resumed from step {step:,}"
    seen = bob_watcher.evaluate("window.__seen")
    while seen and seen[0].split("/")[0] in ("Queuing", "EnvPreparing"):  # the page may open before Running
        seen.pop(0)
    assert seen[0] == "Running/out", seen
    preempted = seen.index("Preempted")
    assert not [s for s in seen if s.startswith("Preempted/")], seen  # never with an admission badge
    assert bob_watcher.evaluate("window.__seenLeaks") == []
    after = seen[preempted:]
    assert "Preempted" in after and after[-1] == "Running/out", seen  # queued again, still Preempted
    assert not {s.split("/")[0] for s in after} & {"Restarting", "Queuing", "Failed"}, seen
    assert bob_watcher.evaluate("window.__notReloaded") is True
    api = bob.request.get(f"/api/v1/jobs/{borrower}/").json()
    assert api["progress"]["attempt"] == api["attempt"] == 2 and api["progress"]["resumed_from_step"] == step
    assert (api["preemption_count"], api["restart_count"]) == (1, 0)
    assert step > 0 and api["preemptions"][0]["settled"]

    # The job page tells the story: the reclaim, the queue, the resume from this attempt's checkpoint.
    bob.goto(f"/jobs/{borrower}/")
    bob.click("#events summary")  # the events are collapsed; opened, they stay open across updates
    bob.wait_for_selector("#events .event-preempted")
    bob.wait_for_selector(f"#resumed-from:has-text('step {step:,} (attempt 2)')", timeout=30_000)
    events = bob.inner_text("#events")
    assert "reclaimed for a queued job of quota team-vision" in events and "e2e-claimer" not in events
    assert f"resumed from step {step:,}" in events and "restarting" not in events
    assert "0 of 3 used" in bob.inner_text("#job-live") and bob.inner_text("#preemption-count").startswith("1")
    assert bob.locator("#pods .status-preempted").count() == 4  # the first attempt's pods
    assert bob.locator("#preemptions tbody tr").count() == 1
    screenshots(bob, "job-detail-restarted")

    alice.goto(f"/jobs/{claimer}/")
    alice.wait_for_selector('#job-badges [data-status="Succeeded"]', timeout=30_000)
    for path, name in (("/", "dashboard"), ("/quotas/", "quotas"), ("/nodes/", "nodes")):
        alice.goto(path)
        alice.wait_for_load_state("networkidle")
        screenshots(alice, name)
    assert bob.request.post(f"/api/v1/jobs/{borrower}/stop/", headers=_csrf(bob)).ok


def test_bad_input_creates_nothing_and_workspaces_stay_apart(
    live_server_process: object, open_page: Callable, screenshots: Callable
) -> None:
    alice = open_page("alice")
    bob = open_page("bob")
    frames: list[str] = []
    bob.on("websocket", lambda socket: socket.on("framereceived", lambda payload: frames.append(str(payload))))
    bob.goto("/jobs/")
    bob.wait_for_selector('#live-indicator[data-state="live"]')

    # Bad input: errors at the fields, nothing created.
    before = alice.request.get("/api/v1/jobs/").json()["count"]
    fill_job_form(alice, name="Not Valid!", quota="team-vision", gpus=16, command=" ")
    alice.click("#submit-job")
    alice.wait_for_selector("#form-error-summary")
    assert "lowercase letters" in alice.inner_text("#field-name .error")
    assert "required" in alice.inner_text("#field-command .error")
    # The pod larger than any node is refused at its field at the same time, and the first error has the focus.
    assert "no general node has 16 GPUs; the largest has 8" in alice.inner_text("#field-roles-0-gpus .error")
    assert alice.evaluate("document.activeElement.id") == "id_name"
    screenshots(alice, "job-form-errors")
    alice.fill("#id_name", "still-too-big")
    alice.fill("#id_command", "sleep 1")
    alice.click("#submit-job")
    alice.wait_for_selector("#field-roles-0-gpus .error")
    assert "16" in alice.inner_text("#field-roles-0-gpus .error")
    assert alice.evaluate("document.activeElement.id") == "id_roles-0-gpus"
    assert alice.request.get("/api/v1/jobs/").json()["count"] == before
    # No GPU without saying CPU-only: refused at the GPUs; ticking CPU-only sets them to 0.
    fill_job_form(alice, name="zero-gpus", quota="team-vision", gpus=0, command="sleep 1")
    alice.click("#submit-job")
    alice.wait_for_selector("#field-roles-0-gpus .error")
    assert "CPU-only" in alice.inner_text("#field-roles-0-gpus .error")
    alice.fill("#id_roles-0-gpus", "2")
    alice.check("#id_roles-0-cpu_only")
    assert alice.input_value("#id_roles-0-gpus") == "0"
    assert alice.request.get("/api/v1/jobs/").json()["count"] == before

    # Alice's job runs; Bob sees none of it, neither in pages nor over his socket.
    fill_job_form(alice, name="vision-private", quota="team-vision", gpus=2, command="sleep 60")
    alice.click("#submit-job")
    alice.wait_for_url(re.compile(r"/jobs/\d+/$"))
    private = job_id_of(alice)
    alice.wait_for_selector('#job-badges [data-status="Running"]')
    bob.wait_for_timeout(1500)  # time for any (wrong) broadcast to arrive
    assert frames, "Bob's socket received its snapshot"
    assert not [f for f in frames if "vision-private" in f or f'data-job-id=\\"{private}\\"' in f]
    assert bob.locator(row(bob, private)).count() == 0
    assert bob.goto(f"/jobs/{private}/").status == 404
    assert bob.request.get(f"/api/v1/jobs/{private}/").status == 404
    bob.goto("/nodes/")
    assert "vision-private" not in bob.content()
    bob.goto("/jobs/?workspace=1&workspace=2&q=vision")
    assert "vision-private" not in bob.content()

    # The staff pages.
    admin = open_page("admin")
    admin.goto("/jobs/")
    admin.wait_for_selector(row(admin, private))
    screenshots(admin, "jobs-staff")
    admin.goto("/quotas/")
    screenshots(admin, "quotas-staff")
    admin.goto("/quotas/new/")
    admin.fill("#id_name", "too-big")
    admin.select_option("#id_parent", label="general")
    admin.fill('input[name="min_gpus_0"]', "100")
    admin.click("main button[type=submit]")
    admin.wait_for_selector("#field-min_gpus .error")
    assert "above general's min" in admin.inner_text("#field-min_gpus .error")
    screenshots(admin, "quota-form-errors")
    for path, name in (
        ("/quotas/new/", "quota-new"),
        ("/workspaces/new/", "workspace-new"),
        ("/nodes/", "nodes-staff"),
        ("/pools/", "pools"),
    ):
        admin.goto(path)
        screenshots(admin, name)
    admin.goto("/quotas/")
    admin.click('tr[data-quota="team-research"] a:text("Edit")')
    screenshots(admin, "quota-edit")
    admin.click("a:text('Delete')")
    screenshots(admin, "quota-delete")
    admin.goto("/quotas/")
    admin.click("#workspaces tbody tr:first-child a:text('Edit')")
    screenshots(admin, "workspace-edit")
    admin.goto("/nodes/")
    admin.click("#node-gpu-04 a:text('Drain')")
    admin.wait_for_selector("#confirm-dialog[open]")
    screenshots(admin, "node-drain-dialog")
    admin.goto("/quotas/")
    assert alice.request.post(f"/api/v1/jobs/{private}/stop/", headers=_csrf(alice)).ok


def _csrf(page) -> dict[str, str]:
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    return {"X-CSRFToken": token, "Referer": page.url}
