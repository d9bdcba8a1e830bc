"""The production stack as documented, started by `bin/cluster`: PostgreSQL, Redis, the console (nginx
in front of gunicorn's sync workers for HTTP and its uvicorn workers for websockets), run_scheduler
plus a standby, and two node agents holding only their node's key (bin/node-agent, TIDEPOOL_EXECUTOR=agents).

Submit through the API → pods start on the node agents (which read them through the node API and
report back through it) → an In Quota job reclaims an idle borrower → the borrower resumes from its
checkpoint. A websocket connected through the multi-worker server and the Redis channel layer
follows the borrower the whole time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from tests.cluster.stack import ROOT, Api, Stack, require_nginx, session_cookie, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(240)]


def _pods_in_containers() -> bool:
    """bin/cluster's own default (docs/runtime.md): containers where rootful Podman is installed."""
    runtime = os.environ.get("TIDEPOOL_POD_RUNTIME")
    if runtime:
        return runtime == "podman"
    return shutil.which("podman") is not None and os.geteuid() == 0


# In a container the image's python3 runs the example from /opt/tidepool (bin/build-pod-image); on the
# host, the checkout's.
_TRAINER = ("python3 /opt/tidepool/examples/train_linear.py" if _pods_in_containers()
            else f"{sys.executable} {ROOT / 'examples' / 'train_linear.py'}")
TRAIN = (f"{_TRAINER} --steps 100000 --checkpoint-every 20 "
         "--step-sleep 0.05 --checkpoint-dir $TIDEPOOL_CHECKPOINT_DIR/rank-$RANK")


@pytest.fixture
def stack(postgres_db, redis_url, tmp_path):
    require_nginx()
    stack = Stack(directory=tmp_path / "cluster", database=f"tidepool_stack_{postgres_db.settings_dict['NAME']}"[:60],
                  redis_url=redis_url, extra_env={
                      "TIDEPOOL_WEB_WORKERS": "2", "TIDEPOOL_NODE_GPUS": "2", "TIDEPOOL_NODE_CPU": "4",
                      "TIDEPOOL_NODE_MEMORY_GIB": "8", "TIDEPOOL_SCHEDULER_INTERVAL": "1",
                      "TIDEPOOL_HEARTBEAT_SECONDS": "1", "TIDEPOOL_GRACE_SECONDS": "15",
                      "TIDEPOOL_RESTART_BACKOFF_BASE": "0.5"})
    stack.drop_database()
    if _pods_in_containers():  # bin/cluster builds it too, but a first debootstrap outlasts its start timeout
        built = subprocess.run([str(ROOT / "bin" / "build-pod-image")], cwd=ROOT, capture_output=True, text=True,
                               timeout=1800)
        assert built.returncode == 0, built.stdout + built.stderr
    try:
        started = stack.run("start", "--seed")
        assert started.returncode == 0, started.stdout + started.stderr + stack.logs()
        yield stack
    finally:
        stopped = stack.run("stop", timeout=120)
        try:
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
            assert "did not stop" not in stopped.stdout, stopped.stdout + stack.logs()
        finally:
            stack.drop_database()


class SocketWatcher(threading.Thread):
    """A browser's job-list websocket: records every message until told to stop."""

    def __init__(self, stack: Stack, cookie: str) -> None:
        super().__init__(daemon=True)
        from websockets.sync.client import connect

        self._connection = connect(stack.url("/ws/jobs/").replace("http", "ws"), open_timeout=20,
                                   additional_headers={"Cookie": cookie, "Origin": stack.url("")})
        self.socket = self._connection.__enter__()
        self.messages: list[tuple[float, dict]] = []
        self.closed_early: str | None = None
        self.stopping = False

    def run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            for raw in self.socket:
                self.messages.append((time.monotonic(), json.loads(raw)))
        except ConnectionClosed as error:
            if not self.stopping:
                self.closed_early = repr(error)
        if not self.stopping and self.closed_early is None:
            self.closed_early = "closed by the server"

    def close(self) -> None:
        self.stopping = True
        self._connection.__exit__(None, None, None)
        self.join(5)


def test_documented_stack_runs_reclaims_and_resumes(stack: Stack) -> None:
    with urllib.request.urlopen(stack.url("/static/console/console.css"), timeout=30) as response:
        assert response.headers["Server"].startswith("nginx")  # the documented front: nginx
        assert response.headers["Content-Type"].startswith("text/css")  # serving the collected files
    alice = Api(stack, "alice")
    nodes = wait_for(lambda: [n for n in alice.get("/api/v1/nodes/") if n["last_heartbeat"] and n["schedulable"]]
                     if len(alice.get("/api/v1/nodes/")) == 2 else None, 60, "both node agents to register")
    assert sorted(n["name"] for n in nodes) == ["stack-a", "stack-b"]
    assert all(n["gpu_count"] == 2 and n["gpu_type"] == "A100" for n in nodes)

    watcher = SocketWatcher(stack, session_cookie(stack, "alice", "tidepool-alice"))
    watcher.start()
    try:
        # A borrower takes every GPU of the pool on idle resources (team-research guarantees none).
        status, borrower = alice.call("POST", "/api/v1/jobs/", {
            "name": "borrower", "workspace": "vision", "quota": "team-research", "idle_mode": "only",
            "command": TRAIN, "fault_tolerance": True,
            "roles": [{"name": "worker", "pod_count": 2, "gpus": 2, "cpu": 1, "memory_gib": 1}]})
        assert status == 201, borrower
        job = f"/api/v1/jobs/{borrower['id']}/"

        def checkpointed() -> dict | None:
            detail = alice.get(job)
            step = (detail["progress"] or {}).get("last_checkpoint_step") or 0
            return detail if detail["status"] == "Running" and step >= 40 else None

        running = wait_for(checkpointed, 60, "the borrower to run on both workers and checkpoint")
        assert running["in_quota"] is False and sorted(running["nodes"]) == ["stack-a", "stack-b"]
        assert {pod["node"] for pod in running["pods"]} == {"stack-a", "stack-b"}
        saved_before = running["progress"]["last_checkpoint_step"]

        # The owner's In Quota job reclaims it.
        status, owner = alice.call("POST", "/api/v1/jobs/", {
            "name": "owner", "workspace": "vision", "quota": "team-vision", "idle_mode": "off",
            "command": "echo owner; sleep 4",
            "roles": [{"name": "worker", "pod_count": 1, "gpus": 2, "cpu": 1, "memory_gib": 1}]})
        assert status == 201, owner
        finished = wait_for(lambda: (d := alice.get(f"/api/v1/jobs/{owner['id']}/"))["status"] == "Succeeded" and d,
                            60, "the owner's job to reclaim, run and succeed")
        # A finished job shows no admission badge (in_quota null); its admission is in its events.
        assert any(e["kind"] == "admitted" and "In Quota" in e["reason"] and "Not in Quota" not in e["reason"]
                   for e in finished["events"]), finished["events"]
        events = alice.get(job)["events"]
        assert any(e["kind"] == "preempted" and "team-vision" in e["reason"] for e in events), events

        # The borrower queues again by itself and resumes from its checkpoint.
        def resumed() -> dict | None:
            detail = alice.get(job)
            progress = detail["progress"] or {}
            return detail if detail["status"] == "Running" and progress.get("resumed_from_step") else None

        again = wait_for(resumed, 60, "the borrower to resume from its checkpoint")
        assert again["progress"]["resumed_from_step"] >= saved_before
        assert again["attempt"] == 2 and sorted(again["nodes"]) == ["stack-a", "stack-b"]
        status, _ = alice.call("POST", f"{job}stop/")
        assert status == 200
        wait_for(lambda: alice.get(job)["status"] == "Stopped", 30, "the borrower to stop")
        # The websocket's update comes after the commit the API already shows: give it time to arrive.
        wait_for(lambda: any(str(borrower["id"]) in json.dumps(m) and "Stopped" in json.dumps(m)
                             for _, m in watcher.messages), 15, "the websocket to show the borrower Stopped")
    finally:
        watcher.close()

    assert watcher.closed_early is None, watcher.closed_early
    updates = [m for _, m in watcher.messages if m.get("type") in ("rows", "snapshot")]
    assert len(updates) >= 4, watcher.messages  # snapshot, then the borrower's and the owner's changes
    assert any(str(borrower["id"]) in json.dumps(m) and "Stopped" in json.dumps(m) for m in updates)
