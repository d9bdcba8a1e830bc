"""Real Celery node workers for executor tests: environment, start, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def node_worker_env(postgres_db, redis_url: str, data_dir: Path) -> dict[str, str]:
    """What a node worker needs: the test database, Redis, a data dir, and a declared 2-GPU inventory."""
    db = postgres_db.settings_dict
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": redis_url,
        "TIDEPOOL_EXECUTOR": "celery",
        "TIDEPOOL_DATA_DIR": str(data_dir),
        "TIDEPOOL_HEARTBEAT_SECONDS": "0.5",
        "TIDEPOOL_GRACE_SECONDS": "3",
        "TIDEPOOL_NODE_GPU_TYPE": "A100",
        "TIDEPOOL_NODE_GPUS": "2",
        "TIDEPOOL_NODE_CPU": "4",
        "TIDEPOOL_NODE_MEMORY_GIB": "8",
    }


def start_worker(node: str, env: dict, log_dir: Path) -> subprocess.Popen:
    log = open(log_dir / f"worker-{node}.log", "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", f"node.{node}", "-n", f"{node}@%h",
         "--without-gossip", "--without-mingle", "-l", "info"],
        cwd=ROOT, env={**env, "TIDEPOOL_NODE_NAME": node}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_workers(workers: dict[str, subprocess.Popen]) -> None:
    """Warm shutdown (SIGTERM: the worker stops, its pods run on for the next one), then SIGKILL for
    any worker that hangs."""
    for process in workers.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in workers.values():
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            process.wait(5)
