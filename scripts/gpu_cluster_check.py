"""Check a GPU node through the whole control plane: a console, its scheduler and a node agent on this
machine, an idle-resources training job reclaimed for its quota's owner, and resumed from its checkpoint.

    python scripts/gpu_cluster_check.py           # on a GPU node (PyTorch, nvidia-ml-py and the console's packages)
    python scripts/gpu_cluster_check.py --cpu     # anywhere: a declared 1-GPU node, the job on the CPU (CI runs this)

What runs, as docs/operations.md runs it: `manage.py migrate`, `manage.py seed_cluster` sized for this node,
`manage.py serve` (SQLite, the embedded scheduler, TIDEPOOL_EXECUTOR=agents), a node key from `tidepool
node-key add`, and `bin/node-agent` holding only that key and the console's URL, which registers the node
with what NVML sees and sends GPU samples with its heartbeats. Then, through the API as alice:
1. `examples/train_cuda.py` on all the node's GPUs in quota team-research (which guarantees nothing) with
   Idle Resources: it runs Not in Quota on team-vision's idle GPUs;
2. once it has trained a while, a short job of team-vision on the same GPUs: the scheduler reclaims them,
   the agent sends the borrower SIGTERM, it saves a checkpoint and shows Preempted;
3. the owner's job runs and succeeds; the borrower runs again, "resumed from step N", and succeeds.
Every step prints a line; the last is a JSON summary (exit status 0), or FAILED and why (1). Everything it
started is stopped before it exits; its files stay in `--dir` (default: a new temporary directory).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpu_node_check import NO_GPUS, CheckFailed, new_check_dir, say  # noqa: E402  (the script beside this one)

from scheduler.node.runtime.gpus import detect_gpus  # noqa: E402

NODE = "gpu-check-node"
POLL_S = 0.5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="declare a 1-GPU node and train on the CPU")
    parser.add_argument("--dir", help="a new or empty directory for the database, logs and pods")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds any one wait may take")
    return parser.parse_args(argv)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, condition: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL_S)
    return value


class Stack:
    """The console, the agent and the API calls of one check."""

    def __init__(self, base: Path, cpu: bool) -> None:
        self.base, self.cpu = base, cpu
        self.url = f"http://127.0.0.1:{free_port()}"
        self.processes: list[subprocess.Popen] = []
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("TIDEPOOL_")}  # fmt: skip
        self.env.update(
            DATABASE_URL=f"sqlite:///{base / 'db.sqlite3'}", TIDEPOOL_DATA_DIR=str(base / "var"),
            TIDEPOOL_EXECUTOR="agents", TIDEPOOL_EMBEDDED_SCHEDULER="1", TIDEPOOL_SCHEDULER_INTERVAL="0.5",
            TIDEPOOL_RECONCILE_SECONDS="0.5", TIDEPOOL_HEARTBEAT_SECONDS="1", TIDEPOOL_GRACE_SECONDS="30",
            TIDEPOOL_HTTPS="0", PYTHONUNBUFFERED="1",
            TIDEPOOL_GPU_SAMPLE_SECONDS="2",  # default 60: a round every 2 s, to see a few while the job trains
        )  # fmt: skip
        self.tokens: dict[str, str] = {}

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        if done.returncode != 0:
            raise CheckFailed(f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done.stdout

    def spawn(self, command: list[str], env: dict[str, str], log: str) -> subprocess.Popen:
        with (self.base / log).open("wb") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)  # fmt: skip
        self.processes.append(process)
        return process

    def token(self, username: str) -> str:
        code = ("from django.contrib.auth.models import User; from scheduler.services.tokens import token_create;"
                f"print(token_create(user=User.objects.get(username='{username}'), name='gpu-check').secret)")  # fmt: skip
        self.tokens[username] = self.manage("shell", "-c", code).strip().splitlines()[-1]
        return self.tokens[username]

    def api(self, user: str, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}/api/v1/{path}", method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.tokens[user]}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=15) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            raise CheckFailed(f"{method} /api/v1/{path}: {error.code} {error.read()[:2000]!r}") from error

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        """SIGTERM every process group started here (the agent first: it leaves pods running), then SIGKILL."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
        kill_pods(self.base)


def kill_pods(base: Path) -> None:
    """Pods the agent left running by design: their command lines name their output files in this check's directory."""
    needle = f"{base}/result-".encode()
    for name in os.listdir("/proc"):
        try:
            if needle in Path(f"/proc/{name}/cmdline").read_bytes() and os.getpgid(int(name)) != os.getpgrp():
                os.killpg(os.getpgid(int(name)), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def training(stack: Stack, steps: int) -> str:
    """The job's command: examples/train_cuda.py (its output under the check's directory, to find its pods)."""
    size = ["--hidden", "64", "--batch", "64", "--step-sleep", "0.02", "--device", "cpu"] if stack.cpu else \
        ["--hidden", "8192", "--batch", "8192", "--device", "cuda"]  # fmt: skip
    output = stack.base / f"result-{steps}.json"
    return shlex.join([sys.executable, str(ROOT / "examples" / "train_cuda.py"), "--steps", str(steps),
                       "--checkpoint-every", "100", *size, "--output", str(output)])  # fmt: skip


def submit(stack: Stack, name: str, quota: str, idle_mode: str, gpus: int, gpu_type: str, command: str) -> int:
    body = {"name": name, "workspace": "vision", "quota": quota, "command": command, "idle_mode": idle_mode,
            "fault_tolerance": True,  # a preempted job goes back to the queue at once (DESIGN §3)
            "roles": [{"name": "worker", "pod_count": 1, "gpus": gpus, "gpu_type": gpu_type, "cpu": 1,
                       "memory_gib": 4}]}  # fmt: skip
    return stack.api("alice", "POST", "jobs/", body)["id"]


def job(stack: Stack, job_id: int) -> dict[str, Any]:
    return stack.api("alice", "GET", f"jobs/{job_id}/")


def check(stack: Stack, timeout: float) -> dict[str, Any]:
    summary: dict[str, Any] = {"dir": str(stack.base)}
    inventory = None if stack.cpu else detect_gpus()
    if inventory is None and not stack.cpu:
        raise CheckFailed(NO_GPUS)
    gpu_type, gpus = (inventory.gpu_type, inventory.gpus) if inventory else ("A100", 1)
    stack.manage("migrate", "--no-input", "-v0")
    stack.manage("seed_cluster", "--nodes", "1", "--gpus", str(gpus), "--gpu-type", gpu_type, "--cpu", "4",
                 "--memory-gib", "16")  # fmt: skip
    stack.token("admin"), stack.token("alice")
    server = stack.spawn([sys.executable, str(ROOT / "manage.py"), "serve", "--addr", "127.0.0.1", "--port",
                          stack.url.rsplit(":", 1)[1]], stack.env, "console.log")  # fmt: skip
    wait_for("the console to answer", lambda: stack.answers() or server.poll() is not None, timeout)
    if server.poll() is not None:
        raise CheckFailed(f"the console exited:\n{(stack.base / 'console.log').read_text()[-3000:]}")
    key = subprocess.run([sys.executable, "-m", "tidepool_cli", "node-key", "add", NODE], cwd=ROOT,
                         env={"PATH": os.environ["PATH"], "HOME": str(stack.base), "TIDEPOOL_SERVER": stack.url,
                              "TIDEPOOL_TOKEN": stack.tokens["admin"]},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    if key.returncode != 0:
        raise CheckFailed(f"tidepool node-key add: {key.stderr}")
    # What a node holds, and only that (the agent refuses control-plane credentials).
    agent_env = {"PATH": os.environ["PATH"], "HOME": str(stack.base), "TIDEPOOL_CONSOLE_URL": stack.url,
                 "TIDEPOOL_NODE_KEY": key.stdout.strip(), "TIDEPOOL_PYTHON": sys.executable,
                 "TIDEPOOL_AGENT_POLL_SECONDS": str(POLL_S), "TIDEPOOL_NODE_CPU": "4",
                 "TIDEPOOL_NODE_MEMORY_GIB": "16", "PYTHONUNBUFFERED": "1"}  # fmt: skip
    if stack.cpu:
        agent_env.update(TIDEPOOL_NODE_GPUS="1", TIDEPOOL_NODE_GPU_TYPE="A100")
    stack.spawn([str(ROOT / "bin" / "node-agent")], agent_env, "agent.log")
    node = wait_for("the agent to register its node", lambda: next(
        (n for n in stack.api("admin", "GET", "nodes/") if n["name"] == NODE), None), timeout)
    summary["node"] = node
    say(f"node registered by its agent: {json.dumps(node)}")

    borrower = submit(stack, "borrower", "team-research", "acceptable", gpus, gpu_type, training(stack, 8000 if not stack.cpu else 900))
    wait_for("the borrower to run", lambda: job(stack, borrower)["status"] == "Running", timeout)
    wait_for("the borrower to train 600 steps",
             lambda: ((job(stack, borrower).get("progress") or {}).get("step") or 0) >= 600, timeout)  # fmt: skip
    # The agent sends NVML samples with its heartbeats; a node without NVML sends none.
    def samples_of_borrower() -> list[dict[str, Any]]:
        return stack.api("alice", "GET", f"jobs/{borrower}/gpu/")

    samples = samples_of_borrower() if stack.cpu else wait_for(
        "three GPU samples of the borrower", lambda: (found := samples_of_borrower())[2:] and found, timeout)
    before = job(stack, borrower)
    summary["borrower_running"] = {"in_quota": before.get("in_quota"), "step": before["progress"]["step"],
                                   "gpu_samples": len(samples),
                                   "utilization_percent": [s["utilization_percent"] for s in samples],
                                   "memory_used_mib": [s["memory_used_mib"] for s in samples]}  # fmt: skip
    say(f"borrower running on idle resources: {json.dumps(summary['borrower_running'])}")

    owner = submit(stack, "owner", "team-vision", "off", gpus, gpu_type, training(stack, 1500 if not stack.cpu else 200))
    reclaimed_at = time.monotonic()
    wait_for("the borrower to be Preempted", lambda: job(stack, borrower)["status"] == "Preempted", timeout)
    preempted = job(stack, borrower)
    summary["preemption"] = {"seconds_from_owner_submit": round(time.monotonic() - reclaimed_at, 1),
                             "step_reported": preempted["progress"].get("step"),
                             "events": [(e["kind"], e["reason"]) for e in preempted["events"]][-4:]}  # fmt: skip
    say(f"borrower reclaimed for the owner: {json.dumps(summary['preemption'])}")
    wait_for("the owner's job to succeed", lambda: job(stack, owner)["status"] == "Succeeded", timeout)
    wait_for("the borrower to succeed", lambda: job(stack, borrower)["status"] == "Succeeded", timeout)
    done = job(stack, borrower)
    log = stack.api("alice", "GET", f"jobs/{borrower}/logs/?lines=400")["text"]
    # The step its SIGTERM save reached (after the step shown when it turned Preempted: it trains on
    # through the grace period until its handler saves).
    resumed = (done.get("progress") or {}).get("resumed_from_step")
    summary["borrower_done"] = {"attempt": done.get("attempt"), "preemptions": done.get("preemption_count"),
                                "restarts": done.get("restart_count"), "resumed_from_step": resumed,
                                "events": [(e["kind"], e["reason"]) for e in done["events"]][-5:]}  # fmt: skip
    say(f"borrower resumed and finished: {json.dumps(summary['borrower_done'])}")
    if resumed is None or resumed < 600 or f"resumed from step {resumed}\n" not in log \
            or done.get("preemption_count") != 1:  # fmt: skip
        raise CheckFailed(f"the borrower did not resume once from the step it saved on SIGTERM:\n{log[-3000:]}")
    if done.get("restart_count") != 0:
        raise CheckFailed("the preemption used one of the borrower's restarts")
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = new_check_dir(args.dir, "tidepool-cluster-check-")
    if base is None:
        return 2
    stack = Stack(base, args.cpu)
    try:
        summary = check(stack, args.timeout)
    except CheckFailed as failure:
        say(f"FAILED: {failure}\n(logs: {base}/console.log, {base}/agent.log)")
        return 1
    finally:
        stack.stop()
    say(json.dumps({"ok": True, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
