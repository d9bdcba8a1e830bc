"""The node agent end to end (DESIGN §6): a real console (`manage.py serve`, embedded scheduler,
TIDEPOOL_EXECUTOR=agents) and a real `bin/node-agent` process (as docs/operations.md runs it) that holds only its
node's key (added with `tidepool node-key add`) and the console's URL.

- its environment has no DATABASE_URL, SECRET_KEY, REDIS_URL (checked in /proc), and it imports no Django;
- a job's pod is started by the agent and reported through the node API: Running, then Succeeded,
  its output in its log, which the console reads from the agent (a signed one-use ticket);
- stopping the agent leaves a running pod running; the next agent adopts it and reports its exit:
  same attempt, no preemption, no restart;
- a rotated key stops the old agent (refused, exit status 4), nothing reported by it after that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.smoke.processes import (
    MARKER_VARIABLE,
    answers,
    free_port,
    kill_groups,
    marked_processes,
    new_marker,
    stop_servers,
)
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CONTROL_PLANE_SECRETS = (b"DATABASE_URL=", b"SECRET_KEY=", b"REDIS_URL=", b"CELERY_BROKER_URL=")


class Cluster:
    def __init__(self, base: Path, marker: str, url: str, env: dict[str, str]) -> None:
        self.base, self.marker, self.url, self.env = base, marker, url, env
        self.agents: list[subprocess.Popen] = []

    def manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True, timeout=180).stdout

    def token(self, username: str) -> str:
        code = ("from django.contrib.auth.models import User; from scheduler.services.tokens import token_create;"
                f"print(token_create(user=User.objects.get(username='{username}'), name='test').secret)")
        return self.manage("shell", "-c", code).strip().splitlines()[-1]

    def tidepool(self, token: str, *args: str) -> subprocess.CompletedProcess:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.base), "XDG_CONFIG_HOME": str(self.base / "cli"),
               "TIDEPOOL_SERVER": self.url, "TIDEPOOL_TOKEN": token}
        return subprocess.run([sys.executable, "-m", "tidepool_cli", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60)

    def start_agent(self, key: str, log_name: str) -> subprocess.Popen:
        # Built from nothing: what a node would hold, and only that.
        env = {"PATH": os.environ["PATH"], "HOME": str(self.base), "TIDEPOOL_CONSOLE_URL": self.url,
               "TIDEPOOL_NODE_KEY": key, "TIDEPOOL_NODE_GPUS": "2", "TIDEPOOL_NODE_GPU_TYPE": "A100",
               "TIDEPOOL_NODE_CPU": "16", "TIDEPOOL_NODE_MEMORY_GIB": "64", "TIDEPOOL_AGENT_POLL_SECONDS": "0.3",
               "PYTHONUNBUFFERED": "1", MARKER_VARIABLE: self.marker}
        out = (self.base / log_name).open("wb")
        env["TIDEPOOL_PYTHON"] = sys.executable  # bin/node-agent's interpreter (default .venv/bin/python)
        agent = subprocess.Popen([str(ROOT / "bin" / "node-agent")], cwd=self.base, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        self.agents.append(agent)
        return agent

    def api(self, token: str, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("agent-e2e")
    marker = new_marker()
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("TIDEPOOL_")}
    env.update(DATABASE_URL=f"sqlite:///{base / 'db.sqlite3'}", TIDEPOOL_DATA_DIR=str(base / "var"),
               TIDEPOOL_EXECUTOR="agents", TIDEPOOL_EMBEDDED_SCHEDULER="1", TIDEPOOL_SCHEDULER_INTERVAL="0.5",
               TIDEPOOL_RECONCILE_SECONDS="0.5", TIDEPOOL_GRACE_SECONDS="3", TIDEPOOL_HEARTBEAT_SECONDS="1",
               TIDEPOOL_LEASE_SECONDS="6", TIDEPOOL_POD_ENV_ALLOW=f"PATH,LANG,{MARKER_VARIABLE}",
               DEBUG="1", TIDEPOOL_HTTPS="0", PYTHONUNBUFFERED="1", **{MARKER_VARIABLE: marker})
    url = f"http://127.0.0.1:{port}"
    cluster = Cluster(base, marker, url, env)
    cluster.manage("migrate", "--no-input", "-v0")
    cluster.manage("seed_cluster", "--nodes", "1", "--gpus", "2")
    with (base / "server.log").open("wb") as out:
        server = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "serve", "--addr", "127.0.0.1",
                                   "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not answers(f"{url}/accounts/login/"):
            assert server.poll() is None and time.monotonic() < deadline, (base / "server.log").read_text()[-3000:]
            time.sleep(0.3)
        yield cluster
    finally:
        for agent in cluster.agents:
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
                agent.wait(20)
        kill_groups(marked_processes(marker))  # pods the agents left running (by design) go with the test
        stop_servers([server], marker, timeout=40)


def running_commands(marker: str, text: bytes) -> list[int]:
    """Live processes carrying the test's marker whose command line holds `text` (a pod's)."""
    found = []
    for pid in marked_processes(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def submit(cluster: Cluster, token: str, name: str, command: str) -> int:
    body = {"name": name, "workspace": "vision", "quota": "team-vision", "command": command, "idle_mode": "off",
            "roles": [{"name": "worker", "pod_count": 1, "gpus": 1, "gpu_type": "A100", "cpu": 1, "memory_gib": 1}]}
    return cluster.api(token, "POST", "jobs/", body)["id"]


def job(cluster: Cluster, token: str, job_id: int) -> dict[str, Any]:
    return cluster.api(token, "GET", f"jobs/{job_id}/")


def test_a_pod_started_and_reported_by_the_agent_with_its_key_only(cluster: Cluster) -> None:
    admin, alice = cluster.token("admin"), cluster.token("alice")
    added = cluster.tidepool(admin, "node-key", "add", "node-a")
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip()
    agent = cluster.start_agent(key, "agent-1.log")
    wait_for(lambda: any(n["name"] == "node-a" for n in cluster.api(admin, "GET", "nodes/")), 60,
             "the agent to register node-a", step=0.3)
    with open(f"/proc/{agent.pid}/environ", "rb") as f:
        environ = f.read().split(b"\0")
    assert not [v for v in environ if v.startswith(CONTROL_PLANE_SECRETS)]
    assert agent.poll() is None

    job_id = submit(cluster, alice, "hello-agent", "echo hello from the agent; env; sleep 1; echo done")
    wait_for(lambda: job(cluster, alice, job_id)["status"] == "Succeeded", 60, "the job to succeed", step=0.3)
    detail = job(cluster, alice, job_id)
    pod = detail["pods"][0]
    assert (pod["node"], pod["status"], pod["exit_code"]) == ("node-a", "Succeeded", 0)
    kinds = [event["kind"] for event in detail["events"]]
    assert "running" in kinds and "succeeded" in kinds, kinds
    logs = cluster.api(alice, "GET", f"jobs/{job_id}/logs/?lines=200")
    assert "hello from the agent" in logs["text"]
    # The pod's environment holds its job's own and nothing of its agent's: not the node's key, not the
    # console's address (the agent's environment is not passed on; TIDEPOOL_POD_ENV_ALLOW names what is).
    assert "done" in logs["text"], logs["text"][-2000:]
    assert key not in logs["text"] and "TIDEPOOL_NODE_KEY" not in logs["text"]
    assert "TIDEPOOL_CONSOLE_URL" not in logs["text"]


def test_an_agent_restart_adopts_the_running_pod(cluster: Cluster) -> None:
    admin, alice = cluster.token("admin"), cluster.token("alice")
    first = next(agent for agent in cluster.agents if agent.poll() is None)
    job_id = submit(cluster, alice, "outlives-its-agent", "sleep 6; echo finished")
    wait_for(lambda: job(cluster, alice, job_id)["status"] == "Running", 60, "the job to run", step=0.3)
    first.send_signal(signal.SIGTERM)
    assert first.wait(20) == 0
    # The pod (it inherits the test's marker through TIDEPOOL_POD_ENV_ALLOW) runs on without its agent.
    assert running_commands(cluster.marker, b"sleep 6"), "the pod died with its agent"
    # Logs come from the pod's node's agent (a signed ticket), not from the console's disk: with the
    # agent stopped, the console says so even though the file is on this machine.
    request = urllib.request.Request(f"{cluster.url}/api/v1/jobs/{job_id}/logs/",
                                     headers={"Authorization": f"Bearer {alice}"})
    with pytest.raises(urllib.error.HTTPError) as unavailable:
        urllib.request.urlopen(request, timeout=10)
    assert unavailable.value.code == 503 and b"did not answer" in unavailable.value.read()
    assert job(cluster, alice, job_id)["status"] == "Running"
    key = cluster.tidepool(admin, "node-key", "rotate", "node-a").stdout.strip()
    cluster.start_agent(key, "agent-2.log")
    wait_for(lambda: job(cluster, alice, job_id)["status"] == "Succeeded", 60, "the adopted pod's exit", step=0.3)
    detail = job(cluster, alice, job_id)
    assert detail["attempt"] == 1 and detail["restart_count"] == 0 and detail["preemption_count"] == 0
    assert [p["exit_code"] for p in detail["pods"]] == [0]
    assert "finished" in cluster.api(alice, "GET", f"jobs/{job_id}/logs/?lines=20")["text"]  # from the new agent
    assert "adopted 1 running pods" in (cluster.base / "agent-2.log").read_text()


def test_a_rotated_key_stops_the_old_agent(cluster: Cluster) -> None:
    admin = cluster.token("admin")
    running = next(agent for agent in cluster.agents if agent.poll() is None)
    assert cluster.tidepool(admin, "node-key", "rotate", "node-a").returncode == 0
    assert running.wait(30) == 4
