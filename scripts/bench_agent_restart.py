#!/usr/bin/env python3
"""An agent restart (an upgrade) with running pods: how long, and that nothing is lost (issue 23).

    .venv/bin/python scripts/bench_agent_restart.py --pods 10

A throwaway console (`manage.py serve`, SQLite, embedded scheduler, TIDEPOOL_EXECUTOR=agents) and one
node agent (`bin/node-agent`, its node's key only, host pods); `--pods` one-GPU jobs running
`sleep 613`. Then the agent gets SIGTERM and a new one starts with the same key. Measured: the stop
(SIGTERM → the agent's exit), the start (process start → "adopted N running pods" in its log: it
registered, took the node's lease and re-attached every pod) and the whole restart (SIGTERM → adopted).
Checked: every pod process lives on, every job is still Running at attempt 1 with no preemption
and no restart. Prints one JSON line, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wait_until(condition, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise SystemExit(f"timed out waiting for {what}")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10)
    args = parser.parse_args()
    load_before = os.getloadavg()
    base = Path(tempfile.mkdtemp(prefix="tidepool-agent-restart-"))
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("TIDEPOOL_")}
    env.update(DATABASE_URL=f"sqlite:///{base / 'db.sqlite3'}", TIDEPOOL_DATA_DIR=str(base / "var"),
               TIDEPOOL_EXECUTOR="agents", TIDEPOOL_EMBEDDED_SCHEDULER="1", TIDEPOOL_SCHEDULER_INTERVAL="0.5",
               DEBUG="1", TIDEPOOL_HTTPS="0", PYTHONUNBUFFERED="1")

    def manage(*argv: str) -> str:
        return subprocess.run([sys.executable, str(ROOT / "manage.py"), *argv], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True, timeout=300).stdout

    manage("migrate", "--no-input", "-v0")
    manage("seed_cluster", "--nodes", "1", "--gpus", str(args.pods), "--cpu", str(2 * args.pods),
           "--memory-gib", str(4 * args.pods))
    made = manage("shell", "-c", "from django.contrib.auth.models import User; "
                  "from scheduler.services.tokens import token_create as t; "
                  "from scheduler.services.node_keys import node_key_create as k; "
                  "print(t(user=User.objects.get(username='alice'), name='bench').secret); "
                  "print(k(node_name='bench-node').secret)").split()
    token, key = made[-2], made[-1]
    server = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "serve", "--addr", "127.0.0.1", "--port",
                               str(port)], cwd=ROOT, env=env, stdout=(base / "server.log").open("wb"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    agents: list[subprocess.Popen] = []

    def start_agent(name: str) -> tuple[subprocess.Popen, float]:
        agent_env = {"PATH": os.environ["PATH"], "HOME": str(base), "TIDEPOOL_CONSOLE_URL": url,
                     "TIDEPOOL_NODE_KEY": key, "TIDEPOOL_NODE_GPUS": str(args.pods),
                     "TIDEPOOL_NODE_GPU_TYPE": "A100", "TIDEPOOL_NODE_CPU": str(2 * args.pods),
                     "TIDEPOOL_NODE_MEMORY_GIB": str(4 * args.pods), "TIDEPOOL_PYTHON": sys.executable,
                     "PYTHONUNBUFFERED": "1"}
        started = time.monotonic()
        agent = subprocess.Popen([str(ROOT / "bin" / "node-agent")], env=agent_env,
                                 stdout=(base / f"{name}.log").open("wb"), stderr=subprocess.STDOUT,
                                 start_new_session=True)
        agents.append(agent)
        return agent, started

    def api(method: str, path: str, body=None):
        request = urllib.request.Request(f"{url}/api/v1/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    job_ids: list[int] = []
    try:
        wait_until(lambda: answers(f"{url}/accounts/login/"), 120, "the console")
        first, _ = start_agent("agent-1")
        wait_until(lambda: api("GET", "nodes/"), 60, "the node to register")
        for index in range(args.pods):
            job_ids.append(api("POST", "jobs/", {
                "name": f"restart-{index}", "workspace": "vision", "quota": "team-vision", "command": "sleep 613",
                "idle_mode": "off", "roles": [{"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 1,
                                                "memory_gib": 1}]})["id"])
        wait_until(lambda: all(api("GET", f"jobs/{j}/")["status"] == "Running" for j in job_ids), 180,
                   "every job to run", step=0.5)
        sleeping = lambda: len([p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == b"sleep\x00613\x00"])  # noqa: E731
        before = sleeping()
        stop_at = time.monotonic()
        first.send_signal(signal.SIGTERM)
        first.wait(60)
        stopped = time.monotonic() - stop_at
        alive_between = sleeping()
        _second, started = start_agent("agent-2")
        pattern = re.compile(rb"adopted (\d+) running pods")
        adopted = wait_until(lambda: pattern.search((base / "agent-2.log").read_bytes()), 120, "the adoption")
        adopted_at = time.monotonic()
        time.sleep(3)  # a few passes of the new agent: nothing may be stopped or restarted
        jobs = [api("GET", f"jobs/{j}/") for j in job_ids]
        result = {
            "pods": args.pods, "stop_s": round(stopped, 3), "start_to_adopted_s": round(adopted_at - started, 3),
            "sigterm_to_adopted_s": round(adopted_at - stop_at, 3), "adopted": int(adopted.group(1)),
            "pod_processes_before_between_after": [before, alive_between, sleeping()],
            "all_running_attempt_1": all(j["status"] == "Running" and j["attempt"] == 1 for j in jobs),
            "preemptions": sum(j["preemption_count"] for j in jobs), "restarts": sum(j["restart_count"] for j in jobs),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
        }
        print(json.dumps(result))
    finally:
        for job_id in job_ids:
            try:
                api("POST", f"jobs/{job_id}/stop/")
            except OSError:
                pass
        time.sleep(8)  # the agent's next passes stop the pods (grace: TIDEPOOL_GRACE_SECONDS)
        for process in [*agents, server]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(60)


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


if __name__ == "__main__":
    main()
