"""Helpers for smoke tests that run Tidepool as real server processes.

Every server a smoke test starts gets a unique TIDEPOOL_TEST_MARKER in its environment. Pods
inherit the server's environment, so `marked_processes(marker)` finds the server, its children
and every pod process group it launched (pods run in sessions of their own), and the tests can
prove that none of them outlives the test.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
MARKER_VARIABLE = "TIDEPOOL_TEST_MARKER"


def new_marker() -> str:
    return uuid.uuid4().hex


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def marked_processes(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose environment carries the marker."""
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile, or not ours
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if needle in environ and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def kill_groups(pids: list[int], sig: int = signal.SIGKILL) -> None:
    for pgid in {process_group(pid) for pid in pids} - {None, os.getpgrp()}:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass


def stop_servers(processes: list[subprocess.Popen | None], marker: str, timeout: float = 30) -> None:
    """SIGTERM each server's process group, wait, then make sure nothing they started is left.

    Leftovers are killed (so one failure never leaks processes into later tests) and reported.
    """
    slow = []
    for process in processes:
        if process is None or process.poll() is not None:
            continue
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            slow.append(process.pid)
    try:
        wait_for(lambda: not marked_processes(marker), 15, "the servers' processes to exit")
    except AssertionError:
        leftovers = marked_processes(marker)
        kill_groups(leftovers)
        raise AssertionError(f"processes left running after the server stopped: {leftovers}")  # noqa: B904
    assert not slow, f"server(s) {slow} did not exit within {timeout:.0f} s of SIGTERM"


class Browser:
    """A logged-in session over urllib: a cookie jar, and the CSRF token from the login form."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[str, str]:
        """(final URL after redirects, body)"""
        with self.opener.open(self.base + path, timeout=30) as response:
            return response.geturl(), response.read().decode()

    def login(self, username: str, password: str, next_path: str = "/admin/") -> None:
        _, form = self.get(f"/accounts/login/?next={urllib.parse.quote(next_path)}")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token, "the login form has no CSRF token"
        fields = {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1),
                  "next": next_path}
        data = urllib.parse.urlencode(fields).encode()
        request = urllib.request.Request(self.base + "/accounts/login/", data=data,
                                         headers={"Referer": self.base + "/accounts/login/"})
        with self.opener.open(request, timeout=30) as response:
            final, body = response.geturl(), response.read().decode()
        assert "/accounts/login/" not in final, f"login as {username} failed:\n{body[:2000]}"
