#!/usr/bin/env python3
"""How long an elastic torchrun job takes to train again after a shrink, and with grown pods after a growth.

    .venv/bin/python scripts/bench_elastic_resize.py --rounds 3

Starts the embedded default (`manage.py serve`: SQLite, the scheduler every 0.5 s, host-process pods) on
the demo cluster in a throwaway directory, as the browser tests do, and tells issue 24's story on its
Lingjun pool (2 × 8 H800, virtual GPUs) through the REST API: alice's 8-GPU job fills lj-vision's
guarantee, bob's 4-GPU job 4 of lj-language's 6, and alice's elastic job (1 to 4 pods of 1 GPU, idle
resources acceptable; `torchrun examples/elastic_train.py` in each pod) grows onto the last 4 GPUs (the
pool's grow interval set to `--grow-interval` s). Then, each round:

- **shrink**: bob submits a 2-pod In Quota job; timed from that submission to the shrink (the job's
  `shrink_count` goes up), to bob's job Running, and to the elastic job's next training step in a world
  of 2 (its rank-0 pod's log, read through the API as it grows);
- **growth**: bob stops his job; timed from the stop to the growth (`grow_count` goes up) and to the
  first training step in a world of 4 (every pod, the grown ones too, takes part in each step).

With `--url`, the same story runs against a console already up, such as the production stack
(`bin/cluster start --seed`: nginx + gunicorn, PostgreSQL, Redis, run_scheduler, node agents; pods as
Podman containers by default) on seed_cluster's quotas for 2 nodes × 4 GPUs: alice's 4-GPU job fills
`general`'s own 4, bob's elastic job (team-language, which guarantees nothing: idle resources) grows
onto team-vision's node, alice's 2-pod In Quota job in team-vision shrinks it to 2 and its stop lets it
grow back. The tokens and the pool's grow interval are made with `manage.py shell` on the stack's
database (`--database-url`, default $DATABASE_URL); `--image` names a pod image with torch
(`bin/build-pod-image --with-torch --print-name`), whose examples are in /opt/tidepool/examples:

    .venv/bin/python scripts/bench_elastic_resize.py --rounds 3 --url http://127.0.0.1:8170 \
        --database-url postgres://postgres@127.0.0.1:5432/tidepool_elastic_stack \
        --image "$(bin/build-pod-image --with-torch --print-name)"

The job is never preempted nor restarted (checked each round). Polls every 0.1 s, so each figure is
within about 0.1 s plus one API round trip. Bounded: every wait gives up after `--timeout` s with what it
waited for. Prints one line per round, the medians, the load average before and after, and one JSON line.
Needs torch in the venv (`.venv/bin/pip install torch==2.13.0`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
TORCHRUN = Path(PYTHON).parent / "torchrun"
POLL_S = 0.1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="shrinks and growths to time (default 3)")
    parser.add_argument("--grow-interval", type=int, default=5, help="the Lingjun pool's grow_interval_s (5)")
    parser.add_argument("--step-sleep", type=float, default=0.2, help="elastic_train.py's pause per step (0.2 s)")
    parser.add_argument("--timeout", type=float, default=180, help="the longest wait for any one step (180 s)")
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep it (the server's log, the pods' logs)")
    parser.add_argument("--url", help="a console already up (the production stack): start no server, use "
                        "seed_cluster's quotas")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"),
                        help="with --url: its database, for the tokens and the grow interval ($DATABASE_URL)")
    parser.add_argument("--image", default="", help="with --url: the pods' image (one with torch, for containers)")
    parser.add_argument("--torchrun", help="the command that starts torchrun in a pod (default: this venv's with "
                        "host pods, `torchrun` with --image)")
    parser.add_argument("--examples", help="where examples/ lies in a pod (default: this checkout's; with --image "
                        "/opt/tidepool/examples)")
    return parser.parse_args()


def wait_until(condition: Callable[[], Any], timeout: float, what: str | Callable[[], str]) -> Any:
    """`condition()`'s first true value; gives up after `timeout` s, saying `what` it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value is not None and value is not False:  # a line number 0 is an answer
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what if isinstance(what, str) else what()}")
        time.sleep(POLL_S)


class Api:
    """The REST API v1 as one user (a personal token)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise SystemExit(f"{method} /api/v1/{path}: {error.code} {error.read()[:500]!r}") from None

    def submit(self, name: str, workspace: str, quota: str, command: str, pods: int, gpus: int,
               min_pods: int | None = None, idle_mode: str = "off", image: str = "") -> int:
        role = {"name": "worker", "pod_count": pods, "min_pod_count": min_pods, "gpus": gpus, "cpu": 1,
                "memory_gib": 4}
        body = {"name": name, "workspace": workspace, "quota": quota, "command": command, "roles": [role],
                "idle_mode": idle_mode}
        if image:
            body["image"] = image
        job = self.call("POST", "jobs/", body)
        return int(job["id"])

    def job(self, job_id: int) -> dict:
        return self.call("GET", f"jobs/{job_id}/")


class RankZeroLog:
    """The job's rank-0 pod's log (a base pod: no resize touches it) as it grows; its step lines in order."""

    def __init__(self, api: Api, job_id: int) -> None:
        self.api, self.job_id = api, job_id
        self.pod: int | None = None
        self.offset = 0
        self.text = ""

    def steps(self) -> list[tuple[int, int]]:
        query = f"shown={self.pod}&offset={self.offset}" if self.pod is not None else "lines=5000"
        data = self.api.call("GET", f"jobs/{self.job_id}/logs/?{query}")
        if data.get("pod") is not None:
            self.text = data["text"] if data["reset"] else self.text + data["text"]
            self.pod, self.offset = data["pod"]["id"], data["offset"]
        found = []
        for line in self.text.splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == "step" and words[2] == "world":
                found.append((int(words[1]), int(words[3])))
        return found

    def describe(self, world: int) -> str:
        tail = " | ".join(self.text.splitlines()[-3:])
        return f"training in a world of {world} (log of pod {self.pod} read to byte {self.offset}: ...{tail[-300:]})"

    def training_in(self, world: int, after_line: int) -> Callable[[], int | None]:
        """A condition: the line number of a step taken in a world of `world` pods after line `after_line`."""
        def found() -> int | None:
            steps = self.steps()
            return next((n for n, (_, size) in enumerate(steps) if n > after_line and size == world), None)
        return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_script(resource_type: str, grow_interval: int) -> str:
    """manage.py shell code: the pool's policy (grow interval `grow_interval`), then alice's and bob's tokens."""
    return (
        "import json\n"
        "from django.contrib.auth import get_user_model\n"
        "from scheduler.services.pool_policies import pool_policy_set\n"
        "from scheduler.services.tokens import token_create\n"
        "users = get_user_model().objects\n"
        f"pool_policy_set(user=users.get(username='admin'), resource_type={resource_type!r}, idle_share='fifo',"
        f" min_runtime_s=0, starvation_s=0, grow_interval_s={grow_interval})\n"
        "print(json.dumps({name: token_create(user=users.get(username=name), name='bench').secret"
        " for name in ('alice', 'bob')}))\n"
    )


def prepare_stack(database_url: str, grow_interval: int) -> dict[str, str]:
    """On a stack's database (seed_cluster's users): the general pool's grow interval; alice's and bob's tokens."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": database_url, "DEBUG": "1"}
    made = subprocess.run([PYTHON, str(ROOT / "manage.py"), "shell", "-c", setup_script("general", grow_interval)],
                          cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=120)
    return json.loads(made.stdout.strip().splitlines()[-1])


def start_server(base: Path, grow_interval: int) -> tuple[subprocess.Popen, str, dict[str, str]]:
    """The embedded default on the demo cluster (as tests/e2e/conftest.py starts it); tokens for alice and bob."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": f"sqlite:///{base / 'db.sqlite3'}",
           "TIDEPOOL_DATA_DIR": str(base / "var"), "TIDEPOOL_SCHEDULER_INTERVAL": "0.5",
           "TIDEPOOL_GRACE_SECONDS": "8", "TIDEPOOL_EXECUTOR": "local", "DEBUG": "1", "TIDEPOOL_HTTPS": "0",
           "ALLOWED_HOSTS": "127.0.0.1", "TIDEPOOL_POD_ENV_ALLOW": "PATH,LANG,LC_*"}
    env.pop("REDIS_URL", None)
    manage = [PYTHON, str(ROOT / "manage.py")]
    for command in (["migrate", "--no-input", "-v0"], ["seed_demo"]):
        subprocess.run([*manage, *command], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    made = subprocess.run([*manage, "shell", "-c", setup_script("lingjun", grow_interval)], cwd=ROOT, env=env, check=True, capture_output=True,
                          text=True, timeout=120)
    tokens = json.loads(made.stdout.strip().splitlines()[-1])
    port = free_port()
    log = (base / "server.log").open("wb")
    server = subprocess.Popen([*manage, "serve", "--addr", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; see {base / 'server.log'}")
        try:
            with urllib.request.urlopen(f"{url}/accounts/login/", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(answers, 120, "the server to answer")
    return server, url, tokens


def stop_server(server: subprocess.Popen) -> None:
    """Interrupt it (it stops its pods), then kill its process group if it lingers."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


def counted(api: Api, job_id: int, counter: str, was: int) -> Callable[[], bool]:
    """A condition: the job's `counter` went up from `was`."""
    return lambda: api.job(job_id)[counter] > was


# Who does what: (user, workspace, quota) of the fillers (and their GPUs), the elastic job and the owner's job.
# The demo's Lingjun pool (2 × 8): alice's 8 and bob's 4 leave 4 idle; alice's elastic job borrows them, bob
# claims 2 In Quota. seed_cluster (2 × 4): alice's 4 in `general` fill its own share, bob's elastic job
# (team-language: nothing guaranteed) borrows team-vision's node, alice claims 2 of it In Quota.
EMBEDDED_CAST = {"fills": [("alice", "vision", "lj-vision", 8), ("bob", "language", "lj-language", 4)],
                 "elastic": ("alice", "vision", "lj-vision"), "owner": ("bob", "language", "lj-language")}
STACK_CAST = {"fills": [("alice", "vision", "general", 4)],
              "elastic": ("bob", "language", "team-language"), "owner": ("alice", "vision", "team-vision")}


def story(url: str, tokens: dict[str, str], args: argparse.Namespace, cast: dict) -> list[dict[str, float]]:
    apis = {name: Api(url, token) for name, token in tokens.items()}
    running = lambda api, job_id: lambda: api.job(job_id)["status"] == "Running"  # noqa: E731
    for number, (user, workspace, quota, gpus) in enumerate(cast["fills"]):
        filler = apis[user].submit(f"bench-fill-{number}", workspace, quota, "sleep 3600", 1, gpus, image=args.image)
        wait_until(running(apis[user], filler), args.timeout, f"{user}'s filler in {quota} Running")
    torchrun = args.torchrun or ("torchrun" if args.image else str(TORCHRUN))
    examples = args.examples or ("/opt/tidepool/examples" if args.image else str(ROOT / "examples"))
    command = f"{torchrun} {examples}/elastic_train.py --step-sleep {args.step_sleep} --checkpoint-every 5"
    user, workspace, quota = cast["elastic"]
    alice = apis[user]  # the elastic job's owner (alice on the demo)
    elastic = alice.submit("bench-elastic", workspace, quota, command, 4, 1, min_pods=1, idle_mode="acceptable",
                           image=args.image)
    user, claim_workspace, claim_quota = cast["owner"]
    bob = apis[user]  # the owner who claims 2 GPUs back (bob on the demo)
    log = RankZeroLog(alice, elastic)
    wait_until(log.training_in(4, -1), args.timeout, lambda: log.describe(4))
    rounds = []
    for number in range(1, args.rounds + 1):
        shrinks = alice.job(elastic)["shrink_count"]
        mark = len(log.steps()) - 1
        submitted = time.monotonic()
        claim = bob.submit(f"bench-claim-{number}", claim_workspace, claim_quota, "sleep 3600", 2, 1, image=args.image)
        wait_until(counted(alice, elastic, "shrink_count", shrinks), args.timeout, "the shrink")
        shrunk = time.monotonic()
        wait_until(running(bob, claim), args.timeout, "bob's job Running")
        owner_running = time.monotonic()
        mark = wait_until(log.training_in(2, mark), args.timeout, lambda: log.describe(2))
        trained_shrunk = time.monotonic()
        growths = alice.job(elastic)["grow_count"]
        stopped = time.monotonic()
        bob.call("POST", f"jobs/{claim}/stop/", {})
        wait_until(counted(alice, elastic, "grow_count", growths), args.timeout, "the growth")
        grown = time.monotonic()
        wait_until(log.training_in(4, mark), args.timeout, lambda: log.describe(4))
        trained_grown = time.monotonic()
        after = alice.job(elastic)
        if (after["status"], after["preemption_count"], after["restart_count"]) != ("Running", 0, 0):
            raise SystemExit(f"the elastic job was preempted or restarted: {after}")
        rounds.append({
            "shrink_decided_s": shrunk - submitted, "owner_running_s": owner_running - submitted,
            "shrunk_training_s": trained_shrunk - submitted,
            "growth_decided_s": grown - stopped, "grown_training_s": trained_grown - stopped,
        })
        row = rounds[-1]
        print(f"round {number}: owner's submission → shrink {row['shrink_decided_s']:.1f} s, owner Running "
              f"{row['owner_running_s']:.1f} s, shrunk job training again {row['shrunk_training_s']:.1f} s; "
              f"owner's stop → growth {row['growth_decided_s']:.1f} s, grown job training "
              f"{row['grown_training_s']:.1f} s", flush=True)
    return rounds


def main() -> int:
    args = parse_args()
    if not args.url and not TORCHRUN.exists():
        print(f"needs torch in the venv ({TORCHRUN} is missing): .venv/bin/pip install torch==2.13.0")
        return 2
    # A SIGTERM (timeout(1), Ctrl-C's sibling) ends the run through `finally`: the server stops its pods.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_before = os.getloadavg()
    if args.url:
        if not args.database_url:
            print("--url needs the stack's database: --database-url or $DATABASE_URL")
            return 2
        stack = f"production stack at {args.url}" + (f" (image {args.image})" if args.image else "")
        rounds = story(args.url.rstrip("/"), prepare_stack(args.database_url, args.grow_interval), args, STACK_CAST)
    else:
        stack = "embedded default (SQLite, host pods)"
        with tempfile.TemporaryDirectory(prefix="tidepool-bench-elastic-") as directory:
            base = Path(args.keep or directory)
            base.mkdir(parents=True, exist_ok=True)
            server, url, tokens = start_server(base, args.grow_interval)
            try:
                rounds = story(url, tokens, args, EMBEDDED_CAST)
            finally:
                stop_server(server)
    load_after = os.getloadavg()
    medians = {key: round(statistics.median(row[key] for row in rounds), 2) for key in rounds[0]}
    print(f"medians over {len(rounds)} rounds: shrunk job training again {medians['shrunk_training_s']:.1f} s after "
          f"the owner's submission (shrink decided {medians['shrink_decided_s']:.1f} s, owner Running "
          f"{medians['owner_running_s']:.1f} s); grown job training {medians['grown_training_s']:.1f} s after the "
          f"owner's stop (growth decided {medians['growth_decided_s']:.1f} s)")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); {os.cpu_count()} CPUs")
    print(json.dumps({"stack": stack, "rounds": [
        {key: round(value, 2) for key, value in row.items()} for row in rounds], "medians": medians,
        "grow_interval_s": args.grow_interval, "load_before": load_before, "load_after": load_after}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
