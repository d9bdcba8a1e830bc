"""End-to-end fixtures: a real `manage.py serve` (console + scheduler + local executor) and Chromium.

The server runs as a subprocess on a free port with its own SQLite file and data directory,
after `migrate` and `seed_demo`; pods are real processes. At the end the server is interrupted
(it shuts its pods down), and every process that still carries this run's marker in its
environment is killed, so nothing outlives the suite.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = PROJECT / "build" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
]
PASSWORDS = {"admin": "tidepool-admin", "alice": "tidepool-alice", "bob": "tidepool-bob"}
MARKER_VARIABLE = "TIDEPOOL_E2E_RUN"

# A WebSocket stand-in for tests of the reconnect: while window.__blockSockets is true, new
# connections go nowhere and fail, as they would while the server is unreachable.
SOCKET_SWITCH = """
(() => {
  const Real = window.WebSocket;
  window.__blockSockets = false;
  function Switchable(url, protocols) {
    return new Real(window.__blockSockets ? "ws://127.0.0.1:9/unreachable" : url, protocols);
  }
  Switchable.prototype = Real.prototype;
  for (const key of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) Switchable[key] = Real[key];
  window.WebSocket = Switchable;
})();
"""


@dataclass
class LiveServer:
    url: str
    data_dir: Path
    log_path: Path

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_with_marker(marker: str) -> list[int]:
    """Pids whose environment carries this run's marker: the server and every pod it started."""
    found = []
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _wait_for(url: str, process: subprocess.Popen, server: LiveServer, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not answer {url} within {timeout:.0f} s:\n{server.log_tail()}")


@pytest.fixture(scope="session")
def live_server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip install playwright)")
    base = tmp_path_factory.mktemp("tidepool-e2e")
    marker = uuid.uuid4().hex
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{base / 'db.sqlite3'}",
        "TIDEPOOL_DATA_DIR": str(base / "var"),
        "TIDEPOOL_SCHEDULER_INTERVAL": "0.5",
        "TIDEPOOL_GRACE_SECONDS": "8",
        "TIDEPOOL_RESTART_BACKOFF_BASE": "1",
        "TIDEPOOL_EXECUTOR": "local",
        "DEBUG": "1",
        "TIDEPOOL_HTTPS": "0",
        # Pods get nothing of the server's environment but what this list names: the marker too.
        "TIDEPOOL_POD_ENV_ALLOW": f"PATH,LANG,LC_*,{MARKER_VARIABLE}",
        MARKER_VARIABLE: marker,
    }
    env.pop("REDIS_URL", None)  # the embedded setup: in-process channel layer
    manage = [sys.executable, str(PROJECT / "manage.py")]
    for command in (["migrate", "--no-input", "-v0"], ["seed_demo"]):
        subprocess.run([*manage, *command], cwd=PROJECT, env=env, check=True, capture_output=True, timeout=120)
    server = LiveServer(url=f"http://127.0.0.1:{port}", data_dir=base / "var", log_path=base / "server.log")
    with server.log_path.open("wb") as log:
        process = subprocess.Popen(
            [*manage, "serve", "--addr", "127.0.0.1", "--port", str(port)],
            cwd=PROJECT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: nothing of it is left behind by accident
            # Ctrl-C semantics even when pytest runs in a shell that ignores SIGINT for background jobs.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        _wait_for(f"{server.url}/accounts/login/", process, server)
        yield server
    finally:
        _stop(process, marker)


def _stop(process: subprocess.Popen, marker: str) -> None:
    """Interrupt the server (it terminates its pods), then kill whatever still carries the marker."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    leftovers = _processes_with_marker(marker)
    for pid in leftovers:
        try:
            os.killpg(pid, signal.SIGKILL)  # pods lead their own process group
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while _processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    remaining = _processes_with_marker(marker)
    if leftovers:
        warnings.warn(f"{len(leftovers)} process(es) outlived the server's shutdown and were killed: {leftovers}",
                      stacklevel=1)
    assert not remaining, f"processes left after the e2e run: {remaining}"


@pytest.fixture(scope="session")
def browser(live_server_process: LiveServer) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser: object, live_server_process: LiveServer) -> Iterator[Callable[..., object]]:
    """open_page("alice") → a page of a fresh browser context, logged in (None: not logged in)."""
    contexts = []

    def open_(user: str | None) -> object:
        context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=live_server_process.url)
        context.set_default_timeout(20_000)
        context.add_init_script(SOCKET_SWITCH)
        contexts.append(context)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.js_errors = errors
        if user is not None:
            page.goto("/accounts/login/")
            page.fill("#id_username", user)
            page.fill("#id_password", PASSWORDS[user])
            page.click("button[type=submit]")
            page.wait_for_url("**/jobs/")
        return page

    yield open_
    for context in contexts:
        for page in context.pages:
            assert not page.js_errors, f"JavaScript errors on {page.url}: {page.js_errors}"
        context.close()


@pytest.fixture(scope="session")
def screenshots() -> Callable[[object, str], None]:
    """snap(page, name): build/screenshots/<name>.png at 1280×800, and <name>-390.png after checking
    that nothing overflows a 390 px wide screen."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def snap(page: object, name: str) -> None:
        page.set_viewport_size({"width": 1280, "height": 800})
        page.wait_for_timeout(150)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        page.set_viewport_size({"width": 390, "height": 800})
        page.wait_for_timeout(150)
        width = page.evaluate("document.documentElement.scrollWidth")
        page.screenshot(path=str(SCREENSHOTS / f"{name}-390.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 800})
        assert width <= 390, f"{name} ({page.url}) is {width} px wide at a 390 px viewport"

    return snap
