"""An elastic torchrun job shrinks for an owner and grows back, live in the browser (DESIGN §2c, issue 24).

On the demo's Lingjun pool (2 × 8 H800, virtual GPUs; host-process pods): alice's 8-GPU job fills
lj-vision's guarantee and bob's 4-GPU job most of lj-language's, so alice's elastic job (lj-vision, idle
resources acceptable, 1 to 4 pods of 1 GPU) runs on idle GPUs only: a real `torchrun` in every pod,
training examples/elastic_train.py over gloo. With the pool's grow interval set to 5 s on the pool
policies page, it grows from 1 to 4 pods and fills the pool. Bob then asks for 2 GPUs of lj-language's
guarantee: the scheduler takes two of the job's extra pods (a shrink, not a preemption), the job stays
Running and its world of 2 trains on past the step it had reached; when bob's job ends it grows back to
4 and trains in a world of 4. Alice's list and the job page show every step without a reload.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_e2e_console import RECORD_STATUSES, _csrf, fill_job_form, job_id_of, row

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PROJECT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).parent / "torchrun"
ELASTIC_TRAIN = f"{TORCHRUN} {PROJECT / 'examples' / 'elastic_train.py'} --step-sleep 0.2 --checkpoint-every 5"
GROW_INTERVAL_S = 5
# The job page's resizes table (oldest first) has grown back to 4 pods after the shrink.
RESIZES_END_AT_4 = """() => {
  const cells = [...document.querySelectorAll('#resizes tbody tr td:nth-child(2)')].map(c => c.innerText);
  return cells.length >= 3 && cells[cells.length - 1].endsWith('→ 4');
}"""
STEP_LINE = re.compile(r"^step (\d+) world (\d+) ", re.MULTILINE)


class RankZeroLog:
    """The job's rank-0 pod's log as it grows (the API's offset-following read; rank 0 is a base pod, which
    no resize touches): its step lines, in the order they were written."""

    def __init__(self, page, job_id: int) -> None:
        self.page, self.job_id = page, job_id
        self.pod: int | None = None
        self.offset = 0
        self.text = ""

    def steps(self) -> list[tuple[int, int]]:
        """(step, world size) of every step line so far."""
        query = f"shown={self.pod}&offset={self.offset}" if self.pod is not None else "lines=5000"
        response = self.page.request.get(f"/api/v1/jobs/{self.job_id}/logs/?{query}")
        assert response.ok, response.text()
        data = response.json()
        if data["pod"] is not None:
            self.text = data["text"] if data["reset"] else self.text + data["text"]
            self.pod, self.offset = data["pod"]["id"], data["offset"]
        return [(int(step), int(world)) for step, world in STEP_LINE.findall(self.text)]

    def wait_for_training(self, *, world: int, after: tuple[int, int], timeout_s: float = 90) -> tuple[int, int]:
        """Wait for a step line written after line `after[0]`, past step `after[1]`, in a world of `world`
        pods; returns (its line, its step)."""
        line, past_step = after
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            steps = self.steps()
            found = [(n, step) for n, (step, size) in enumerate(steps) if n > line and size == world and step > past_step]
            if found:
                return found[0]
            self.page.wait_for_timeout(300)
        raise AssertionError(f"no step past {past_step} in a world of {world} within {timeout_s:.0f} s; "
                             f"last: {self.steps()[-5:]}")

    def now(self) -> tuple[int, int]:
        """(the last step line, its step): what a later phase must go beyond."""
        steps = self.steps()
        return (len(steps) - 1, steps[-1][0]) if steps else (-1, 0)


def set_grow_interval(page, seconds: int) -> None:
    page.goto("/pools/")
    page.fill("#id_lingjun_grow_interval_s", str(seconds))
    page.click("#pool-lingjun button[type=submit]")
    page.wait_for_selector(f'#pool-lingjun [data-policy="grow_interval_s"]:has-text("({seconds} s)")')


def size_shown(page, job_id: int, running: int) -> str:
    """The job's row in the live list, showing "N of 1–4 pods"."""
    return row(page, job_id) + f' [data-elastic-pods="{running} of 1–4 pods"]'


def submit(page, **fields: object) -> int:
    fill_job_form(page, fault_tolerance=False, **fields)
    page.click("#submit-job")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    return job_id_of(page)


@pytest.mark.skipif(not TORCHRUN.exists(), reason=f"needs torch in the venv ({TORCHRUN} is missing): "
                                                   ".venv/bin/pip install torch==2.13.0")
def test_an_elastic_torchrun_job_shrinks_for_an_owner_and_grows_back(
    live_server_process: object, open_page: Callable, screenshots: Callable, request: pytest.FixtureRequest
) -> None:
    admin, alice, watcher, bob = open_page("admin"), open_page("alice"), open_page("alice"), open_page("bob")

    def stop_on_exit(page, job_id: int) -> None:
        request.addfinalizer(lambda: page.request.post(f"/api/v1/jobs/{job_id}/stop/", headers=_csrf(page)))

    # The Lingjun pool's grow interval, set on the pool policies page (§2c: the default is 300 s).
    set_grow_interval(admin, GROW_INTERVAL_S)
    request.addfinalizer(lambda: set_grow_interval(admin, 300))
    pools = {pool["resource_type"]: pool for pool in admin.request.get("/api/v1/pools/").json()}
    assert pools["lingjun"]["grow_interval_s"] == GROW_INTERVAL_S

    # 12 of the pool's 16 GPUs In Quota: lj-vision's whole guarantee, 4 of lj-language's 6.
    vision_fill = submit(alice, name="e2e-lj-vision-fill", quota="lj-vision", pods=1, gpus=8, command="sleep 600")
    stop_on_exit(alice, vision_fill)
    language_fill = submit(bob, name="e2e-lj-language-fill", quota="lj-language", pods=1, gpus=4,
                           command="sleep 600")
    stop_on_exit(bob, language_fill)
    for page in (alice, bob):  # each on its job's page
        page.wait_for_selector('#job-badges [data-status="Running"]', timeout=60_000)

    # The elastic job: 1 to 4 pods of 1 GPU, on idle resources (lj-vision has none left).
    fill_job_form(alice, name="e2e-elastic", quota="lj-vision", idle="acceptable", pods=4, gpus=1,
                  command=ELASTIC_TRAIN, fault_tolerance=False)
    alice.fill("#id_roles-0-min_pod_count", "1")
    alice.click("#submit-job")
    alice.wait_for_url(re.compile(r"/jobs/\d+/$"))
    elastic = job_id_of(alice)
    stop_on_exit(alice, elastic)
    watcher.goto("/jobs/")
    watcher.evaluate("window.__notReloaded = true")
    watcher.evaluate(RECORD_STATUSES, [elastic, "__seen"])

    # It starts on its base (1 pod) and grows onto the pool's last 4 idle GPUs after the grow interval.
    watcher.wait_for_selector(row(watcher, elastic, status="Running") + ' [data-in-quota="false"]', timeout=60_000)
    watcher.wait_for_selector(size_shown(watcher, elastic, 4), timeout=60_000)
    log = RankZeroLog(alice, elastic)
    log.wait_for_training(world=4, after=(-1, 0))
    screenshots(watcher, "jobs-elastic-grown")

    # Bob claims 2 GPUs of his guarantee: two extra pods go, the job keeps running on 2.
    before_shrink = log.now()
    claim = submit(bob, name="e2e-lj-language-claim", quota="lj-language", pods=2, gpus=1, command="sleep 600")
    stop_on_exit(bob, claim)
    watcher.wait_for_selector(size_shown(watcher, elastic, 2), timeout=60_000)
    bob.wait_for_selector('#job-badges [data-status="Running"]', timeout=60_000)
    bob.wait_for_selector('#job-badges [data-in-quota="true"]')
    # Trains on in a world of 2, past the step it had reached before the shrink.
    after_shrink = log.wait_for_training(world=2, after=before_shrink)
    screenshots(watcher, "jobs-elastic-shrunk")

    alice.goto(f"/jobs/{elastic}/")
    alice.wait_for_selector('#resizes tr[data-resize="shrink"]')
    assert alice.inner_text("#elastic-pods").startswith("2 of 1–4 pods")
    shrink = alice.inner_text('#resizes tr[data-resize="shrink"]')
    assert "4 → 2" in shrink and "reclaimed for a queued job of quota lj-language" in shrink
    assert "e2e-lj-language-claim" not in alice.content()  # bob's job is not named to alice
    screenshots(alice, "job-detail-elastic-shrunk")

    # Bob's job ends: the job grows back to 4 pods and trains in a world of 4.
    assert bob.request.post(f"/api/v1/jobs/{claim}/stop/", headers=_csrf(bob)).ok
    watcher.wait_for_selector(size_shown(watcher, elastic, 4), timeout=60_000)
    log.wait_for_training(world=4, after=(after_shrink[0], log.now()[1]))
    # Bob's two pods free their GPUs in one cycle or in two: growth places the extra pods that fit now
    # (DESIGN §2c), so the job grows 2 → 4 at once, or 2 → 3 and, a grow interval later, 3 → 4.
    alice.wait_for_function(RESIZES_END_AT_4, timeout=30_000)
    assert alice.inner_text("#elastic-pods").startswith("4 of 1–4 pods")
    resizes = alice.eval_on_selector_all("#resizes tbody tr td:nth-child(2)", "cells => cells.map(c => c.innerText)")
    assert resizes in (["1 → 4", "4 → 2", "2 → 4"], ["1 → 4", "4 → 2", "2 → 3", "3 → 4"]), resizes
    screenshots(alice, "job-detail-elastic-grown")

    # Never Preempted, never restarted: the resizes are counted apart.
    api = alice.request.get(f"/api/v1/jobs/{elastic}/").json()
    assert (api["status"], api["attempt"], api["preemption_count"], api["restart_count"]) == ("Running", 1, 0, 0)
    assert (api["shrink_count"], api["grow_count"]) == (1, len(resizes) - 1)
    seen = watcher.evaluate("window.__seen")
    assert {state.split("/")[0] for state in seen} <= {"Queuing", "EnvPreparing", "Running"}, seen  # no Preempted
    assert seen[-1] == "Running/out" and not [state for state in seen if state.endswith("/in")], seen
    assert watcher.evaluate("window.__notReloaded") is True
