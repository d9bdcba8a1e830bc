"""The README's first command works: `bin/start` migrates, seeds the demo cluster and serves the console.

Runs the real script as a subprocess (own session) on a fresh SQLite file, logs in as the demo
staff user over HTTP and reads the admin's quota tree and node list; checks it serves with DEBUG
off (a wrong path is a plain 404 that lists no URL pattern) and still serves the console's static
files; then SIGTERMs the process group and proves nothing is left running. bin/start runs bin/setup, which pip-installs only when
pyproject.toml is newer than its stamp: after bin/test that is a no-op; without the stamp the
first run installs, hence the generous timeout.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import urllib.error
import urllib.request

import pytest

from tests.smoke.processes import (
    MARKER_VARIABLE,
    ROOT,
    Browser,
    answers,
    free_port,
    marked_processes,
    new_marker,
    stop_servers,
    wait_for,
)

STARTUP_TIMEOUT = 480  # bin/setup may pip-install on a machine where bin/test has not run yet

DEMO_TREE = {
    "general": ["team-language", "team-research", "team-vision"],
    "lingjun": ["lj-language", "lj-research", "lj-vision"],
}
DEMO_NODES = ["gpu-01", "gpu-02", "gpu-03", "gpu-04", "lingjun-01", "lingjun-02"]


def log_tail(path, lines: int = 60) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no output)"
    return "bin/start output:\n" + "\n".join(text.splitlines()[-lines:])


@pytest.mark.timeout(STARTUP_TIMEOUT + 120)
def test_bin_start_serves_the_demo_console(tmp_path):
    port = free_port()
    marker = new_marker()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("TIDEPOOL_")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",  # sqlite:////abs/path
        TIDEPOOL_DATA_DIR=str(tmp_path / "var"),
        TIDEPOOL_PORT=str(port),
        PYTHONUNBUFFERED="1",
        **{MARKER_VARIABLE: marker},
    )
    log = tmp_path / "bin-start.log"
    base = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        server = subprocess.Popen([str(ROOT / "bin" / "start")], cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def up() -> bool:
            assert server.poll() is None, f"bin/start exited with {server.returncode}\n{log_tail(log)}"
            return answers(f"{base}/accounts/login/")

        wait_for(up, STARTUP_TIMEOUT, "the console to answer /accounts/login/", step=0.5,
                 on_timeout=lambda: log_tail(log))
        assert (tmp_path / "db.sqlite3").exists(), "bin/start did not use DATABASE_URL"
        output = log.read_text()
        assert "embedded scheduler and local executor running" in output
        assert f'CLI: bin/tidepool (or .venv/bin/tidepool); create a token on the console\'s API tokens page, then: ' \
               f'echo "$TOKEN" | bin/tidepool login --server http://127.0.0.1:{port}' in output
        secret = tmp_path / "var" / "secret_key"  # DEBUG off needs a real key: made once, private
        assert secret.exists() and stat.S_IMODE(secret.stat().st_mode) == 0o600

        for wrong in ("/api/v1/no-such-thing/", "/no-such-page/"):
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(base + wrong, timeout=30)
            body = answer.value.read().decode()
            assert answer.value.code == 404
            assert "URLconf" not in body and "accounts/login/" not in body and "Traceback" not in body, body[:2000]

        browser = Browser(base)
        browser.login("admin", "tidepool-admin", next_path="/admin/")
        _, page = browser.get("/")  # the console's job list: its CSS and script load with DEBUG off
        assets = set(re.findall(r'(?:href|src)="(/static/[^"]+)"', page))
        assert {"/static/console/console.css", "/static/console/console.js"} <= {a.split("?")[0] for a in assets}
        for asset in assets:
            with urllib.request.urlopen(base + asset, timeout=30) as response:
                assert response.status == 200 and response.read(), asset

        url, quotas = browser.get("/admin/scheduler/resourcequota/")
        assert url.endswith("/admin/scheduler/resourcequota/"), url
        rows = re.findall(r'class="field-tree_name"><a href="[^"]*">([^<]*)</a>', quotas)
        tree: dict[str, list[str]] = {}
        for cell in rows:
            name = cell.replace("\u2003", "").replace("└", "").strip()
            if cell.strip() == name:  # a root: not indented
                tree[name] = []
            else:
                assert tree, f"child {name} listed before any root"
                tree[list(tree)[-1]].append(name)  # listed under the root above it
        assert {root: sorted(children) for root, children in tree.items()} == DEMO_TREE, rows
        assert "8 resource quotas" in quotas
        assert "32 A100" in quotas and "16 H800" in quotas  # the roots' min is each pool's capacity

        url, nodes = browser.get("/admin/scheduler/node/")
        assert url.endswith("/admin/scheduler/node/"), url
        assert "6 nodes" in nodes
        listed = re.findall(r'class="field-name"><a href="[^"]*">([^<]*)</a>', nodes)
        assert sorted(listed) == DEMO_NODES

        pgid = os.getpgid(server.pid)
        assert pgid == server.pid  # its own session: the group holds the server and nothing of ours
    finally:
        stop_servers([server], marker)
    assert server.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)  # the process group is empty
    assert marked_processes(marker) == []
