"""One scheduler leads (PostgreSQL advisory lock); a standby takes over when the leader dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def start_scheduler(env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_scheduler", "--interval", "0.3"],
        cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )


def wait_for_text(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{path.name} never said {text!r}:\n{path.read_text(errors='replace')}")


def test_standby_takes_over_when_leader_dies(postgres_db, tmp_path):
    db = postgres_db.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "TIDEPOOL_DATA_DIR": str(tmp_path),
        "TIDEPOOL_EXECUTOR": "local",
    }
    env.pop("REDIS_URL", None)
    leader_log, standby_log = tmp_path / "leader.log", tmp_path / "standby.log"
    leader = start_scheduler(env, leader_log)
    standby = None
    try:
        wait_for_text(leader_log, "leader: this process schedules", 60)
        standby = start_scheduler(env, standby_log)
        wait_for_text(standby_log, "standby: another scheduler holds the leader lock", 60)
        assert "leader:" not in standby_log.read_text()
        leader.send_signal(signal.SIGKILL)  # dies without releasing: its session ends, so does the lock
        leader.wait(10)
        wait_for_text(standby_log, "leader: this process schedules", 30)
    finally:
        for process in (leader, standby):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
