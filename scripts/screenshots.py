"""Screenshots of the console for docs/console.md: the job list during a preemption, the preempted
job's page and the submission form with errors, each at 1,280 and 390 px wide.

It starts its own console (`manage.py serve`, the embedded scheduler and local executor) on a
throwaway SQLite database and data directory seeded with `seed_demo --sample-jobs`, logs in as
alice, claims 8 GPUs of team-vision so the demo's borrower research-sweep is reclaimed, and
photographs the pages with Debian's Chromium through Playwright. At the end the server is
interrupted and every process still carrying this run's marker is killed.

    .venv/bin/python scripts/screenshots.py            # writes docs/img/*.png
    .venv/bin/python scripts/screenshots.py --port 8124 --out /tmp/shots

Needs /usr/bin/chromium and the playwright package (both used by tests/e2e).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-gpu"]
MARKER_VARIABLE = "TIDEPOOL_SCREENSHOTS_RUN"
BORROWER = "research-sweep"  # the demo's sample job on idle resources (scheduler/demo.py)
WIDTHS = (1280, 390)


def server_environment(base: Path, marker: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{base / 'db.sqlite3'}",
        "TIDEPOOL_DATA_DIR": str(base / "var"),
        "TIDEPOOL_SCHEDULER_INTERVAL": "0.5",
        "TIDEPOOL_GRACE_SECONDS": "2",
        "TIDEPOOL_EXECUTOR": "local",
        "DEBUG": "0",
        "TIDEPOOL_HTTPS": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "TIDEPOOL_POD_ENV_ALLOW": f"PATH,LANG,LC_*,{MARKER_VARIABLE}",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        MARKER_VARIABLE: marker,
    }
    env.pop("REDIS_URL", None)  # the embedded setup: in-process channel layer
    return env


def processes_with_marker(marker: str) -> list[int]:
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def stop_server(process: subprocess.Popen, marker: str) -> None:
    """Interrupt the server (it stops its pods), then kill whatever of this run is left, by pid."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    for pid in processes_with_marker(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(url: str, process: subprocess.Popen, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the console exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the console did not answer {url} within {timeout:.0f} s")


def snap(page: object, out: Path, name: str, *, full_page: bool = True) -> None:
    """<name>-1280.png and <name>-390.png; refuses a page wider than a 390 px screen."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 800})
        page.wait_for_timeout(300)
        if width == 390:
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            if scroll_width > 390:
                raise SystemExit(f"{name} is {scroll_width} px wide at a 390 px viewport")
        path = out / f"{name}-{width}.png"
        page.screenshot(path=str(path), full_page=full_page)
        print(f"wrote {path.relative_to(PROJECT) if path.is_relative_to(PROJECT) else path}")
    page.set_viewport_size({"width": 1280, "height": 800})


def take(base_url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url)
        context.set_default_timeout(30_000)
        # A changed row flashes for 1.2 s; progress reports change rows all the time, so no flash in a picture.
        context.add_init_script("document.addEventListener('DOMContentLoaded', () => document.head.insertAdjacentHTML("
                                "'beforeend', '<style>tr.flash td { animation: none !important; }</style>'))")
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "tidepool-alice")
        page.click("button[type=submit]")
        page.wait_for_url("**/jobs/")
        borrower = f'tr[data-name="{BORROWER}"]'
        page.wait_for_selector(f'{borrower}[data-status="Running"] [data-in-quota="false"]', timeout=120_000)

        # Alice claims 8 GPUs of team-vision's guarantee: the borrower is reclaimed and waits Preempted.
        claim = context.new_page()
        claim.goto("/jobs/new/")
        claim.fill("#id_name", "vision-claim")
        claim.fill("#id_command", "sleep 300")
        claim.check('.quota-option:has(.q-name:text-is("team-vision")) input')
        claim.fill("#id_roles-0-gpus", "8")
        claim.click("#submit-job")
        claim.wait_for_url(re.compile(r"/jobs/\d+/$"))
        claim.close()
        page.wait_for_selector(f'{borrower}[data-status="Preempted"] [data-resumes="true"]', timeout=60_000)
        page.wait_for_timeout(1500)  # the row's flash fades
        snap(page, out, "jobs-preempted")

        page.click(f"{borrower} a.job-name")
        page.wait_for_selector("#job-badges [data-status='Preempted']")
        page.wait_for_function("document.getElementById('log-text').textContent !== 'Loading…'")
        snap(page, out, "job-preempted")

        # Two mistakes at once: a bad name and a pod larger than any node (16 GPUs; nodes have 8).
        page.goto("/jobs/new/")
        page.fill("#id_name", "Vision ResNet!")
        page.fill("#id_command", "python train.py")
        page.check('.quota-option:has(.q-name:text-is("team-vision")) input')
        page.fill("#id_roles-0-gpus", "16")
        page.click("#submit-job")
        page.wait_for_selector("#field-roles-0-gpus .error")
        focused = page.evaluate("document.activeElement.id")
        if focused != "id_name":
            raise SystemExit(f"the first error field is not focused (the focus is on {focused!r})")
        snap(page, out, "job-form-errors")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8123, help="port of the throwaway console (default 8123)")
    parser.add_argument("--out", type=Path, default=PROJECT / "docs" / "img", help="folder for the PNGs")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    marker = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="tidepool-screenshots-") as tmp:
        base = Path(tmp)
        env = server_environment(base, marker)
        manage = [sys.executable, str(PROJECT / "manage.py")]
        for command in (["migrate", "--no-input", "-v0"], ["seed_demo", "--sample-jobs"]):
            subprocess.run([*manage, *command], cwd=PROJECT, env=env, check=True, capture_output=True, timeout=180)
        log = base / "server.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [*manage, "serve", "--addr", "127.0.0.1", "--port", str(args.port)],
                cwd=PROJECT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            base_url = f"http://127.0.0.1:{args.port}"
            wait_for(f"{base_url}/accounts/login/", process, log)
            take(base_url, args.out)
        finally:
            stop_server(process, marker)


if __name__ == "__main__":
    main()
