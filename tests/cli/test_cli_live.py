"""`tidepool` against a live server: a real `manage.py serve` subprocess (embedded scheduler, local
executor, real pod processes), the CLI run as `python -m tidepool_cli` with its own config folder.

login → submit -f → jobs --watch sees the job run → logs -f streams its output → stop; `--json`
output parsed; errors name the field with the documented exit code."""

from __future__ import annotations

import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.smoke.processes import answers, free_port, marked_processes, new_marker, stop_servers

ROOT = Path(__file__).resolve().parents[2]
MARKER = "TIDEPOOL_TEST_MARKER"

JOB_YAML = """\
name: cli-demo
workspace: vision
quota: team-vision
command: "for i in $(seq 1 600); do echo step $i; sleep 0.2; done"
roles:
  - {name: worker, pod_count: 1, gpu_type: A100, gpus: 2, cpu: 2, memory_gib: 8}
idle_mode: acceptable
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("cli-live")
    marker = new_marker()
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("TIDEPOOL_")}
    env.update(DATABASE_URL=f"sqlite:///{base / 'db.sqlite3'}", TIDEPOOL_DATA_DIR=str(base / "var"),
               TIDEPOOL_SCHEDULER_INTERVAL="0.5", TIDEPOOL_GRACE_SECONDS="3", TIDEPOOL_EXECUTOR="local",
               DEBUG="1", TIDEPOOL_HTTPS="0", PYTHONUNBUFFERED="1", **{MARKER: marker})
    manage = [sys.executable, str(ROOT / "manage.py")]
    for command in (["migrate", "--no-input", "-v0"], ["seed_demo"]):
        subprocess.run([*manage, *command], cwd=ROOT, env=env, check=True, capture_output=True, timeout=180)
    make_token = ("from django.contrib.auth.models import User; from scheduler.services.tokens import token_create;"
                  "print(token_create(user=User.objects.get(username='alice'), name='cli').secret)")
    token = subprocess.run([*manage, "shell", "-c", make_token], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True, timeout=120).stdout.strip().splitlines()[-1]
    log = base / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*manage, "serve", "--addr", "127.0.0.1", "--port", str(port)], cwd=ROOT,
                                   env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not answers(f"{url}/accounts/login/"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        yield {"url": url, "token": token, "config": str(base / "config"), "job": str(base / "job.yaml")}
    finally:
        stop_servers([process], marker, timeout=40)
        assert not marked_processes(marker)


def cli_env(server: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEPOOL_")}
    env.update(XDG_CONFIG_HOME=server["config"], PYTHONUNBUFFERED="1", **extra)
    return env


def tidepool(server: dict[str, str], *args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidepool_cli", *args], cwd=ROOT, env=cli_env(server, **extra),
                          input=stdin, capture_output=True, text=True, timeout=60)


def lines_of(process: subprocess.Popen) -> queue.Queue:
    """The process's stdout lines, read on a thread so a test can wait with a timeout."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def wait_line(lines: queue.Queue, predicate, timeout: float, seen: list[str]) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if predicate(line):
            return line
    raise AssertionError("no matching line; got:\n" + "".join(seen[-30:]))


@pytest.mark.timeout(400)
def test_login_submit_watch_logs_stop(server: dict[str, str]) -> None:
    assert tidepool(server, "jobs").returncode == 3  # not logged in
    login = tidepool(server, "login", "--server", server["url"], stdin=server["token"] + "\n")
    assert login.returncode == 0, login.stderr
    assert "as alice" in login.stdout
    config = Path(server["config"]) / "tidepool" / "config.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    Path(server["job"]).write_text(JOB_YAML)
    submitted = tidepool(server, "submit", "-f", server["job"], "--json")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert job["name"] == "cli-demo" and job["status"] == "Queuing"

    watch = subprocess.Popen([sys.executable, "-m", "tidepool_cli", "jobs", "--watch", "--json"], cwd=ROOT,
                             env=cli_env(server), stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        seen: list[str] = []
        running = wait_line(lines_of(watch), lambda line: line.startswith("{") and json.loads(line)["id"] == job["id"]
                            and json.loads(line)["status"] == "Running", 90, seen)
        assert json.loads(running)["nodes"]
    finally:
        os.killpg(watch.pid, signal.SIGTERM)
        watch.wait(10)

    follow = subprocess.Popen([sys.executable, "-m", "tidepool_cli", "logs", str(job["id"]), "-f"], cwd=ROOT,
                              env=cli_env(server), stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        seen = []
        lines = lines_of(follow)
        first = wait_line(lines, lambda line: line.startswith("step "), 60, seen)
        later = int(first.split()[1]) + 5
        wait_line(lines, lambda line: line.strip() == f"step {later}", 30, seen)  # it follows as the log grows
        stopped = tidepool(server, "stop", "cli-demo", "--json")
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["status"] in ("Stopping", "Stopped")
        assert follow.wait(60) == 0  # the stream ends once the pod has exited
    finally:
        if follow.poll() is None:
            os.killpg(follow.pid, signal.SIGKILL)

    detail = json.loads(tidepool(server, "get", str(job["id"]), "-o", "json").stdout)
    assert detail["status"] == "Stopped" and detail["pods"][0]["status"] == "Stopped"
    table = tidepool(server, "jobs").stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "NAME", "STATUS"] and any("cli-demo" in row for row in table[1:])
    quotas = json.loads(tidepool(server, "quotas", "--json").stdout)
    assert {q["name"] for q in quotas} >= {"general", "team-vision"}
    assert "gpu-01" in tidepool(server, "nodes").stdout

    refused = tidepool(server, "submit", "-f", server["job"], "--pods", "0")
    assert refused.returncode == 1 and "roles[0].pod_count" in refused.stderr
    assert tidepool(server, "get", "no-such-job").returncode == 4
    revoked = tidepool(server, "jobs", TIDEPOOL_TOKEN="tp_bogus_token")
    assert revoked.returncode == 3 and "Unknown API token" in revoked.stderr
