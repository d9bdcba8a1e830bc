"""A separate `run_scheduler` process serves its cycle histogram on TIDEPOOL_SCHEDULER_METRICS_PORT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from tests.smoke.processes import ROOT, free_port
from tests.waiting import wait_for


@pytest.mark.timeout(120)
def test_run_scheduler_serves_the_cycle_histogram(tmp_path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", TIDEPOOL_DATA_DIR=str(tmp_path / "var"),
               TIDEPOOL_SCHEDULER_METRICS_PORT=str(port), TIDEPOOL_SCHEDULER_INTERVAL="0.2",
               TIDEPOOL_EMBEDDED_SCHEDULER="0")
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    process = subprocess.Popen([*manage, "run_scheduler"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)

    def cycles() -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return 0
        for line in text.splitlines():
            if line.startswith('tidepool_scheduler_cycle_phase_seconds_count{phase="engine"}'):
                return float(line.split()[-1])
        return 0

    try:
        wait_for(lambda: cycles() >= 3, 60, "three cycles counted on the scheduler's metrics port")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
